"""Real ``mpiexec -n 2`` jobs of ``leasefence run`` that cannot use their files: each ends with
one line naming the file and the cause, the documented exit status on every rank, no traceback
and no ``MPI_Abort`` (issue 17); and the paths the README uses work although ``run/`` is new."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from leasefence.impl.journal import WorkLeaseJournal
from leasefence.impl.mpirun import EXIT_FILES, EXIT_LOCKED, EXIT_OK

pytestmark = pytest.mark.mpi

BIN = Path(sys.executable).parent
TIMEOUT = 120


def run(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "mpiexec"), "-n", "2", str(BIN / "leasefence"), "run", "--work", "4"]
    cmd += ["--worker", "trivial", *args]
    return subprocess.run(
        cmd, cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def assert_one_clean_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """The job's stderr is one line holding every fragment: no traceback, no MPI abort text."""
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "MPI_Abort" not in proc.stderr + proc.stdout
    assert "application called" not in proc.stderr + proc.stdout
    return lines[0]


def test_missing_parent_directories_are_created_and_the_files_made_0600(tmp_path: Path) -> None:
    proc = run(
        tmp_path,
        "--journal", "run/j.jsonl", "--snapshot", "state/s.json", "--trace", "traces/t.ndjson",
    )  # fmt: skip
    assert proc.returncode == EXIT_OK, proc.stderr
    for name in ("run/j.jsonl", "state/s.json", "traces/t.ndjson"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600, name


def test_a_parent_that_cannot_be_a_directory_is_named_with_exit_3(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("a file, not a directory\n")
    proc = run(tmp_path, "--journal", "plain/j.jsonl")
    assert proc.returncode == EXIT_FILES
    assert_one_clean_line(proc, "plain", "File exists")
    assert (tmp_path / "plain").read_text() == "a file, not a directory\n"


def test_a_journal_locked_by_another_master_exits_4_and_leaves_its_trace_untouched(
    tmp_path: Path,
) -> None:
    first = run(tmp_path, "--journal", "j.jsonl", "--trace", "t.ndjson")
    assert first.returncode == EXIT_OK, first.stderr
    trace = (tmp_path / "t.ndjson").read_bytes()
    holder = WorkLeaseJournal(tmp_path / "j.jsonl")  # the live master's lock
    try:
        proc = run(tmp_path, "--journal", "j.jsonl", "--trace", "t.ndjson")
    finally:
        holder.close()
    assert proc.returncode == EXIT_LOCKED
    assert_one_clean_line(proc, "j.jsonl", "locked", "another master")
    assert (tmp_path / "t.ndjson").read_bytes() == trace  # the lock came before any write


def test_a_corrupt_journal_is_named_with_exit_3_and_left_as_it_was(tmp_path: Path) -> None:
    first = run(tmp_path, "--journal", "j.jsonl")
    assert first.returncode == EXIT_OK, first.stderr
    lines = (tmp_path / "j.jsonl").read_bytes().splitlines(keepends=True)
    corrupt = b"".join([lines[0], b"not a record\n", *lines[1:]])
    (tmp_path / "j.jsonl").write_bytes(corrupt)
    proc = run(tmp_path, "--journal", "j.jsonl")
    assert proc.returncode == EXIT_FILES
    assert_one_clean_line(proc, "j.jsonl", "corrupt", "line 2")
    assert (tmp_path / "j.jsonl").read_bytes() == corrupt


def test_a_corrupt_snapshot_is_named_with_exit_3(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{not json\n")
    proc = run(tmp_path, "--journal", "j.jsonl", "--snapshot", "s.json")
    assert proc.returncode == EXIT_FILES
    assert_one_clean_line(proc, "s.json", "not JSON")
    assert (tmp_path / "s.json").read_text() == "{not json\n"
