"""Fuzzing the journal's reader (``parse_line``, ``scan_bytes``, opening a file): every input ends
in a good record or a documented bad-line reason, never an unexpected exception, and no valid
record is ever dropped or changed."""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasefence.impl.errors import LeaseError
from leasefence.impl.journal import (
    EVENTS,
    Record,
    WorkLeaseJournal,
    encode_record,
    parse_line,
    scan_bytes,
)

HEX = "0123456789abcdefABCDEF"
work_ids = st.text(alphabet=HEX, min_size=64, max_size=64)
ints = st.integers(min_value=-(2**63), max_value=2**63)
finite = st.floats(allow_nan=False, allow_infinity=False)
#: The documented ranges (docs/journal-format.md, "Records"): ranks, attempts, timestamps.
RANK_MAX, ATTEMPT_MAX, STAMP_MAX = 2**31 - 1, 2**63 - 1, 2**53
ranks = st.integers(0, RANK_MAX)
stamps = st.floats(-STAMP_MAX, STAMP_MAX) | st.integers(-STAMP_MAX, STAMP_MAX)

#: A record body the journal writes or accepts (docs/journal-format.md).
valid_bodies = st.one_of(
    st.fixed_dictionaries(
        {
            "event": st.just("lease"),
            "work_id": work_ids,
            "worker": ranks,
            "updated": stamps,
        },
        optional={"clock": st.sampled_from(["unix", "mono", ""]), "attempt": st.integers(0, 2**40)},
    ),
    st.fixed_dictionaries(
        {"event": st.sampled_from(["done", "reclaim"]), "work_id": work_ids},
        optional={
            "worker": st.none() | ranks,
            "updated": stamps,
            "clock": st.just("unix"),
            "attempt": st.integers(0, 2**40),
        },
    ),
)

json_scalars = st.none() | st.booleans() | ints | finite | st.text(max_size=70)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
FIELDS = ("event", "work_id", "worker", "updated", "clock", "attempt")
#: Any field may hold any JSON value (wrong types), or a plausible one.
any_bodies = st.dictionaries(
    st.sampled_from(FIELDS),
    json_values | st.sampled_from([*EVENTS, "A" * 64, "0" * 64, 1.5, -1, True]),
    max_size=6,
)


