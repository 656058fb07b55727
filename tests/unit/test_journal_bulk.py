"""The bulk reader (``records._scan_bulk``) against the reference reader (``records._scan_lines``,
line by line): on valid journals, torn ones and hostile bytes both give the same good records,
bad lines, torn tail and corruption verdict, and a journal opens to the same state either way.

The bulk reader only ever accepts what this implementation writes; each test that plants
something else checks that it declined (and so that the reference decided), so that a bulk
reader grown too lenient fails here rather than reading a hostile line differently.
"""

from __future__ import annotations

import json
import re
import tempfile
import zlib
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given
from hypothesis import strategies as st

import leasefence.impl.journal as journal_module
from leasefence.impl import records
from leasefence.impl.errors import LeaseError
from leasefence.impl.journal import WorkLeaseJournal, encode_batch, encode_record, record_crc
from leasefence.impl.records import _scan, _scan_bulk, _scan_lines, legacy_lease_line

HEX = "0123456789abcdef"
IDS = [c * 64 for c in HEX]
T0 = 1_767_225_600.25


def _body(event: str, work_id: str, worker: int | None, updated: float, **extra: Any) -> Any:
    body: dict[str, Any] = {
        "event": event,
        "work_id": work_id,
        "worker": worker,
        "updated": updated,
        "clock": "unix",
        "attempt": extra.pop("attempt", 1),
    }
    body.update(extra)
    return body


def _line(event: str, work_id: str, worker: int | None, updated: float, **extra: Any) -> bytes:
    return encode_record(_body(event, work_id, worker, updated, **extra))


def _agree(data: bytes) -> None:
    """Both readers see ``data`` the same way."""
    assert _scan(data) == _scan_lines(data)


# What the journal writes: single records, generations, batches, as encode_record does.
records_written = st.builds(
    lambda event, k, worker, updated, attempt, gen: _line(
        event,
        IDS[k],
        None if worker is None or (worker < 0 and event != "lease") else abs(worker),
        updated,
        attempt=attempt,
        **({} if gen is None else {"generation": list(gen)}),
    ),
    st.sampled_from(["lease", "done", "reclaim"]),
    st.integers(0, 15),
    st.none() | st.integers(-(2**31 - 1), 2**31 - 1),
    st.floats(-(2.0**53), 2.0**53, allow_nan=False) | st.integers(-(2**40), 2**40).map(float),
    st.integers(0, 2**63 - 1),
    st.none() | st.tuples(st.integers(0, 2**63 - 1), st.integers(0, 2**63 - 1)),
)
lines_written = st.lists(records_written, min_size=1, max_size=4).map(encode_batch)


@given(st.lists(lines_written, max_size=12))
def test_both_readers_agree_on_every_journal_this_implementation_writes(
    lines: list[bytes],
) -> None:
    _agree(b"".join(lines))


@given(st.lists(lines_written, min_size=1, max_size=8), st.data())
def test_both_readers_agree_on_a_journal_cut_or_damaged_anywhere(
    lines: list[bytes], data: st.DataObject
) -> None:
    whole = b"".join(lines)
    cut = data.draw(st.integers(0, len(whole)))
    _agree(whole[:cut])  # a torn tail at every byte
    _agree(whole[:cut] + b"\0" * data.draw(st.integers(0, 600)))  # zeros where the file grew
    k = data.draw(st.integers(0, len(whole) - 1))
    flipped = whole[:k] + bytes([whole[k] ^ data.draw(st.integers(1, 255))]) + whole[k + 1 :]
    _agree(flipped)  # one damaged byte: a bad line, in the middle or at the end


@given(st.lists(lines_written, max_size=4), st.binary(max_size=300), st.lists(lines_written))
def test_both_readers_agree_on_hostile_bytes_between_good_lines(
    before: list[bytes], junk: bytes, after: list[bytes]
) -> None:
    _agree(b"".join(before) + junk + b"".join(after))
    _agree(b"".join(before) + junk + b"\n" + b"".join(after))


def _recrc(doc: dict[str, Any]) -> bytes:
    """``doc`` with the ``crc`` the reference computes for it, in ``doc``'s own key order: a
    good record, but not in the layout the journal writes."""
    line = json.dumps({**doc, "crc": record_crc(doc)}, separators=(",", ":"))
    return line.encode() + b"\n"


