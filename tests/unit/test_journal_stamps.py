"""The timestamps the journal writes (docs/journal-format.md, "Records"): a clock reading is
stamped rounded to 10 µs (``records.unix_stamp``), so that a new record's ``updated`` has at
most 15 significant digits, which the bulk reader proves to be ``repr``'s spelling without
``float`` and ``repr``; journals written before, with ``time.time()``'s 16–17 digits, still open
to the very stamps they hold.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from leasefence.impl.journal import WorkLeaseJournal, encode_batch, encode_record
from leasefence.impl.master import StepClock
from leasefence.impl.records import STAMPS_ROUNDED_BELOW, _scan_lines, unix_stamp

IDS = [c * 64 for c in "0123456789abcdef"]
#: ``time.time()`` readings as they come (17 and 16 significant digits).
READINGS = [1796311088.6648753, 1796311088.6650226, 1796311088.665069, 1796311088.6652107]


def _digits(text: str) -> int:
    """Significant digits of a decimal in fixed notation."""
    return len(text.lstrip("-").replace(".", "").strip("0"))


def _stamps(path: Path) -> list[str]:
    """Every ``updated`` of the journal at ``path`` as the file spells it, batches included."""

    def records_of(doc: dict[str, Any]) -> Iterator[dict[str, Any]]:
        yield from doc["records"] if doc["event"] == "batch" else [doc]

    docs = [json.loads(line, parse_float=str) for line in path.read_bytes().splitlines()]
    return [r["updated"] for doc in docs for r in records_of(doc)]


class Readings:
    """A clock returning ``READINGS`` in turn, then the last one."""

    def __init__(self) -> None:
        self.left = list(READINGS)

    def __call__(self) -> float:
        return self.left.pop(0) if len(self.left) > 1 else self.left[0]


def test_a_new_record_is_stamped_with_at_most_15_significant_digits(tmp_path: Path) -> None:
    # Fails on a writer that stamps the clock's reading as it is (17 digits here), which the
    # bulk reader would have to read back with float and repr (catalogue:
    # "journal-stamps-unrounded").
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=Readings()) as j:
        j.lease(IDS[0], 1)
        j.lease(IDS[1], 2, generation=(1, 1))
        j.complete(IDS[0], 1)
        j.abandon(IDS[1], 2, generation=(1, 1))
    with WorkLeaseJournal(path, clock=Readings(), sync="group") as j:
        j.lease(IDS[2], 3)
        j.lease(IDS[3], 3)
        j.recover(0)  # a batch of two reclaims
        j.commit()
    stamps = _stamps(path)
    assert len(stamps) == 8
    assert max(map(_digits, stamps)) <= 15
    # what the bulk reader then takes without repr: at most 16 characters with the point
    assert max(map(len, stamps)) <= 16
    with WorkLeaseJournal.open_readonly(path) as j:
        assert j.completed == {IDS[0]}
        assert not j.leases


def test_a_lease_in_memory_holds_the_stamp_its_record_holds(tmp_path: Path) -> None:
    # Fails if the journal kept the clock's reading in memory and wrote the stamp (or the other
    # way round): a reopened journal would differ from the one that wrote it.
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=lambda: READINGS[0]) as j:
        j.lease(IDS[0], 1)
        written = dict(j.leases)
    assert written[IDS[0]].updated == unix_stamp(READINGS[0]) == 1796311088.66488
    with WorkLeaseJournal.open_readonly(path) as j:
        assert dict(j.leases) == written


@given(st.floats(-(2.0**53), 2.0**53, allow_nan=False))
def test_a_stamp_is_within_5_us_of_its_reading_and_its_own_stamp(reading: float) -> None:
    # Fails on a rounding coarser than 10 µs, or one that moves a stamp on a second pass.
    stamp = unix_stamp(reading)
    assert abs(stamp - reading) <= 5e-6 + 2 * math.ulp(reading)
    assert unix_stamp(stamp) is stamp
    if 1 <= reading < STAMPS_ROUNDED_BELOW:  # in fixed notation, as the bulk reader takes it
        assert _digits(repr(stamp)) <= 15
        assert len(repr(stamp)) <= 16


@given(st.floats(-(2.0**53), 2.0**53, allow_nan=False), st.floats(0, 1e6, allow_nan=False))
def test_stamps_keep_the_order_of_their_readings(reading: float, later_by: float) -> None:
    # A done is never stamped before its lease, nor a reclaim's now before the lease it ends;
    # fails on a rounding that is not monotone (say, one rounding down and another up).
    later = reading + later_by
    assert unix_stamp(reading) <= unix_stamp(later)
    before = math.nextafter(reading, -math.inf)
    assert unix_stamp(before) <= unix_stamp(reading)


def test_the_master_step_clock_reads_the_stamp_the_journal_writes(tmp_path: Path) -> None:
    # The trace's now, the coordinator's stamp and the journal's are one time per step; fails if
    # the step clock handed out the raw reading (the trace would then say another time than the
    # journal, by up to 5 µs, and trace validation compares them in microseconds).
    clock = StepClock(lambda: READINGS[0])
    assert clock() == unix_stamp(READINGS[0])
    with WorkLeaseJournal(tmp_path / "j.jsonl", clock=clock) as j, clock.step() as now:
        j.lease(IDS[0], 1)
        assert j.leases[IDS[0]].updated is now


def test_a_journal_with_17_digit_stamps_opens_to_the_stamps_it_holds(tmp_path: Path) -> None:
    # Journals written before stamps were rounded: fails if a reader rounded what it reads, or
    # took a 17-digit stamp without proving its spelling (compare the reference reader).
    lines = []
    for k, reading in enumerate(READINGS * 3):
        body = {"event": "lease", "work_id": IDS[k], "worker": 1 + k % 3, "updated": reading}
        lines.append(encode_record({**body, "clock": "unix", "attempt": 1}))
    done = {"event": "done", "work_id": IDS[0], "worker": 1, "updated": READINGS[1]}
    lines.append(encode_record({**done, "clock": "unix", "attempt": 1}))
    path = tmp_path / "old.jsonl"
    path.write_bytes(b"".join(lines[:4]) + encode_batch(lines[4:]))
    assert max(map(_digits, _stamps(path))) == 17
    _, rows = _scan_lines(path.read_bytes())
    expected = {row[2]: row[4] for row in rows if row[1] == "lease" and row[2] != IDS[0]}
    with WorkLeaseJournal.open_readonly(path) as j:
        assert {w: x.updated for w, x in j.leases.items()} == expected
        assert j.completed == {IDS[0]}
    with WorkLeaseJournal(path, clock=lambda: READINGS[3]) as j:
        j.compact()  # compaction keeps each lease's own stamp, unrounded
    with WorkLeaseJournal.open_readonly(path) as j:
        assert {w: x.updated for w, x in j.leases.items()} == expected