def _valid_by_the_format(doc: dict[str, Any]) -> bool:
    """The rules of docs/journal-format.md, written apart from the parser."""

    def is_int(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def is_number(v: object) -> bool:
        finite = is_int(v) or (isinstance(v, float) and math.isfinite(v))
        return finite and isinstance(v, int | float) and abs(v) <= STAMP_MAX

    def is_rank(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and 0 <= v <= RANK_MAX

    work_id = doc.get("work_id")
    return (
        doc.get("event") in EVENTS
        and isinstance(work_id, str)
        and len(work_id) == 64
        and all(c in HEX for c in work_id)
        and (doc.get("worker") is None or is_rank(doc["worker"]))
        and (doc.get("updated") is None or is_number(doc["updated"]))
        and (doc.get("clock") is None or isinstance(doc["clock"], str))
        and (
            doc.get("attempt") is None
            or (is_int(doc["attempt"]) and 0 <= doc["attempt"] <= ATTEMPT_MAX)
        )
        and (
            doc.get("event") != "lease"
            or (is_rank(doc.get("worker")) and doc.get("updated") is not None)
        )
    )


def _same(r: Record, doc: dict[str, Any]) -> bool:
    return (
        r.event == doc["event"]
        and r.work_id == doc["work_id"]
        and r.worker == doc.get("worker")
        and r.updated == doc.get("updated")
        and r.clock == doc.get("clock")
        and r.attempt == doc.get("attempt")
    )


@given(st.binary(max_size=400))
def test_random_bytes_parse_to_a_record_or_a_reason_never_an_exception(data: bytes) -> None:
    got = parse_line(data, 1)
    assert isinstance(got, Record | str)
    scan = scan_bytes(data)
    assert 0 <= scan.good_end <= scan.size == len(data)


@given(valid_bodies)
def test_every_valid_record_parses_to_exactly_its_fields(body: dict[str, Any]) -> None:
    got = parse_line(encode_record(body)[:-1], 7)
    assert isinstance(got, Record), got
    assert _same(got, body)
    assert got.checksummed
    assert got.line == 7


@given(any_bodies, st.booleans())
def test_records_of_any_field_types_are_accepted_exactly_when_the_format_allows(
    body: dict[str, Any], checksummed: bool
) -> None:
    line = encode_record(body)[:-1] if checksummed else json.dumps(body).encode()
    got = parse_line(line, 1)
    if _valid_by_the_format(body):
        assert isinstance(got, Record), got
        assert _same(got, body)
    else:
        assert isinstance(got, str)


@given(valid_bodies, st.data())
def test_a_truncated_record_is_a_bad_line(body: dict[str, Any], data: st.DataObject) -> None:
    line = encode_record(body)[:-1]
    cut = data.draw(st.integers(0, len(line) - 1))
    assert isinstance(parse_line(line[:cut], 1), str)


@given(valid_bodies, st.data())
def test_a_bit_flip_in_a_record_is_a_bad_line_or_the_same_record(
    body: dict[str, Any], data: st.DataObject
) -> None:
    line = bytearray(encode_record(body)[:-1])
    i = data.draw(st.integers(0, len(line) - 1))
    line[i] ^= 1 << data.draw(st.integers(0, 7))
    got = parse_line(bytes(line), 1)
    assert isinstance(got, str) or _same(got, body), (bytes(line), got)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
@pytest.mark.parametrize("checksummed", [True, False])
def test_nan_and_infinite_timestamps_are_bad_lines(value: str, checksummed: bool) -> None:
    body = {"event": "lease", "work_id": "a" * 64, "worker": 1, "updated": 1.0, "clock": "unix"}
    line = (
        (encode_record(body)[:-1] if checksummed else json.dumps(body).encode())
        .replace(b'"updated":1.0', b'"updated":' + value.encode())
        .replace(b'"updated": 1.0', b'"updated": ' + value.encode())
    )
    assert value.encode() in line
    assert isinstance(parse_line(line, 1), str)


@given(st.binary(min_size=1, max_size=64).filter(lambda b: not _is_utf8(b)))
def test_non_utf8_lines_are_bad_lines(junk: bytes) -> None:
    body = encode_record({"event": "done", "work_id": "b" * 64})[:-1]
    assert isinstance(parse_line(junk + body, 1), str)
    assert isinstance(parse_line(body[:20] + junk + body[20:], 1), str)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_a_huge_line_is_a_bad_line_and_a_huge_valid_record_is_still_kept() -> None:
    assert isinstance(parse_line(b"x" * 5_000_000, 1), str)
    assert isinstance(parse_line(b'{"event":"' + b"a" * 5_000_000 + b'"}', 1), str)
    body = {"event": "done", "work_id": "c" * 64, "pad": "p" * 1_000_000}
    got = parse_line(encode_record(body)[:-1], 1)
    assert isinstance(got, Record)  # unknown fields are ignored; the checksum covers them


@given(st.lists(valid_bodies, min_size=1, max_size=8), st.binary(max_size=300))
def test_n_valid_records_followed_by_garbage_keep_all_n(
    bodies: list[dict[str, Any]], garbage: bytes
) -> None:
    prefix = b"".join(encode_record(b) for b in bodies)
    scan = scan_bytes(prefix + garbage)
    assert len(scan.records) >= len(bodies)
    for n, (r, body) in enumerate(zip(scan.records, bodies, strict=False), start=1):
        assert r.line == n
        assert _same(r, body)
    if not scan.corrupt:
        assert scan.good_end >= len(prefix)


@given(st.lists(valid_bodies, min_size=2, max_size=6), st.data())
def test_a_valid_record_parses_identically_wherever_it_appears(
    bodies: list[dict[str, Any]], data: st.DataObject
) -> None:
    lines = [encode_record(b) for b in bodies]
    order = data.draw(st.permutations(range(len(lines))))
    scan = scan_bytes(b"".join(lines[i] for i in order))
    assert not scan.bad
    for r, i in zip(scan.records, order, strict=True):
        assert _same(r, bodies[i])


@given(st.lists(valid_bodies, min_size=1, max_size=5), st.binary(min_size=1, max_size=200))
def test_opening_a_journal_with_any_tail_raises_only_documented_errors(
    bodies: list[dict[str, Any]], tail: bytes
) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.jsonl"
        path.write_bytes(b"".join(encode_record(b) for b in bodies) + tail)
        try:
            j = WorkLeaseJournal.open_readonly(path)
        except LeaseError:
            return
        with j:
            assert j.record_count >= len(bodies)


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_opening_any_bytes_raises_nothing_but_a_lease_error(head: bytes, tail: bytes) -> None:
    good = encode_record({"event": "done", "work_id": "d" * 64})
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "j.jsonl"
        path.write_bytes(head + b"\n" + good + tail)
        with contextlib.suppress(LeaseError):
            WorkLeaseJournal.open_readonly(path).close()


def test_a_deeply_nested_line_is_a_bad_line() -> None:
    assert isinstance(parse_line(b"[" * 10_000, 1), str)


def test_a_lease_stamped_with_an_integer_beyond_float_range_is_a_bad_line() -> None:
    body = {
        "event": "lease",
        "work_id": "e" * 64,
        "worker": 1,
        "updated": 10**400,
        "clock": "unix",
        "attempt": 1,
    }
    got = parse_line(encode_record(body)[:-1], 1)
    if isinstance(got, Record):  # accepted: then it must at least be recoverable
        with tempfile.TemporaryDirectory() as d:
            path = Path(d) / "j.jsonl"
            path.write_bytes(encode_record(body))
            with WorkLeaseJournal(path, clock=lambda: 1.0) as j:
                j.recover(5)
    assert isinstance(got, str)


def test_the_random_strategies_can_produce_valid_and_invalid_records() -> None:
    # guards the oracle above against a rule that accepts or refuses everything
    assert _valid_by_the_format({"event": "done", "work_id": "f" * 64})
    assert not _valid_by_the_format({"event": "done", "work_id": "f" * 64, "worker": True})