def _crafted(updated: str) -> bytes:
    """A lease in the journal's layout whose ``updated`` is spelled ``updated`` and whose crc
    is computed over that spelling, as a reader building the canonical form from the line's
    text (instead of from the values, as the reference does) would compute it."""
    canonical = (
        f'{{"attempt":1,"clock":"unix","event":"lease","updated":{updated},'
        f'"work_id":"{IDS[1]}","worker":3}}'
    )
    crc = f"{zlib.crc32(canonical.encode()) & 0xFFFFFFFF:08x}"
    return (
        f'{{"event":"lease","work_id":"{IDS[1]}","worker":3,"updated":{updated},'
        f'"clock":"unix","attempt":1,"crc":"{crc}"}}\n'
    ).encode()


def _respelled(updated: str) -> bytes:
    """A lease in the journal's layout whose ``updated`` is spelled ``updated`` (not as
    ``repr`` spells its value) and whose crc is the reference's, over ``repr``'s spelling: a
    good record the journal never writes, which the bulk reader leaves to the reference."""
    line = _line("lease", IDS[1], 3, float(updated))
    spelled = repr(float(updated)).encode()
    assert spelled in line
    return line.replace(b'"updated":' + spelled, b'"updated":' + updated.encode())


def _wrong_crc(line: bytes) -> bytes:
    """The record ``line`` with another checksum."""
    crc = line[-11:-3]
    return line[:-11] + (b"00000000" if crc != b"00000000" else b"11111111") + line[-3:]


def _wrong_batch_crc(line: bytes) -> bytes:
    """The batch ``line`` with its own checksum (not its records') changed."""
    head, crc = line[:-12], line[-12:-3]
    assert crc.startswith(b'"')
    assert len(crc) == 9
    return head + b'"' + (b"00000000" if crc != b'"00000000' else b"11111111") + b'"}\n'


