"""One write, one line: records written together are one ``batch`` line, and a last record
without its newline gets the newline durably on its own, so that a crash keeping any subset of
a write's sectors (zeros where the file grew) damages only the last line, a torn tail."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from leasefence.impl import journal as journal_module
from leasefence.impl.errors import JournalCorrupt
from leasefence.impl.journal import (
    WorkLeaseJournal,
    encode_batch,
    encode_record,
    parse_line,
    scan_bytes,
)

A = "a" * 64
B = "b" * 64
C = "c" * 64
T0 = 1_767_225_600.0
DOCS = Path(__file__).resolve().parents[2] / "docs" / "journal-format.md"


def _clock() -> float:
    return T0 + 100


def _record(event: str, work_id: str, worker: int | None = 1, attempt: int = 1) -> bytes:
    body = {
        "event": event,
        "work_id": work_id,
        "worker": worker,
        "updated": T0,
        "clock": "unix",
        "attempt": attempt,
    }
    return encode_record(body)


def _zero_sectors(data: bytes, start: int, mask: int) -> bytes:
    """``data`` with the 512-byte sectors of ``data[start:]`` not in ``mask`` zeroed."""
    out = bytearray(data)
    first = start // 512
    for k in range((len(data) - 1) // 512 - first + 1):
        if not mask >> k & 1:
            a, b = max(start, (first + k) * 512), min(len(data), (first + k + 1) * 512)
            out[a:b] = bytes(b - a)
    return bytes(out)


def test_the_documented_batch_line_parses_to_its_records_and_is_what_the_writer_writes() -> None:
    (line,) = re.findall(r"```json batch\n(.*?)\n```", DOCS.read_text(), re.S)
    scan = scan_bytes(line.encode() + b"\n")
    assert scan.bad == []
    assert [(r.event, r.work_id[:2], r.worker, r.attempt) for r in scan.records] == [
        ("reclaim", "3f", 3, 1),
        ("reclaim", "4e", 5, 2),
    ]
    inner = [
        json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in json.loads(line)["records"]
    ]
    assert encode_batch(inner) == line.encode() + b"\n"
    assert isinstance(parse_line(inner[0][:-1], 1), journal_module.Record)


def test_recover_writes_its_reclaims_as_one_batch_line_that_replays_in_order(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=lambda: T0) as j:
        for w in (A, B, C):
            j.lease(w, 1)
    with WorkLeaseJournal(path, clock=_clock) as j:
        assert j.recover(10) == [A, B, C]
        assert j.record_count == 6
    lines = path.read_bytes().splitlines()
    assert len(lines) == 4
    assert lines[-1].startswith(b'{"event":"batch","records":[')
    with WorkLeaseJournal(path, clock=_clock) as j:
        assert j.leases == {}
        assert j.attempts == {A: 1, B: 1, C: 1}
        assert j.record_count == 6


def test_a_group_commit_of_one_record_is_a_plain_line(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=lambda: T0, sync="group") as j:
        j.lease(A, 1)
        assert j.commit() == 1
        j.lease(B, 2)
        j.lease(C, 3)
        assert j.commit() == 2
    first, second = path.read_bytes().splitlines()
    assert json.loads(first)["event"] == "lease"
    assert [r["work_id"] for r in json.loads(second)["records"]] == [B, C]


def test_a_batch_whose_write_kept_any_subset_of_its_sectors_is_a_torn_tail(
    tmp_path: Path,
) -> None:
    ids = [f"{i}" * 64 for i in range(5)]
    durable = b"".join(_record("lease", w) for w in ids)
    batch = encode_batch([_record("reclaim", w) for w in ids])
    sectors = (len(durable) + len(batch) - 1) // 512 - len(durable) // 512 + 1
    assert sectors == 3
    for mask in range((1 << sectors) - 1):  # every subset but "all kept"
        data = _zero_sectors(durable + batch, len(durable), mask)
        path = tmp_path / f"j{mask}.jsonl"
        path.write_bytes(data)
        with WorkLeaseJournal(path, clock=_clock) as j:  # no JournalCorrupt
            assert set(j.leases) == set(ids)  # the batch applies whole or not at all
            assert j.torn_tail == data[len(durable) :]
            assert j.lease("d" * 64, 2)
        with WorkLeaseJournal(path, clock=_clock) as j:
            assert set(j.leases) == {*ids, "d" * 64}
            assert j.torn_tail == b""
        assert path.read_bytes().startswith(durable + b'{"event":"lease"')
        assert (tmp_path / f"j{mask}.jsonl.broken").read_bytes() == data[len(durable) :]


def test_a_damaged_batch_followed_by_a_later_record_is_still_corruption(tmp_path: Path) -> None:
    batch = encode_batch([_record("lease", w) for w in (A, B)])
    damaged = batch[:40] + b"X" + batch[41:]
    path = tmp_path / "j.jsonl"
    path.write_bytes(damaged + _record("lease", C))
    with pytest.raises(JournalCorrupt, match="line 1 "):
        WorkLeaseJournal(path, clock=_clock)
    assert path.read_bytes() == damaged + _record("lease", C)


def test_a_batch_holding_a_record_with_a_wrong_crc_is_a_bad_line() -> None:
    inner = [_record("lease", A), _record("lease", B).replace(b'"attempt":1', b'"attempt":2')]
    doc = {"event": "batch", "records": [json.loads(x) for x in inner]}
    line = encode_record(doc)  # the batch's own crc is right
    (bad,) = scan_bytes(line).bad
    assert bad.reason.startswith("record 2 of the batch is bad (checksum mismatch")


def test_a_last_record_followed_by_zero_bytes_is_kept_and_the_zeros_are_a_torn_tail(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    head = _record("lease", A) + _record("done", A)[:-1]  # the newline's sector lost: a zero
    path.write_bytes(head + b"\0")
    with WorkLeaseJournal(path, clock=_clock) as j:
        assert j.completed == {A}
        assert j.torn_tail == b"\0"
        assert j.lease(B, 2)
    with WorkLeaseJournal(path, clock=_clock) as j:
        assert j.completed == {A}
        assert set(j.leases) == {B}
        assert j.torn_tail == b""
    assert path.read_bytes().startswith(head + b"\n")
    assert (tmp_path / "j.jsonl.broken").read_bytes() == b"\0"


def test_the_missing_newline_is_written_and_fsynced_before_the_next_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(_record("lease", A) + _record("done", A)[:-1])
    calls: list[object] = []
    real_write, real_fsync = journal_module._write_all, os.fsync

    def write_all(fd: int, data: bytes) -> None:
        calls.append(bytes(data))
        real_write(fd, data)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    with WorkLeaseJournal(path, clock=_clock) as j:
        monkeypatch.setattr(journal_module, "_write_all", write_all)
        monkeypatch.setattr(journal_module.os, "fsync", fsync)
        assert j.lease(B, 2)
        assert j.lease(C, 3)
    monkeypatch.undo()
    assert calls[:3] == [b"\n", "fsync", calls[2]]
    assert isinstance(calls[2], bytes)
    assert calls[2].startswith(b'{"event":"lease"')
    assert calls.count(b"\n") == 1  # only once
