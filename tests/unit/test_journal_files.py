"""Hostile files (issue 17): what is not a journal is never altered, nothing is written through a
symbolic link, a read-only journal stays read-only, and ``journal inspect`` prints only what it
means to: control characters escaped, no traceback on a closed pipe, absurd numbers refused."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from leasefence.cli import main
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.errors import (
    JournalReadOnly,
    LeaseError,
    NotAJournal,
    RecordOutOfRange,
    UnsafePath,
)
from leasefence.impl.journal import (
    MAX_RECORD_BYTES,
    MAX_TIMESTAMP,
    MAX_WORKER,
    WorkLeaseJournal,
    encode_batch,
    encode_record,
    parse_line,
    repair_journal,
)
from leasefence.impl.master import Master
from leasefence.impl.trace import TraceWriter
from leasefence.impl.workload import generate

A = "a" * 64
B = "b" * 64
NOW = 1_767_225_600.25


def _record(work_id: str = A, **fields: object) -> bytes:
    body: dict[str, object] = {
        "event": "lease",
        "work_id": work_id,
        "worker": 1,
        "updated": NOW,
        "clock": "unix",
        "attempt": 1,
    }
    body.update(fields)
    return encode_record(body)


FIRST = _record()
#: A first write of several records: one batch line over three sectors.
BATCH = encode_batch([_record(f"{i:064x}") for i in range(8)])
assert len(BATCH) > 1024

#: Files that are not journals: no good record, and not a torn first write either.
NOT_JOURNALS = {
    "passwd": b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/bin/false\n",
    "one line of text without a newline": b"remember the milk",
    "a JSON document on one line": b'{"schema": 1, "clock": "unix", "epoch": 3}',
    "lines that start like records": b'{"event":"lease"}\n{"event":"done"}\n',
    "a record's beginning longer than any record": b'{"event":"' + b"x" * MAX_RECORD_BYTES,
    "a good record cut, then text": FIRST[:40] + b"\nmore text\n",
    "a record's beginning, then a JSON object": FIRST[:20] + b'{"schema": 1}',
    "binary data": b"\0\0\x7fELF\x02\x01\0\0",
    "a zero sector, then binary data": bytes(512) + b"\x89PNG\r\x1a\x00\x00",
    "text after zeros short of a sector": bytes(100) + b'ker":3}',
    "a zero sector, then two lines": bytes(512) + b'{"event":"lease"}\n{"event":"done"}\n',
}

#: Every way to open a journal, as (name, opener).
OPENERS: dict[str, Callable[[Path], object]] = {
    "WorkLeaseJournal": lambda p: WorkLeaseJournal(p).close(),
    "WorkLeaseJournal(create=False)": lambda p: WorkLeaseJournal(p, create=False).close(),
    "WorkLeaseJournal(sync=group)": lambda p: WorkLeaseJournal(p, sync="group").close(),
    "open_readonly": lambda p: WorkLeaseJournal.open_readonly(p).close(),
    "repair_journal": repair_journal,
}


def _others(directory: Path, keep: str) -> list[str]:
    """Names in ``directory`` besides ``keep`` and the lock side file."""
    return sorted(p.name for p in directory.iterdir() if p.name not in (keep, keep + ".lock"))


# -- what is not a journal is never altered -------------------------------------------------------


@pytest.mark.parametrize("opener", OPENERS, ids=str)
@pytest.mark.parametrize("content", NOT_JOURNALS, ids=str)
def test_a_file_without_one_good_record_is_refused_by_every_opener_and_left_as_it_was(
    tmp_path: Path, content: str, opener: str
) -> None:
    path = tmp_path / "users.txt"
    path.write_bytes(NOT_JOURNALS[content])
    with pytest.raises(NotAJournal, match=rf"{path} is not a work lease journal"):
        OPENERS[opener](path)
    assert path.read_bytes() == NOT_JOURNALS[content]
    assert _others(tmp_path, path.name) == []  # no .broken, no .quarantine


@pytest.mark.parametrize("command", ["inspect", "recover", "compact", "repair"])
def test_every_journal_command_exits_2_naming_a_file_that_is_not_a_journal(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "users.txt"
    path.write_bytes(NOT_JOURNALS["passwd"])
    extra = ["--ttl", "0"] if command == "recover" else []
    assert main(["journal", command, str(path), *extra]) == 2
    assert f"{path} is not a work lease journal" in capsys.readouterr().err
    assert path.read_bytes() == NOT_JOURNALS["passwd"]
    assert _others(tmp_path, path.name) == []


def test_compact_through_a_symlink_to_a_file_that_is_not_a_journal_leaves_the_file_intact(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 17: `cp /etc/passwd x/p; ln -s p x/j.jsonl; leasefence journal compact x/j.jsonl`
    (tmp_path / "p").write_bytes(NOT_JOURNALS["passwd"])
    (tmp_path / "j.jsonl").symlink_to("p")
    assert main(["journal", "compact", str(tmp_path / "j.jsonl")]) == 2
    assert "symbolic link" in capsys.readouterr().err
    assert (tmp_path / "p").read_bytes() == NOT_JOURNALS["passwd"]
    assert not (tmp_path / "j.jsonl.broken").exists()


def test_a_master_refuses_a_journal_path_holding_another_file_before_writing_anything(
    tmp_path: Path,
) -> None:
    users = tmp_path / "users.txt"
    users.write_bytes(NOT_JOURNALS["passwd"])
    snapshot = tmp_path / "state.json"
    with pytest.raises(NotAJournal, match=str(users)):
        Master.open(users, snapshot, generate(3), ttl=30.0)
    assert users.read_bytes() == NOT_JOURNALS["passwd"]
    assert not snapshot.exists()


@pytest.mark.parametrize(
    "torn",
    [
        FIRST[:1],
        FIRST[:9],
        FIRST[:10],
        FIRST[: len(FIRST) // 2],
        FIRST[:-2],  # all but the closing brace and the newline
        FIRST[:60] + bytes(len(FIRST) - 60),  # the rest of the write zero-filled by the crash
        bytes(len(FIRST)),  # none of the write reached the disk, the file grew
        FIRST[:1] + FIRST[:30],  # two crashes, each in the first append, no append between
        bytes(512) + FIRST[20:-1],  # its first sector lost (zeros), a later one on disk
        bytes(512) + FIRST[20:],  # the same, with the write's newline in its last sector
        BATCH[:512] + bytes(512) + BATCH[1024:],  # a batch's middle sector lost
    ],
    ids=[
        "1 byte",
        "9 bytes",
        "10 bytes",
        "half",
        "all but 2 bytes",
        "zero-filled",
        "all zeros",
        "torn twice",
        "first sector lost",
        "first sector lost, newline kept",
        "middle sector lost",
    ],
)
def test_a_torn_first_record_of_a_fresh_journal_is_still_cut_as_a_torn_tail(
    tmp_path: Path, torn: bytes
) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(torn)
    before = torn
    with WorkLeaseJournal(path, clock=lambda: NOW) as journal:
        assert journal.torn_tail == before
        assert journal.lease(A, 1)
    assert path.read_bytes() == FIRST
    assert (tmp_path / "j.jsonl.broken").read_bytes() == before


# -- nothing is written through a symbolic link ---------------------------------------------------

PRECIOUS = b"precious: not leasefence's\n"


def _journal_with_torn_tail(d: Path) -> Path:
    path = d / "j.jsonl"
    path.write_bytes(FIRST + b'{"event":"le')
    return path


def _journal_with_a_bad_line_inside(d: Path) -> Path:
    path = d / "j.jsonl"
    path.write_bytes(FIRST + b"garbage\n" + _record(B))
    return path


def _lease(path: Path) -> None:
    with WorkLeaseJournal(path, clock=lambda: NOW) as journal:
        journal.lease(B, 2)


def _compact(path: Path) -> None:
    with WorkLeaseJournal(path) as journal:
        journal.compact()


def _trace(path: Path) -> None:
    # The writer opens its file at its first event (after the master took the journal's lock).
    trace = TraceWriter(path, ttl=30.0, ranks=[1], task_of={})
    try:
        trace.reclaim_expired(0.0, [])
    finally:
        trace.close()


#: (planted link name, set-up of the directory, action, whether the action is refused)
LINKS: dict[str, tuple[str, Callable[[Path], object], Callable[[Path], object], bool]] = {
    "the journal": ("j.jsonl", lambda d: None, lambda d: _lease(d / "j.jsonl"), True),
    "the lock": ("j.jsonl.lock", lambda d: None, lambda d: _lease(d / "j.jsonl"), True),
    "the .broken file": (
        "j.jsonl.broken",
        _journal_with_torn_tail,
        lambda d: _lease(d / "j.jsonl"),
        True,
    ),
    "the .quarantine file": (
        "j.jsonl.quarantine",
        _journal_with_a_bad_line_inside,
        lambda d: repair_journal(d / "j.jsonl"),
        True,
    ),
    "compaction's old .tmp name": (
        "j.jsonl.tmp",
        lambda d: (d / "j.jsonl").write_bytes(FIRST),
        lambda d: _compact(d / "j.jsonl"),
        False,
    ),
    "the snapshot": (
        "j.jsonl.snapshot.json",
        lambda d: None,
        lambda d: StateShardCoordinator(d / "j.jsonl.snapshot.json"),
        True,
    ),
    "the snapshot's old .tmp name": (
        "j.jsonl.snapshot.json.tmp",
        lambda d: None,
        lambda d: StateShardCoordinator(d / "j.jsonl.snapshot.json"),
        False,
    ),
    "the trace": ("trace.ndjson", lambda d: None, lambda d: _trace(d / "trace.ndjson"), True),
}


@pytest.mark.parametrize("dangling", [False, True], ids=["to a file", "dangling"])
@pytest.mark.parametrize("case", LINKS, ids=str)
def test_no_file_is_written_through_a_symlink_planted_at_its_path(
    tmp_path: Path, case: str, dangling: bool
) -> None:
    name, setup, action, refused = LINKS[case]
    work = tmp_path / "run"
    work.mkdir()
    target = tmp_path / "target"
    if not dangling:
        target.write_bytes(PRECIOUS)
    setup(work)
    (work / name).symlink_to(target)
    if refused:
        with pytest.raises(LeaseError, match="symbolic link"):
            action(work)
    else:
        action(work)  # a temporary file of an unpredictable name: the planted link is never used
    if dangling:
        assert not target.exists()
    else:
        assert target.read_bytes() == PRECIOUS
    assert (work / name).is_symlink()


def test_a_fifo_at_the_journal_path_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    os.mkfifo(path)
    with pytest.raises(UnsafePath, match="not a regular file"):
        WorkLeaseJournal(path)


def test_every_file_leasefence_creates_is_owner_only(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        _lease(_journal_with_torn_tail(tmp_path))  # journal (written by hand), .lock, .broken
        (tmp_path / "j.jsonl").unlink()
        _lease(tmp_path / "j.jsonl")
        repair_journal(_journal_with_a_bad_line_inside(tmp_path))
        StateShardCoordinator(tmp_path / "state.json")
        _trace(tmp_path / "trace.ndjson")
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert set(modes) == {
        "j.jsonl",
        "j.jsonl.lock",
        "j.jsonl.broken",
        "j.jsonl.quarantine",
        "state.json",
        "trace.ndjson",
    }
    assert modes == dict.fromkeys(modes, 0o600)


# -- a read-only journal stays read-only ----------------------------------------------------------


def test_repair_and_compact_honour_a_read_only_journal_and_leave_it_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _journal_with_a_bad_line_inside(tmp_path)
    before = path.read_bytes()
    path.chmod(0o400)
    with pytest.raises(JournalReadOnly, match=rf"{path} is read-only \(mode 0400\)"):
        repair_journal(path)
    for command in ("repair", "compact", "recover"):
        extra = ["--ttl", "0"] if command == "recover" else []
        assert main(["journal", command, str(path), *extra]) == 1
        assert "read-only" in capsys.readouterr().err
    with pytest.raises(JournalReadOnly):
        WorkLeaseJournal(path)
    assert path.read_bytes() == before
    assert stat.S_IMODE(path.stat().st_mode) == 0o400
    assert not (tmp_path / "j.jsonl.quarantine").exists()


# -- journal inspect prints only what it means to ------------------------------------------------


def test_inspect_escapes_control_characters_from_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(_record(clock="\x1b[2J\x1b]0;owned\x07\u202e"))
    assert main(["journal", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "legacy (\\x1b[2J\\x1b]0;owned\\x07\\u202e, reclaimed by the next recover)" in out
    assert "\x1b" not in out
    assert "\x07" not in out
    assert "\u202e" not in out


def test_inspect_exits_quietly_when_the_reader_of_its_output_has_gone(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, sync="group") as journal:
        for i in range(50):
            journal.lease(f"{i:064x}", 1)
    read_end, write_end = os.pipe()
    os.close(read_end)  # `leasefence journal inspect j | head -0`: the reader is already gone
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "leasefence", "journal", "inspect", str(path)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == b""
    assert proc.returncode == 128 + 13  # as if killed by SIGPIPE


ABSURD = [
    ("worker", -1),
    ("worker", MAX_WORKER + 1),
    ("worker", 10**4299),
    ("attempt", 2**63),
    ("attempt", 9 * 10**4299),
    ("updated", 1e300),
    ("updated", -1e300),
    ("updated", 2**60),
]


@pytest.mark.parametrize(("field", "value"), ABSURD, ids=lambda v: f"{v!s:.12}")
def test_a_checksum_valid_line_with_a_number_outside_its_range_is_a_bad_line(
    field: str, value: int | float
) -> None:
    got = parse_line(_record(**{field: value})[:-1], 4)
    assert isinstance(got, str)
    assert got.startswith(f"{field} is not")


def test_inspect_names_the_line_of_an_absurd_number_instead_of_crashing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # issue 17: two checksum-valid 4,300-digit attempts, whose sum Python cannot print
    path = tmp_path / "j.jsonl"
    path.write_bytes(
        FIRST
        + _record(B, event="reclaim", attempt=9 * 10**4299)
        + _record("c" * 64, event="reclaim", attempt=9 * 10**4299)
        + _record("d" * 64)
    )
    assert main(["journal", "inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert "line 2 (attempt is not an integer in 0..9223372036854775807)" in err
    assert "line 3 (attempt is not an integer" in err


def test_inspect_names_each_line_of_a_torn_tail_and_why_it_is_bad(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(FIRST + _record(B, worker=10**4299))
    assert main(["journal", "inspect", str(path)]) == 0
    assert f"    line 2: worker is not an integer in 0..{MAX_WORKER}" in capsys.readouterr().out
    assert main(["journal", "inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["torn_tail_lines"] == [
        {"line": 2, "reason": f"worker is not an integer in 0..{MAX_WORKER} (an MPI rank)"}
    ]


def test_the_journal_never_writes_a_number_its_reader_would_refuse(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=lambda: NOW) as journal:
        with pytest.raises(RecordOutOfRange, match=rf"worker is not an integer in 0..{MAX_WORKER}"):
            journal.lease(A, MAX_WORKER + 1)
        with pytest.raises(RecordOutOfRange):
            journal.lease(A, -1)
        assert journal.leases == {}
    assert path.read_bytes() == b""
    later = WorkLeaseJournal(path, clock=lambda: MAX_TIMESTAMP * 2)
    with later, pytest.raises(ValueError, match="clock\\(\\) must return"):
        later.lease(A, 1)
    assert path.read_bytes() == b""
