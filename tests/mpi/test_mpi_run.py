"""Real ``mpiexec`` jobs of ``leasefence run``: every work item completes exactly once.

Each job is small (tens of items, a few seconds) and runs under a timeout; the checks read the
journal and the trace the master wrote, and replay the trace through the model.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from leasefence.conformance.tracecheck import validate
from leasefence.impl.trace import read_trace
from leasefence.impl.workload import generate

pytestmark = pytest.mark.mpi

BIN = Path(sys.executable).parent
TIMEOUT = 240


def leasefence_run(n: int, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "mpiexec"), "-n", str(n), str(BIN / "leasefence"), "run", *args]
    return subprocess.run(
        cmd, cwd=tmp, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )


def done_records(journal: Path) -> Counter[str]:
    """How many ``done`` records the journal holds for each work ID."""
    done: Counter[str] = Counter()
    for line in journal.read_text().splitlines():
        record = json.loads(line)
        if record["event"] == "done":
            done[record["work_id"]] += 1
    return done


def check_exactly_once(tmp: Path, work: int, traces: tuple[str, ...] = ("trace.ndjson",)) -> None:
    """Every one of the ``work`` items has exactly one ``done`` record in the journal and one
    accepted completion in the traces, and each trace replays through the model."""
    expected = {i.work_id for i in generate(work, seed=0)}
    done = done_records(tmp / "journal.jsonl")
    assert set(done) == expected
    assert set(done.values()) == {1}
    completions: Counter[str] = Counter()
    for name in traces:
        completions.update(
            e["w"]
            for e in read_trace(tmp / name)
            if e["event"] == "DeliverResult" and e["ok"] and e["work_ok"]
        )
        with (tmp / name).open() as fh:
            report = validate(fh)
        assert report.ok, report.divergence
    assert set(completions) == expected
    assert set(completions.values()) == {1}


def files(tmp: Path, trace: str = "trace.ndjson") -> list[str]:
    return [
        "--journal",
        str(tmp / "journal.jsonl"),
        "--snapshot",
        str(tmp / "snapshot.json"),
        "--trace",
        str(tmp / trace),
    ]


@pytest.mark.parametrize("ranks", [3, 4])
def test_mpiexec_run_with_faults_completes_every_item_exactly_once(
    ranks: int, tmp_path: Path
) -> None:
    inject = "dup,wrong-id,missing-id,malformed"
    run = leasefence_run(ranks, tmp_path, "--work", "40", "--inject", inject, *files(tmp_path))
    assert run.returncode == 0, run.stderr
    assert "items completed          40 (journal: 40/40 completed)" in run.stdout
    assert "duplicate completions    0" in run.stdout
    check_exactly_once(tmp_path, 40)


def test_mpiexec_run_refuses_late_results_after_their_leases_expire(tmp_path: Path) -> None:
    run = leasefence_run(
        3, tmp_path, "--work", "20", "--ttl", "1", "--inject", "late,dup", *files(tmp_path)
    )
    assert run.returncode == 0, run.stderr
    assert "duplicate completions    0" in run.stdout
    check_exactly_once(tmp_path, 20)


def test_a_second_run_on_the_same_journal_restarts_the_master_and_runs_only_new_work(
    tmp_path: Path,
) -> None:
    # One trace per run: a trace's first Header fixes the work IDs the validator knows.
    first = leasefence_run(
        3, tmp_path, "--work", "15", "--worker", "trivial", *files(tmp_path, "first.ndjson")
    )
    assert first.returncode == 0, first.stderr
    second = leasefence_run(
        3, tmp_path, "--work", "30", "--worker", "trivial", *files(tmp_path, "second.ndjson")
    )
    assert second.returncode == 0, second.stderr
    assert "items completed          15 (journal: 30/30 completed)" in second.stdout
    check_exactly_once(tmp_path, 30, ("first.ndjson", "second.ndjson"))
    events = [e["event"] for e in read_trace(tmp_path / "second.ndjson")]
    assert events[:2] == ["Header", "RestartMaster"]


@pytest.mark.parametrize("poll", ["auto", "spin", "yield", "sleep", "block"])
def test_every_poll_mode_completes_every_item_exactly_once(poll: str, tmp_path: Path) -> None:
    run = leasefence_run(
        3, tmp_path, "--work", "20", "--worker", "trivial", "--poll", poll, *files(tmp_path)
    )
    assert run.returncode == 0, run.stderr
    check_exactly_once(tmp_path, 20)


def test_fewer_than_two_ranks_is_a_clear_usage_error(tmp_path: Path) -> None:
    run = leasefence_run(1, tmp_path, "--work", "5")
    assert run.returncode == 2
    assert "needs at least 2 MPI processes" in run.stderr