HOSTILE = {
    # a float not spelled as repr spells it, checksummed over that spelling: the reference
    # checksums the value's canonical spelling, so the line is bad
    "float spelled with a trailing zero": _crafted("1767225600.250"),
    "float spelled with a leading zero": _crafted("01767225600.25"),
    "tiny float spelled plainly": _crafted("0.00001"),
    "float with 17 digits that is not the shortest": _crafted("0.30000000000000001"),
    # the same double as 1767225600.1234567, which is repr's spelling of it
    "timestamp with 17 digits, not repr's": _crafted("1767225600.1234568"),
    "record with a wrong checksum": _wrong_crc(_line("lease", IDS[1], 3, T0)),
    "long timestamp with a wrong checksum": _wrong_crc(_line("lease", IDS[1], 3, 1e9 / 3)),
    # good records, but not as the journal writes them: the reference reads them
    "good record with a trailing zero": _respelled("1767225600.250"),
    "good record with 17 digits, not the shortest": _respelled("0.30000000000000001"),
    "good record spelling a tiny float plainly": _respelled("0.00001"),
    "lease without an owner": _line("lease", IDS[2], None, T0),
    "record ending in a comma": _line("done", IDS[3], 1, T0)[:-1] + b",\n",
    "batch without its opening": _line("done", IDS[3], 1, T0)[:-1] + b',"crc":"00000000"}\n',
    # a batch whose own checksum is right (it covers its records as written), one of whose
    # records' is wrong: the bulk reader checks both, from one canonical text
    "batch with a record's wrong checksum": encode_batch(
        [_line("lease", IDS[12], 1, T0), _wrong_crc(_line("done", IDS[12], 1, T0))]
    ),
    # a record's checksum is continued from its opening's, one per attempt: it must be its own
    "record whose checksum covers another attempt": _line(
        "lease", IDS[13], 1, T0, attempt=3
    ).replace(b'"attempt":3,', b'"attempt":4,'),
    # the generation is checksummed as its line spells it: with its own values, and not left out
    "record whose checksum covers another generation": _line(
        "lease", IDS[14], 1, T0, generation=[2, 41]
    ).replace(b"[2,41]", b"[2,42]"),
    "record whose checksum leaves its generation out": _line("lease", IDS[15], 1, T0).replace(
        b',"crc":', b',"generation":[2,41],"crc":'
    ),
    "batch with a wrong checksum": _wrong_batch_crc(
        encode_batch([_line("lease", IDS[4], 1, T0), _line("done", IDS[4], 1, T0)])
    ),
    "a legacy line": legacy_lease_line(IDS[5], 5, 912345.5),
    "spaces after the colons": _recrc(_body("lease", IDS[6], 1, T0)).replace(b'":', b'": '),
    "keys in another order": _recrc(dict(sorted(_body("lease", IDS[7], 1, T0).items()))),
    "an extra field": _recrc({**_body("reclaim", IDS[8], 1, T0), "note": "x"}),
    "a carriage return": _line("lease", IDS[9], 1, T0)[:-1] + b"\r\n",
    "an empty line": b"\n",
    "latin-1 bytes": _line("lease", IDS[9], 1, T0)[:-2] + b"\xe9}\n",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_both_readers_agree_on_each_hostile_line_and_the_bulk_reader_declines_it(
    name: str,
) -> None:
    good = _line("lease", IDS[0], 2, T0) + encode_batch(
        [_line("done", IDS[0], 2, T0 + 1), _line("lease", IDS[11], 4, T0 + 1, generation=[2, 41])]
    )
    hostile = HOSTILE[name]
    for data in (good + hostile, good + hostile + good, hostile + good):
        _agree(data)
        _open_agree(data)
    assert _scan_bulk(good + hostile + good) is None
    assert _scan_bulk(good) is not None


def test_the_bulk_reader_takes_a_journal_written_by_today_code_whole(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=lambda: T0) as j:
        j.lease(IDS[0], 1)
        j.lease(IDS[1], 2, generation=(3, 7))
        j.complete(IDS[0], 1)
        j.complete(IDS[2])  # never leased: attempt 0, no owner
    with WorkLeaseJournal(path, sync="group", clock=lambda: T0 + 5) as j:
        j.abandon(IDS[1], 2, generation=(3, 7))
        j.lease(IDS[3], 4)
        j.recover(1.0)  # a batch line of one record: every lease is a second old
        j.lease(IDS[4], 4)
        j.lease(IDS[5], 1, generation=(4, 1))
        j.commit()  # a batch line of two
    data = path.read_bytes()
    bulk = _scan_bulk(data)
    assert bulk is not None
    end, lines, rows = bulk
    assert (end, lines) == (len(data), data.count(b"\n"))
    assert len(rows) == 8
    assert [r[0] for r in rows] == [1, 2, 3, 4, 5, 5, 5, 5]  # line numbers
    _agree(data)
    with WorkLeaseJournal.open_readonly(path) as j:
        assert dict(j.attempts) == {IDS[0]: 1, IDS[1]: 1, IDS[3]: 1, IDS[4]: 1, IDS[5]: 1}
        assert j.completed == {IDS[0], IDS[2]}
        assert set(j.leases) == {IDS[3], IDS[4], IDS[5]}
        assert j.leases[IDS[5]].generation == (4, 1)


def test_a_work_id_in_capitals_is_kept_as_written_by_both_readers() -> None:
    data = _line("lease", IDS[10].upper(), 1, T0) + _line("done", IDS[10], 1, T0)
    bulk = _scan_bulk(data)
    assert bulk is not None
    assert [row[2] for row in bulk[2]] == [IDS[10].upper(), IDS[10]]
    _agree(data)


def test_a_torn_tail_after_bulk_lines_is_read_by_the_reference_reader(tmp_path: Path) -> None:
    good = b"".join(_line("lease", IDS[k], 1, T0) for k in range(3))
    torn = _line("done", IDS[0], 1, T0)[:40]
    data = good + torn
    assert _scan_bulk(data) is not None
    scan, rows = _scan(data)
    assert len(rows) == 3
    assert scan.torn_bytes == len(torn)
    assert not scan.corrupt
    _agree(data)
    unterminated = good[:-1]  # a last good record without its newline: kept
    scan, rows = _scan(unterminated)
    assert (len(rows), scan.unterminated, scan.torn_bytes) == (3, True, 0)
    _agree(unterminated)


def _state(j: WorkLeaseJournal) -> tuple[Any, ...]:
    return (
        list(j.leases.items()),
        j.completed,
        list(j.attempts.items()),
        j.record_count,
        j.legacy_record_count,
    )


#: How a journal can read its file: the bulk reader handing its records to replay as columns
#: (what opening a journal does), the bulk reader making a row per record (``scan_bytes``), and
#: the reference reader alone.
READERS: dict[str, Any] = {
    "bulk, columns": _scan,
    "bulk, rows": lambda data, replay=None: _scan(data),
    "reference": lambda data, replay=None: _scan_lines(data),
}


def _opened(data: bytes) -> list[Any]:
    """What opening a journal holding ``data`` gives through each of ``READERS``: its state, or
    the refusal (the same error with the same message)."""
    outcome: list[Any] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "j.jsonl"
        path.write_bytes(data)
        for reader in READERS.values():
            with mock.patch.object(journal_module, "_scan", reader):
                try:
                    with WorkLeaseJournal.open_readonly(path) as j:
                        outcome.append(_state(j))
                except LeaseError as err:
                    outcome.append((type(err), str(err)))
    return outcome


def _open_agree(data: bytes) -> None:
    """A journal holding ``data`` opens to the same state through every reader."""
    first, *others = _opened(data)
    assert others == [first] * len(others)


@given(st.lists(lines_written | st.sampled_from(sorted(HOSTILE.values())), max_size=10))
def test_a_journal_opens_to_the_same_state_through_either_reader(lines: list[bytes]) -> None:
    _open_agree(b"".join(lines))


@given(st.lists(lines_written, max_size=30), st.integers(1, 2000), st.data())
def test_both_readers_agree_whatever_the_bulk_reader_chunk_size(
    lines: list[bytes], chunk: int, data: st.DataObject
) -> None:
    whole = b"".join(lines)
    damaged = whole
    if whole:
        k = data.draw(st.integers(0, len(whole) - 1))
        damaged = whole[:k] + b"#" + whole[k + 1 :]
    with mock.patch.object(records, "_BULK_CHUNK", chunk):
        _agree(whole)
        _agree(damaged)
        _open_agree(whole)  # leases held across chunks, handed over as columns
        _open_agree(damaged)


def test_the_bulk_reader_takes_the_chunks_before_a_bad_line_and_leaves_the_rest() -> None:
    good = [_line("lease", IDS[k], 1, T0) for k in range(6)]
    data = b"".join(good[:4]) + HOSTILE["a legacy line"] + b"".join(good[4:])
    with mock.patch.object(records, "_BULK_CHUNK", 2 * len(good[0])):
        bulk = _scan_bulk(data)
        assert bulk is not None
        end, lines, rows = bulk
        assert (end, lines, len(rows)) == (4 * len(good[0]), 4, 4)
        _agree(data)


@given(st.from_regex(records._STAMP, fullmatch=True))
def test_a_timestamp_the_bulk_reader_takes_as_written_is_spelled_as_repr_spells_it(
    stamp: str,
) -> None:
    # The canonical form holds repr's spelling; the bulk reader checksums the line's own.
    if records._spelled_as_repr([stamp]):
        assert repr(float(stamp)) == stamp


@given(st.integers(1, 10**15 - 1), st.integers(0, 15), st.booleans())
def test_every_decimal_of_at_most_15_digits_in_repr_shape_is_taken_without_repr(
    digits: int, point: int, negative: bool
) -> None:
    # The proof without repr (DBL_DIG): such a decimal is repr's spelling of its value.
    text = str(digits).rjust(point + 1, "0")
    whole, fraction = text[: len(text) - point], text[len(text) - point :].rstrip("0") or "0"
    stamp = ("-" if negative else "") + whole + "." + fraction
    if re.fullmatch(records._STAMP, stamp) is None:
        return  # below 1e-4: repr writes an exponent, and the shape refuses it
    assert repr(float(stamp)) == stamp
    assert records._spelled_as_repr([stamp])


def test_timestamps_are_compared_with_repr_when_the_shape_cannot_tell() -> None:
    assert records._spelled_as_repr([repr(T0 + k / 3) for k in range(100)])
    assert not records._spelled_as_repr(["0.1", "0.30000000000000001"])
    assert not records._spelled_as_repr([repr(T0 / 3), "1767225600.1234568"])


def test_every_reader_applies_records_in_file_order_whatever_their_sequence() -> None:
    # A completed ID leased again, a lease granted twice, an ID released with attempt 0, a
    # reclaim after a completion: each reader's replay must apply them as the reference does.
    data = b"".join(
        [
            _line("lease", IDS[0], 1, T0),
            _line("done", IDS[0], 1, T0 + 1),
            _line("lease", IDS[0], 2, T0 + 2, attempt=2),  # completed, leased again
            _line("lease", IDS[1], 3, T0 + 3),
            _line("lease", IDS[2], 3, T0 + 3, generation=[1, 9]),
            _line("lease", IDS[1], 4, T0 + 4, attempt=2),  # granted twice: keeps its place
            _line("done", IDS[3], None, T0 + 5, attempt=0),  # never leased
            _line("reclaim", IDS[0], 2, T0 + 6, attempt=2),
            _line("done", IDS[4], None, T0 + 7, attempt=0),
            _line("reclaim", IDS[4], None, T0 + 8, attempt=0),  # stays completed
        ]
    )
    for chunk in (1, 150, 1 << 18):  # leases held across chunks too
        with mock.patch.object(records, "_BULK_CHUNK", chunk):
            assert _scan_bulk(data) is not None
            _open_agree(data)
            leases, completed, attempts, *_ = _opened(data)[0]  # through columns
    assert [(w, r.owner, r.generation) for w, r in leases] == [
        (IDS[1], 4, None),
        (IDS[2], 3, (1, 9)),
    ]
    assert completed == {IDS[3], IDS[4]}
    assert attempts == [(IDS[0], 2), (IDS[1], 2), (IDS[2], 1)]
