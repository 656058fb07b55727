"""WorkLeaseJournal: F314 §3.1–3.2 semantics, the model's rules, and crash safety on disk."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasefence.impl import journal as journal_module
from leasefence.impl.errors import (
    InvalidTtl,
    InvalidWorkId,
    JournalCorrupt,
    JournalLocked,
    JournalReadOnly,
    JournalUnusable,
    LeaseError,
    RecordTooLarge,
)
from leasefence.impl.journal import (
    LeaseRecord,
    WorkLeaseJournal,
    legacy_lease_line,
    parse_line,
    scan_bytes,
)
from leasefence.model import journal as model
from leasefence.model.rules import CLOCK_LEGACY
from leasefence.model.state import Journal, Lease

A = "a" * 64
B = "b" * 64
C = "0123456789abcdef" * 4
DOCS = Path(__file__).resolve().parents[2] / "docs" / "journal-format.md"


class Clock:
    """An injected Unix clock the test moves by hand (ints, so values compare with the model)."""

    def __init__(self, now: int = 1_767_225_600) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / ".work_leases.jsonl"


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def journal(path: Path, clock: Clock) -> Iterator[WorkLeaseJournal]:
    with WorkLeaseJournal(path, clock=clock) as j:
        yield j


def lines(path: Path) -> list[dict[str, object]]:
    """The records of the journal at ``path`` in order, those of a batch line included."""
    docs = [json.loads(line) for line in path.read_bytes().splitlines()]
    return [r for d in docs for r in (d["records"] if d["event"] == "batch" else [d])]


# -- F314 §4, items 1-3 ---------------------------------------------------------------------


def test_f314_item1_second_lease_of_active_work_is_refused_and_a_wrong_worker_cannot_complete_or_abandon(
    journal: WorkLeaseJournal,
) -> None:
    assert journal.lease(A, 1) is True
    assert journal.lease(A, 2) is False
    assert journal.leases[A].owner == 1
    assert journal.complete(A, 2) is False
    assert journal.abandon(A, 2) is False
    assert journal.leases[A].owner == 1
    assert journal.attempts == {A: 1}
    assert journal.complete(A, 1) is True
    assert journal.completed == {A}


def test_f314_item2_legacy_future_monotonic_record_is_recoverable_and_zero_ttl_reclaims_a_future_unix_record(
    path: Path, clock: Clock
) -> None:
    # A monotonic stamp from a long-running earlier boot: far "in the future" of the new uptime,
    # and meaningless against Unix time. Any ttl reclaims it.
    path.write_bytes(legacy_lease_line(A, 4, 9_999_999_999.0))
    with WorkLeaseJournal(path, clock=clock) as j:
        assert j.leases[A] == LeaseRecord(4, 9_999_999_999.0, None)
        assert j.recover(3600) == [A]
        assert j.lease(B, 5)
        clock.now -= 100  # the wall clock is stepped back: B is now 100 s in the future
        assert j.recover(3600) == []
        assert j.recover(0) == [B]
        assert j.leases == {}


def test_f314_item3_default_work_timestamps_come_from_the_unix_clock_and_are_tagged(
    path: Path,
) -> None:
    before = math.floor(__import__("time").time())
    with WorkLeaseJournal(path) as j:
        j.lease(A, 1)
        record = j.leases[A]
    assert record.clock == "unix"
    assert before <= record.updated < before + 86_400  # Unix seconds, not uptime
    (line,) = lines(path)
    assert line["clock"] == "unix"
    assert line["updated"] == record.updated


# -- admission and fencing (L1, L2, L3) ------------------------------------------------------


def test_second_lease_of_active_work_is_refused_without_writing(
    journal: WorkLeaseJournal, path: Path
) -> None:
    journal.lease(A, 1)
    before = path.read_bytes()
    count = journal.record_count
    assert journal.lease(A, 2) is False
    assert journal.lease(A, 1) is False  # not even the owner may lease it twice
    assert path.read_bytes() == before
    assert journal.record_count == count
    assert journal.attempts == {A: 1}
    assert journal.leases[A].owner == 1


def test_lease_of_completed_work_is_refused_without_writing(
    journal: WorkLeaseJournal, path: Path
) -> None:
    journal.lease(A, 1)
    journal.complete(A, 1)
    before = path.read_bytes()
    assert journal.lease(A, 2) is False
    assert path.read_bytes() == before
    assert journal.attempts == {A: 1}


def test_wrong_owner_cannot_complete_or_abandon_and_writes_nothing(
    journal: WorkLeaseJournal, path: Path
) -> None:
    journal.lease(A, 1)
    before = path.read_bytes()
    assert journal.complete(A, 2) is False
    assert journal.abandon(A, 2) is False
    assert path.read_bytes() == before
    assert journal.leases[A].owner == 1
    assert journal.completed == frozenset()


def test_fenced_complete_or_abandon_of_work_without_an_active_lease_is_refused(
    journal: WorkLeaseJournal, path: Path
) -> None:
    assert journal.complete(A, 1) is False
    assert journal.abandon(A, 1) is False
    journal.lease(B, 1)
    journal.abandon(B, 1)
    size = path.stat().st_size
    assert journal.complete(B, 1) is False  # a late result after the lease was dropped
    assert journal.abandon(B, 1) is False
    assert path.stat().st_size == size


def test_late_result_of_an_old_owner_is_refused_after_reclaim_and_re_lease(
    journal: WorkLeaseJournal, clock: Clock
) -> None:
    journal.lease(A, 1)
    clock.now += 60
    assert journal.recover(30) == [A]
    assert journal.lease(A, 2)
    assert journal.complete(A, 1) is False
    assert journal.abandon(A, 1) is False
    assert journal.leases[A].owner == 2
    assert journal.attempts == {A: 2}


def test_unfenced_complete_finishes_any_unfinished_work_for_offline_maintenance(
    journal: WorkLeaseJournal, path: Path
) -> None:
    journal.lease(A, 1)
    assert journal.complete(A) is True  # leased by 1: the lease is dropped
    assert journal.complete(B) is True  # never leased
    assert journal.complete(B) is False  # already completed
    assert journal.completed == {A, B}
    assert journal.leases == {}
    assert journal.attempts == {A: 1}
    assert [r["event"] for r in lines(path)] == ["lease", "done", "done"]


def test_unfenced_abandon_drops_any_active_lease_and_nothing_else(
    journal: WorkLeaseJournal,
) -> None:
    assert journal.abandon(A) is False
    journal.lease(A, 3)
    assert journal.abandon(A) is True
    assert journal.leases == {}
    assert journal.lease(A, 4) is True
    assert journal.attempts == {A: 2}


def test_every_record_carries_the_attempt_count_and_the_unix_tag(
    journal: WorkLeaseJournal, path: Path, clock: Clock
) -> None:
    journal.lease(A, 1)
    journal.abandon(A, 1)
    journal.lease(A, 2)
    clock.now += 10
    journal.complete(A, 2)
    records = lines(path)
    assert [(r["event"], r["attempt"], r["clock"]) for r in records] == [
        ("lease", 1, "unix"),
        ("reclaim", 1, "unix"),
        ("lease", 2, "unix"),
        ("done", 2, "unix"),
    ]
    assert records[-1]["updated"] == clock.now
    assert all(re.fullmatch(r"[0-9a-f]{8}", str(r["crc"])) for r in records)


# -- recovery --------------------------------------------------------------------------------


def test_unix_record_far_in_the_future_is_reclaimed_with_a_positive_ttl(
    journal: WorkLeaseJournal, clock: Clock
) -> None:
    journal.lease(A, 1)
    clock.now -= 10 * 365 * 86_400  # the wall clock jumped back ten years
    assert journal.recover(3600) == [A]


def test_recovery_boundaries_follow_the_model_rule(journal: WorkLeaseJournal, clock: Clock) -> None:
    journal.lease(A, 1)
    start = clock.now
    clock.now = start - 30  # exactly ttl in the future: kept
    assert journal.recover(30) == []
    clock.now = start - 31  # more than ttl in the future: reclaimed
    assert journal.recover(30) == [A]
    journal.lease(B, 1)
    clock.now = start - 31 + 29  # younger than ttl: kept
    assert journal.recover(30) == []
    clock.now += 1  # exactly ttl old: reclaimed
    assert journal.recover(30) == [B]


def test_recover_returns_sorted_ids_and_appends_one_reclaim_each(
    journal: WorkLeaseJournal, path: Path, clock: Clock
) -> None:
    for work, worker in ((C, 1), (B, 2), (A, 3)):
        journal.lease(work, worker)
    clock.now += 100
    assert journal.recover(50) == sorted([A, B, C])
    reclaims = [r for r in lines(path) if r["event"] == "reclaim"]
    assert sorted(str(r["work_id"]) for r in reclaims) == sorted([A, B, C])
    assert journal.recover(50) == []


@pytest.mark.parametrize("ttl", [-1, -0.5, float("nan"), float("inf"), float("-inf")])
def test_bad_ttl_raises_a_clear_invalid_ttl_error(journal: WorkLeaseJournal, ttl: float) -> None:
    journal.lease(A, 1)
    with pytest.raises(InvalidTtl, match="lease_ttl must be a finite number >= 0"):
        journal.recover(ttl)
    assert journal.leases[A].owner == 1
    assert issubclass(InvalidTtl, ValueError)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "a" * 63,
        "a" * 65,
        "g" * 64,
        " " + "a" * 63,
        "a" * 63 + "\n",
        "٠" * 64,  # Arabic-Indic digits are not hexadecimal
        42,
        None,
    ],
)
def test_bad_work_ids_raise_invalid_work_id_naming_the_value(
    journal: WorkLeaseJournal, path: Path, bad: object
) -> None:
    for call in (
        lambda: journal.lease(bad, 1),  # type: ignore[arg-type]
        lambda: journal.complete(bad),  # type: ignore[arg-type]
        lambda: journal.abandon(bad, 1),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidWorkId, match="64 hexadecimal characters") as info:
            call()
        assert repr(bad)[:20] in str(info.value)
    assert path.read_bytes() == b""


def test_upper_case_hexadecimal_work_id_is_accepted_and_kept_as_given(
    journal: WorkLeaseJournal,
) -> None:
    assert journal.lease(A.upper(), 1)
    assert journal.lease(A, 2)  # a different ID, exactly as the model keys it
    assert set(journal.leases) == {A.upper(), A}


def test_worker_must_be_an_int(journal: WorkLeaseJournal) -> None:
    with pytest.raises(TypeError, match="worker must be an int"):
        journal.lease(A, "1")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="worker must be an int"):
        journal.complete(A, True)


# -- legacy journals (F314's original format) ------------------------------------------------


def test_legacy_journal_opens_counts_attempts_and_is_reclaimed_by_the_first_recover(
    path: Path, clock: Clock
) -> None:
    legacy = (
        legacy_lease_line(A, 1, 50.0)
        + b'{"event": "reclaim", "work_id": "'
        + A.encode()
        + b'", "worker": 1}\n'
        + legacy_lease_line(A, 2, 75.5)
        + legacy_lease_line(B, 3, 80)
        + b'{"event": "done", "work_id": "'
        + B.encode()
        + b'", "worker": 3, "updated": 81}\n'
        + legacy_lease_line(C, 4, 99.0)
    )
    path.write_bytes(legacy)
    with WorkLeaseJournal(path, clock=clock) as j:
        assert j.record_count == 6
        assert j.legacy_record_count == 6
        assert j.attempts == {A: 2, B: 1, C: 1}
        assert j.completed == {B}
        assert j.leases == {A: LeaseRecord(2, 75.5, None), C: LeaseRecord(4, 99.0, None)}
        assert j.lease(A, 9) is False  # still active until recovered
        assert j.recover(10**9) == [C, A]  # legacy leases go whatever the ttl
        assert j.lease(A, 9) is True
        assert j.leases[A].clock == "unix"
        assert j.attempts[A] == 3
    assert path.read_bytes().startswith(legacy)  # no offline migration: only appends


def test_legacy_lease_matches_the_model_legacy_record(path: Path, clock: Clock) -> None:
    path.write_bytes(legacy_lease_line(A, 2, 700))
    ok, expected = model.legacy_record(Journal(), A, 2, 700)
    assert ok
    with WorkLeaseJournal(path, clock=clock) as j:
        assert abstract(j) == expected


def test_compaction_keeps_clock_tags_timestamps_owners_and_attempts(
    path: Path, clock: Clock
) -> None:
    path.write_bytes(legacy_lease_line(A, 5, 912_345.5))
    with WorkLeaseJournal(path, clock=clock) as j:
        j.lease(B, 1)
        clock.now += 7
        j.lease(C, 2)
        before = (dict(j.leases), j.completed, dict(j.attempts))
        j.compact()
        assert (dict(j.leases), j.completed, dict(j.attempts)) == before
        assert j.record_count == 3
        assert j.legacy_record_count == 0
    records = {str(r["work_id"]): r for r in lines(path)}
    assert "clock" not in records[A]  # never relabelled as Unix time
    assert records[A]["updated"] == 912_345.5
    assert records[B]["clock"] == records[C]["clock"] == "unix"
    assert records[C]["updated"] == records[B]["updated"] + 7  # type: ignore[operator]
    with WorkLeaseJournal(path, clock=clock) as j:
        assert (dict(j.leases), j.completed, dict(j.attempts)) == before
        assert j.leases[A].clock is None
        assert j.recover(10**6) == [A]


def test_compaction_keeps_attempts_of_completed_and_reclaimed_work(
    journal: WorkLeaseJournal, path: Path
) -> None:
    journal.lease(A, 1)
    journal.abandon(A, 1)
    journal.lease(A, 2)
    journal.abandon(A, 2)
    journal.lease(B, 1)
    journal.complete(B, 1)
    journal.complete(C)  # completed, never leased
    journal.compact()
    assert journal.record_count == 3
    assert [(r["work_id"], r["event"], r["attempt"]) for r in lines(path)] == [
        (C, "done", 0),
        (A, "reclaim", 2),
        (B, "done", 1),
    ]  # one record per ID, in ID order
    assert journal.attempts == {A: 2, B: 1}
    assert journal.lease(A, 3)  # appends go to the new file
    assert journal.attempts[A] == 3
    assert lines(path)[-1]["event"] == "lease"


def test_compaction_crash_before_replace_leaves_the_old_journal(
    path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    with WorkLeaseJournal(path, clock=clock) as j:
        j.lease(A, 1)
        j.abandon(A, 1)
        j.lease(B, 2)
        before = path.read_bytes()

        def crash(src: object, dst: object) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(journal_module.os, "replace", crash)
        with pytest.raises(JournalUnusable, match="compaction"):
            j.compact()
        monkeypatch.undo()
        with pytest.raises(JournalUnusable):
            j.lease(C, 1)
    assert path.read_bytes() == before
    assert not path.with_name(path.name + ".tmp").exists()
    with WorkLeaseJournal(path, clock=clock) as j:
        assert j.leases == {B: LeaseRecord(2, clock.now, "unix")}
        assert j.attempts == {A: 1, B: 1}


# -- durability ------------------------------------------------------------------------------


def test_new_journal_is_created_0600_and_empty(path: Path) -> None:
    with WorkLeaseJournal(path):
        pass
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes() == b""


def test_every_acknowledged_record_is_fsynced_before_the_call_returns(
    journal: WorkLeaseJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        real(fd)
        synced.append(fd)

    monkeypatch.setattr(journal_module.os, "fsync", counting)
    assert journal.lease(A, 1)
    assert len(synced) == 1
    assert journal.lease(A, 1) is False  # refused: no write, no sync
    assert len(synced) == 1
    assert journal.complete(A, 1)
    assert len(synced) == 2


def test_fsync_failure_makes_the_journal_unusable(
    journal: WorkLeaseJournal, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal.lease(A, 1)

    def failing(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(journal_module.os, "fsync", failing)
    with pytest.raises(JournalUnusable, match="fsync"):
        journal.lease(B, 1)
    monkeypatch.undo()
    for call in (
        lambda: journal.lease(C, 1),
        lambda: journal.complete(A, 1),
        lambda: journal.abandon(A, 1),
        lambda: journal.recover(0),
        journal.compact,
        lambda: journal.leases,
    ):
        with pytest.raises(JournalUnusable, match="unusable"):
            call()


def test_record_over_the_size_limit_is_refused_without_writing(
    journal: WorkLeaseJournal, path: Path
) -> None:
    with pytest.raises(RecordTooLarge, match="over the 4096-byte limit"):
        journal.lease(A, 10**4000)
    assert path.read_bytes() == b""
    assert journal.leases == {}
    assert journal.attempts == {}
    assert journal.lease(A, 1)


def test_group_commit_acknowledges_only_after_one_write_and_one_fsync(
    path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        real(fd)
        synced.append(fd)

    with WorkLeaseJournal(path, clock=clock, sync="group") as j:
        monkeypatch.setattr(journal_module.os, "fsync", counting)
        assert j.lease(A, 1)
        assert j.lease(A, 2) is False  # admission sees pending records
        assert j.lease(B, 2)
        assert j.complete(A, 1)
        assert j.pending == 3
        assert path.read_bytes() == b""  # nothing acknowledged yet
        assert synced == []
        assert j.commit() == 3
        assert len(synced) == 1
        assert j.pending == 0
        assert [r["event"] for r in lines(path)] == ["lease", "lease", "done"]
        assert j.lease(C, 3)
    assert len(lines(path)) == 4  # close commits what is pending


def test_lease_survives_sigkill_right_after_lease_returned_true(path: Path) -> None:
    child = textwrap.dedent(
        """
        import os, signal, sys
        from leasefence.impl.journal import WorkLeaseJournal
        journal = WorkLeaseJournal(sys.argv[1])
        ok = journal.lease(sys.argv[2], 7)
        os.write(int(sys.argv[3]), b"1" if ok else b"0")
        signal.pause()
        """
    )
    read_end, write_end = os.pipe()
    proc = subprocess.Popen(
        [sys.executable, "-c", child, str(path), A, str(write_end)],
        pass_fds=(write_end,),
        stderr=subprocess.PIPE,
    )
    os.close(write_end)
    try:
        signal_byte = os.read(read_end, 1)
    finally:
        os.close(read_end)
        proc.kill()
        _, err = proc.communicate()
    assert signal_byte == b"1", err.decode()
    assert proc.returncode == -signal.SIGKILL
    with WorkLeaseJournal(path) as j:  # the kernel dropped the dead writer's lock
        assert j.leases[A].owner == 7
        assert j.attempts == {A: 1}


# -- torn tails and corruption ---------------------------------------------------------------


def test_torn_tail_at_every_byte_offset_of_the_last_record_is_ignored_then_cut_to_broken(
    tmp_path: Path, clock: Clock
) -> None:
    source = tmp_path / "source.jsonl"
    with WorkLeaseJournal(source, clock=clock) as j:
        j.lease(A, 1)
        j.lease(B, 2)
        head = source.read_bytes()
        j.complete(A, 1)
    last = source.read_bytes()[len(head) :]
    assert last.endswith(b"\n")
    path = tmp_path / "torn.jsonl"
    broken = tmp_path / "torn.jsonl.broken"
    for cut in range(len(last)):
        torn = last[:cut]
        path.write_bytes(head + torn)
        broken.unlink(missing_ok=True)
        whole_but_newline = cut == len(last) - 1
        with WorkLeaseJournal.open_readonly(path, clock=clock) as r:
            assert r.torn_tail == (b"" if whole_but_newline else torn)
        assert path.read_bytes() == head + torn  # a read-only open never cuts
        with WorkLeaseJournal(path, clock=clock) as j:
            if whole_but_newline:
                assert j.completed == {A}
                assert j.record_count == 3
            else:
                assert j.leases.keys() == {A, B}, cut
                assert j.record_count == 2
            assert path.read_bytes() == head + torn  # nothing is cut before an append
            assert j.lease(C, 3)
        new_line = path.read_bytes().splitlines(keepends=True)[-1]
        if whole_but_newline:
            assert path.read_bytes() == head + last + new_line
            assert not broken.exists()
        else:
            assert path.read_bytes() == head + new_line
            assert broken.read_bytes() == torn if torn else not broken.exists()
        with WorkLeaseJournal(path, clock=clock) as j:
            assert j.torn_tail == b""
            assert C in j.leases


def test_several_bad_lines_at_the_end_are_one_torn_tail(path: Path, clock: Clock) -> None:
    with WorkLeaseJournal(path, clock=clock) as j:
        j.lease(A, 1)
    good = path.read_bytes()
    path.write_bytes(good + b"\x00\x00\x00\n{garbage\n\x00\x00")
    with WorkLeaseJournal(path, clock=clock) as j:
        assert j.record_count == 1
        j.lease(B, 1)
    assert path.read_bytes().startswith(good)
    assert path.with_name(path.name + ".broken").read_bytes() == b"\x00\x00\x00\n{garbage\n\x00\x00"


def test_corrupt_middle_line_raises_naming_file_and_line_and_leaves_the_file_unchanged(
    path: Path, clock: Clock
) -> None:
    with WorkLeaseJournal(path, clock=clock) as j:
        j.lease(A, 1)
        j.lease(B, 2)
        j.lease(C, 3)
    records = path.read_bytes().splitlines(keepends=True)
    records[1] = records[1].replace(b'"worker":2', b'"worker":9')  # valid JSON, wrong checksum
    damaged = b"".join(records)
    path.write_bytes(damaged)
    with pytest.raises(JournalCorrupt, match=rf"{re.escape(str(path))} is corrupt: line 2 "):
        WorkLeaseJournal(path, clock=clock)
    assert path.read_bytes() == damaged
    with pytest.raises(JournalCorrupt, match="line 2"):
        WorkLeaseJournal.open_readonly(path)
    with WorkLeaseJournal(path.with_name("other"), clock=clock):
        pass  # the failed open released its lock
    with pytest.raises(JournalCorrupt):
        WorkLeaseJournal(path, clock=clock)  # and can be retried


def _four_record_journal() -> bytes:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "j.jsonl"
        with WorkLeaseJournal(p, clock=Clock()) as j:
            j.lease(A, 1)
            j.lease(B, 2)
            j.complete(A, 1)
            j.lease(C, 3)
        return p.read_bytes()


FOUR = _four_record_journal()
FIRST_TWO = FOUR.index(b"\n", FOUR.index(b"\n") + 1) + 1


@given(position=st.integers(0, FIRST_TWO - 1), byte=st.integers(0, 255))
def test_any_changed_byte_before_the_last_records_is_corruption_not_a_torn_tail(
    position: int, byte: int
) -> None:
    if FOUR[position] == byte:
        return
    damaged = FOUR[:position] + bytes([byte]) + FOUR[position + 1 :]
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "j.jsonl"
        p.write_bytes(damaged)
        line = FOUR[:position].count(b"\n") + 1
        with pytest.raises(JournalCorrupt, match=f"line {line} "):
            WorkLeaseJournal(p, clock=Clock())
        assert p.read_bytes() == damaged


def test_parse_line_accepts_every_example_line_of_the_format_document() -> None:
    examples = re.findall(r"```json\n(.*?)\n```", DOCS.read_text(), re.S)
    assert len(examples) == 5
    parsed = [parse_line(e.encode(), i) for i, e in enumerate(examples, 1)]
    assert [getattr(p, "event", p) for p in parsed] == [
        "lease",
        "done",
        "reclaim",
        "lease",
        "lease",
    ]
    assert [getattr(p, "checksummed", None) for p in parsed] == [True, True, True, False, True]
    assert scan_bytes(("\n".join(examples) + "\n").encode()).bad == []


# -- one writer ------------------------------------------------------------------------------


def test_second_writer_in_the_same_process_is_refused_naming_the_path(
    journal: WorkLeaseJournal, path: Path, clock: Clock
) -> None:
    with pytest.raises(JournalLocked, match=re.escape(str(path))):
        WorkLeaseJournal(path, clock=clock)
    journal.lease(A, 1)  # the first writer is unaffected
    journal.close()
    with WorkLeaseJournal(path, clock=clock) as again:
        assert again.leases[A].owner == 1


def test_second_writer_in_another_process_is_refused(journal: WorkLeaseJournal, path: Path) -> None:
    child = textwrap.dedent(
        """
        import sys
        from leasefence.impl.errors import JournalLocked
        from leasefence.impl.journal import WorkLeaseJournal
        try:
            WorkLeaseJournal(sys.argv[1])
        except JournalLocked as err:
            print(err)
            sys.exit(3)
        sys.exit(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", child, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 3, done.stderr
    assert str(path) in done.stdout


def test_read_only_open_takes_no_lock_and_refuses_writes(
    journal: WorkLeaseJournal, path: Path, clock: Clock
) -> None:
    journal.lease(A, 1)
    before = path.read_bytes()
    with WorkLeaseJournal.open_readonly(path, clock=clock) as reader:
        assert reader.leases[A].owner == 1
        for call in (
            lambda: reader.lease(B, 1),
            lambda: reader.complete(A),
            lambda: reader.abandon(A),
            lambda: reader.recover(0),
            reader.compact,
        ):
            with pytest.raises(JournalReadOnly, match="read-only"):
                call()
    assert path.read_bytes() == before
    assert journal.lease(B, 2)  # the writer never noticed the reader


def test_closed_journal_refuses_every_call(journal: WorkLeaseJournal) -> None:
    journal.close()
    journal.close()  # idempotent
    with pytest.raises(JournalUnusable, match="closed"):
        journal.lease(A, 1)
    with pytest.raises(JournalUnusable, match="closed"):
        _ = journal.completed


def test_every_journal_error_is_a_lease_error() -> None:
    for cls in (InvalidWorkId, InvalidTtl, JournalCorrupt, JournalLocked, RecordTooLarge):
        assert issubclass(cls, LeaseError)


# -- the model, call by call -----------------------------------------------------------------


def abstract(j: WorkLeaseJournal) -> Journal:
    """The implementation's state in the model's terms (an untagged clock is the model's legacy)."""
    return Journal(
        leases=tuple(
            (w, Lease(x.owner, int(x.updated), x.clock or CLOCK_LEGACY))
            for w, x in sorted(j.leases.items())
        ),
        completed=j.completed,
        attempts=tuple(sorted(j.attempts.items())),
    )


WORKS = st.sampled_from([A, B, C])
RANKS = st.integers(1, 3)
OPS = st.one_of(
    st.tuples(st.just("lease"), WORKS, RANKS),
    st.tuples(st.just("complete"), WORKS, st.none() | RANKS),
    st.tuples(st.just("abandon"), WORKS, st.none() | RANKS),
    st.tuples(st.just("recover"), st.integers(0, 6)),
    st.tuples(st.just("tick"), st.integers(-20, 8)),  # rollbacks past the ttl too
    st.tuples(st.just("compact")),
    st.tuples(st.just("reopen")),
)


@given(
    legacy=st.none() | st.tuples(WORKS, RANKS, st.integers(0, 10**6)),
    ops=st.lists(OPS, max_size=30),
)
def test_random_call_sequences_match_the_model_and_survive_reopen_and_compaction(
    legacy: tuple[str, int, int] | None, ops: list[tuple[object, ...]]
) -> None:
    clock = Clock(1000)
    state = Journal()
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "j.jsonl"
        if legacy is not None:
            p.write_bytes(legacy_lease_line(*legacy))
            _, state = model.legacy_record(state, *legacy)
        j = WorkLeaseJournal(p, clock=clock)
        try:
            for op in ops:
                kind = op[0]
                expected: object
                got: object
                if kind == "lease":
                    w, r = str(op[1]), int(op[2])  # type: ignore[call-overload]
                    expected, state = model.lease_work(state, w, r, clock.now, 0)
                    got = j.lease(w, r)
                elif kind in ("complete", "abandon"):
                    w, who = str(op[1]), op[2]
                    act: Callable[..., tuple[bool, Journal]] = (
                        model.complete_work if kind == "complete" else model.abandon_work
                    )
                    expected, state = act(state, w, who)
                    got = getattr(j, kind)(w, who)
                elif kind == "recover":
                    ttl = int(op[1])  # type: ignore[call-overload]
                    ids, state = model.recover_work(state, ttl, clock.now, 0)
                    expected, got = list(ids), j.recover(ttl)
                elif kind == "tick":
                    clock.now = max(0, clock.now + int(op[1]))  # type: ignore[call-overload]
                    expected = got = None
                elif kind == "compact":
                    state = model.compact_journal(state)
                    j.compact()
                    expected = got = None
                else:
                    j.close()
                    j = WorkLeaseJournal(p, clock=clock)
                    expected = got = None
                assert got == expected, op
                assert abstract(j) == state, op
        finally:
            j.close()


def test_a_flipped_byte_in_the_crc_key_is_damage_not_a_legacy_record(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    first, second = "a" * 64, "b" * 64
    with WorkLeaseJournal(path, clock=lambda: 100.0) as j:
        assert j.lease(first, 1)
        assert j.lease(second, 2)
    data = path.read_bytes()
    damaged = data.replace(b'"crc"', b'" rc"', 1)  # the first record loses its checksum key
    assert damaged != data
    path.write_bytes(damaged)
    with pytest.raises(JournalCorrupt, match="line 1"):
        WorkLeaseJournal(path)
    assert path.read_bytes() == damaged


def test_a_legacy_record_is_reclaimed_even_when_its_monotonic_value_looks_like_a_fresh_unix_time(
    path: Path, clock: Clock
) -> None:
    # Rule 2 on its own: an untagged value is never compared with the Unix clock, so even one
    # that happens to equal "now" (neither expired nor future-dated) is reclaimed at once.
    path.write_bytes(legacy_lease_line(A, 1, clock.now))
    with WorkLeaseJournal(path, clock=clock) as j:
        assert j.leases[A].clock is None
        assert j.recover(3600) == [A]
        assert j.leases == {}
