"""The journal's record format (docs/journal-format.md): encoding records and batch lines with
their checksums, parsing and range-checking lines, and scanning a file's bytes into good records,
bad lines and a torn tail, with the rule that tells a torn first write from a file that is not a
journal. ``impl.journal`` builds the journal on it and re-exports its public names.
"""

from __future__ import annotations

import json
import os
import re
import sys
import zlib
from array import array
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from itertools import accumulate, repeat
from operator import methodcaller
from pathlib import Path
from typing import Any, Literal, NamedTuple

from leasefence.impl.durable import read_nofollow
from leasefence.impl.errors import (
    InvalidWorkId,
)
from leasefence.impl.frozen import fast_init
from leasefence.impl.generation import Generation, plain_generation, valid_generation
from leasefence.impl.rules import UNIX
from leasefence.impl.strictjson import float_text, json_scalar

#: Longest line (record plus newline) the journal writes, in bytes. A record is about 170 bytes;
#: only an absurd worker number could exceed this.
MAX_RECORD_BYTES = 4096
#: The unit a disk may persist or lose on its own in a crash (docs/journal-format.md).
SECTOR = 512

#: The ranges of a record's numbers (docs/journal-format.md, "Records"), defined once: a value
#: outside is a bad line when read and ``RecordOutOfRange`` when written, so no absurd value
#: reaches replay, arithmetic or printing. A worker is an MPI rank (a C ``int``); a timestamp
#: (``updated``, and every ``clock()`` reading) is within 2**53 seconds of the epoch, either way.
MAX_WORKER = 2**31 - 1
MAX_ATTEMPT = 2**63 - 1
MAX_TIMESTAMP = float(2**53)

#: A clock reading is stamped to the nearest 1/STAMP_SCALE s (10 µs; ``unix_stamp``), below
#: ``STAMPS_ROUNDED_BELOW`` s (the year 2286), where a stamp so rounded has at most 15 digits.
STAMP_SCALE = 100_000.0
STAMPS_ROUNDED_BELOW = 1e10


def unix_stamp(reading: float) -> float:
    """The timestamp the journal writes for the clock reading ``reading`` (Unix seconds): the
    reading rounded to 10 µs, the very object when it already is (docs/journal-format.md,
    "Timestamps"). A stamp then has at most 15 significant digits, which the bulk reader proves to
    be ``repr``'s spelling without ``repr`` (``_spelled_as_repr``); a ``time.time()`` reading
    has 16 or 17, and ``float`` and ``repr`` of each cost half a microsecond to read back.

    Why this is exact: ``q = round(reading * STAMP_SCALE)`` is an integer of at most 10**15,
    exact as a double, and ``q / STAMP_SCALE`` is the double nearest to the decimal q·10^-5 (IEEE
    division rounds correctly), whose ``repr`` is the shortest decimal that reads back as it,
    so at most q's digits. Each step (a product, a rounding, a quotient) never decreases, so
    stamps keep the order of the readings (a ``done`` is never stamped before its ``lease``);
    a stamp is within 5 µs and an ulp of its reading, and is its own stamp. Readings beyond
    ``STAMPS_ROUNDED_BELOW`` (and NaN or an infinity, which the caller refuses) stay as read."""
    if -STAMPS_ROUNDED_BELOW < reading < STAMPS_ROUNDED_BELOW:
        stamp = round(reading * STAMP_SCALE) / STAMP_SCALE
        if stamp != reading:
            return stamp
    return reading


#: How every record the journal writes begins (``encode_record`` and F314's original format
#: alike); the test of a torn first write (``could_be_torn_first_write``).
RECORD_START = b'{"event":'

#: Record kinds (the ``event`` field), in F314's words.
LEASE = "lease"
DONE = "done"
RECLAIM = "reclaim"
EVENTS = (LEASE, DONE, RECLAIM)
#: The line holding several records written together (docs/journal-format.md, "Batches").
BATCH = "batch"
_BATCH_START = b'{"event":"batch",'

_WORK_ID = re.compile(r"[0-9a-fA-F]{64}")
_CRC = re.compile(r"[0-9a-f]{8}")

Sync = Literal["always", "group"]


def validate_work_id(work_id: object) -> str:
    """``work_id`` itself if it is 64 hexadecimal characters, else ``InvalidWorkId`` naming it.

    The ID is kept as given (no case folding), exactly as the model keys it.
    """
    if isinstance(work_id, str) and _WORK_ID.fullmatch(work_id):
        return work_id
    shown = repr(work_id)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    size = f" ({len(work_id)} characters)" if isinstance(work_id, str) else ""
    raise InvalidWorkId(f"work ID must be 64 hexadecimal characters, got {shown}{size}")


def _check_worker(worker: object, name: str = "worker") -> int:
    if type(worker) is int:
        return worker
    if isinstance(worker, bool) or not isinstance(worker, int):
        raise TypeError(f"{name} must be an int (an MPI rank), got {worker!r:.80}")
    return worker


def _check_generation(generation: object) -> None:
    if generation is not None and not (
        isinstance(generation, tuple) and valid_generation(generation)
    ):
        raise TypeError(f"generation must be None or (epoch, counter), got {generation!r:.80}")


def plain_token(work_id: object, worker: object, generation: object) -> bool:
    """Whether a call's work ID, worker rank and generation are of the plain kinds every call of
    the master passes (a 64-hex ``str``, an ``int``, None or two ``int`` in range), tested
    inline: then ``validate_work_id``, ``_check_worker`` and ``_check_generation`` have nothing
    to say, and the caller runs them only when this is False (they name what is wrong; issue
    19: three calls a decision)."""
    return (
        type(work_id) is str
        and _WORK_ID.fullmatch(work_id) is not None
        and type(worker) is int
        and plain_generation(generation)
    )


def _owns(held: LeaseRecord, worker: int, generation: Generation | None) -> bool:
    """Whether the token ``(worker, generation)`` is exactly the owner token of ``held``."""
    return held.owner == worker and held.generation == generation


def _canonical(body: Mapping[str, Any]) -> bytes:
    return json.dumps(
        body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    ).encode("ascii")


def record_crc(body: Mapping[str, Any]) -> str:
    """CRC32 of a record's canonical JSON (without ``crc``), as 8 lowercase hex digits."""
    return f"{zlib.crc32(_canonical(body)) & 0xFFFFFFFF:08x}"


class _Line(bytes):
    """A record's line as ``encode_record`` wrote it, which also keeps the record's canonical
    JSON with its ``crc`` (as it sits in a batch's canonical form), so that ``encode_batch``
    joins lines it already has instead of decoding and encoding them again."""

    sorted_form: bytes


#: The keys of every record this implementation writes, in ``encode_record``'s order, and in
#: sorted (canonical) order with ``crc``; ``generation`` is optional.
_KEYS = ("event", "work_id", "worker", "updated", "clock", "attempt")
_KEYS_GENERATION = (*_KEYS, "generation")


def _fast_record(body: Mapping[str, Any]) -> _Line | None:
    """``encode_record(body)`` built from each value's JSON text, without ``json.dumps``, for
    a record with exactly the keys the journal writes and plain values; None otherwise (the
    general path decides, and raises). The bytes are those the general path writes
    (tests/unit/test_records_encode.py compares the two)."""
    keys = tuple(body)
    if keys == _KEYS:
        generation = ""
    elif keys == _KEYS_GENERATION:
        gen = body["generation"]
        if type(gen) is not list or len(gen) != 2:
            return None
        epoch, counter = json_scalar(gen[0]), json_scalar(gen[1])
        if epoch is None or counter is None:
            return None
        generation = f"[{epoch},{counter}]"
    else:
        return None
    event = json_scalar(body["event"])
    work_id = json_scalar(body["work_id"])
    worker = json_scalar(body["worker"])
    updated = json_scalar(body["updated"])
    clock = json_scalar(body["clock"])
    attempt = json_scalar(body["attempt"])
    if None in (event, work_id, worker, updated, clock, attempt):
        return None
    return _assemble(event, work_id, worker, updated, clock, attempt, generation)  # type: ignore[arg-type]


def _assemble(
    event: str, work_id: str, worker: str, updated: str, clock: str, attempt: str, generation: str
) -> _Line:
    """A record's line (and its canonical form, kept for ``encode_batch``) from each value's
    JSON text; ``generation`` is ``[epoch,counter]``'s text, or empty when the record has none."""
    gen_sorted = f',"generation":{generation}' if generation else ""
    head = f'{{"attempt":{attempt},"clock":{clock}'
    tail = (
        f'"event":{event}{gen_sorted},"updated":{updated},"work_id":{work_id},"worker":{worker}}}'
    )
    crc = zlib.crc32(f"{head},{tail}".encode("ascii"))
    line = _Line(
        f'{{"event":{event},"work_id":{work_id},"worker":{worker},"updated":{updated},'
        f'"clock":{clock},"attempt":{attempt}{gen_sorted},"crc":"{crc:08x}"}}\n'.encode("ascii")
    )
    line.sorted_form = f'{head},"crc":"{crc:08x}",{tail}'.encode("ascii")
    return line


#: The JSON text of each event the journal writes, and of its one clock tag.
_EVENT_TEXT = {LEASE: '"lease"', DONE: '"done"', RECLAIM: '"reclaim"'}
_UNIX_TEXT = '"unix"'
_int_text = int.__repr__


def owned_record(
    event: str,
    work_id: str,
    worker: int | None,
    updated: float,
    attempt: int,
    generation: Generation | None,
) -> _Line | None:
    """The line ``encode_record`` writes for the record ``{"event", "work_id", "worker",
    "updated", "clock": "unix", "attempt"[, "generation"]}`` that ``lease``, ``complete``,
    ``abandon`` and ``recover`` append, built straight from values of the exact types and ranges
    the journal checked (an ID of ASCII letters and digits, its own text in quotes, ``int`` rank and attempt in range, a finite
    ``float`` time, a generation of two ``int``); None for anything else, which the caller
    encodes from the record's dict (``encode_record``, which decides and raises). No
    ``json_scalar`` per value and no dict (issue 19); the bytes are ``encode_record``'s
    (tests/unit/test_records_encode.py)."""
    event_text = _EVENT_TEXT.get(event)
    if (
        event_text is None
        or type(work_id) is not str
        or not (work_id.isascii() and work_id.isalnum())  # its text: itself in quotes
        or type(updated) is not float
        or not -MAX_TIMESTAMP <= updated <= MAX_TIMESTAMP
        or type(attempt) is not int
        or not 0 <= attempt <= MAX_ATTEMPT
    ):
        return None
    if worker is None:
        worker_text = "null"
    elif type(worker) is int and 0 <= worker <= MAX_WORKER:
        worker_text = _int_text(worker)
    else:
        return None
    if generation is None:
        gen_text = ""
    elif plain_generation(generation):  # (MAX_GENERATION_PART is MAX_ATTEMPT)
        assert generation is not None
        gen_text = f"[{_int_text(generation[0])},{_int_text(generation[1])}]"
    else:
        return None
    return _assemble(
        event_text,
        f'"{work_id}"',
        worker_text,
        float_text(updated),
        _UNIX_TEXT,
        _int_text(attempt),
        gen_text,
    )


def encode_record(body: Mapping[str, Any]) -> bytes:
    """One checksummed journal line (with its newline) for the record ``body``."""
    fast = _fast_record(body)
    if fast is not None:
        return fast
    line = json.dumps(
        {**body, "crc": record_crc(body)}, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return line.encode("ascii") + b"\n"


def encode_batch(lines: list[bytes]) -> bytes:
    """One journal line (with its newline) holding the records ``lines`` (as ``encode_record``
    wrote them), in order: the line itself when there is one, else a checksummed ``batch``
    line whose ``records`` are those records, each with its own ``crc``."""
    if len(lines) == 1:
        return lines[0]
    if set(map(type, lines)) == {_Line}:  # (no generator to resume per line)
        # A record sits in a batch line exactly as on its own line (``json`` wrote both), and
        # in the batch's canonical form as its own canonical form with its ``crc``.
        canonical = b'{"event":"batch","records":[%s]}' % b",".join(
            [line.sorted_form for line in lines]  # type: ignore[attr-defined]
        )
        crc = zlib.crc32(canonical)
        body = b",".join([line[:-1] for line in lines])
        return b'{"event":"batch","records":[%s],"crc":"%08x"}\n' % (body, crc)
    # Decoding keeps each record's key order and numbers, so each is re-encoded as it was.
    return encode_record({"event": BATCH, "records": [json.loads(line) for line in lines]})


def legacy_lease_line(work_id: str, worker: int, updated: float) -> bytes:
    """A lease line in F314's original format (no ``clock``, no ``attempt``, no ``crc``).

    For tests and conformance: this is what a journal written before F314 holds.
    """
    doc = {"event": LEASE, "work_id": work_id, "worker": worker, "updated": updated}
    return json.dumps(doc).encode("ascii") + b"\n"


@fast_init
@dataclass(frozen=True)
class LeaseRecord:
    """An active lease: its owner rank, its timestamp and that timestamp's clock domain.

    ``clock`` is ``"unix"`` for F314 records and ``None`` for a legacy lease (an untagged
    monotonic value from another boot, which the first ``recover`` reclaims).
    """

    # The holder is ``owner`` here as in the spec, the model and ``StateLease``. F314 names it
    # "worker" where it is fixed: the records' JSON key (``docs/journal-format.md``, and
    # ``Record.worker``, a line as read) and the ``worker=`` keyword of lease, complete and
    # abandon; those keep F314's name.
    owner: int
    updated: float
    clock: str | None
    #: The owner's dispatch generation ``(epoch, counter)`` (issue 12); None: a rank-only
    #: owner (F314, the old protocol). The owner token is ``(owner, generation)``.
    generation: Generation | None = None


@dataclass(frozen=True)
class Record:
    """One good line of the journal file, as read."""

    line: int  # 1-based line number
    event: str
    work_id: str
    worker: int | None
    updated: float | None
    clock: str | None
    attempt: int | None
    checksummed: bool
    generation: Generation | None = None


@dataclass(frozen=True)
class BadLine:
    """A line that is not a good record: why, and its bytes (newline included if present)."""

    line: int
    offset: int
    reason: str
    data: bytes


@dataclass
class Scan:
    """What a journal file holds: good records, bad lines, and where the good part ends.

    ``good_end`` is the byte offset where the first bad line starts (the file length when there
    is none). ``corrupt`` is true when a bad line is followed by a good record.
    """

    records: list[Record] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    good_end: int = 0
    size: int = 0
    unterminated: bool = False  # the last good record has no newline
    corrupt: bool = False

    @property
    def torn_bytes(self) -> int:
        """Bytes past the last good record (a torn tail), 0 when there are none."""
        return 0 if self.corrupt else self.size - self.good_end


def _number(value: object) -> float | None:
    """``value`` as a finite float within ``MAX_TIMESTAMP`` of 0, or None (bools, non-numbers,
    NaN, infinities and values beyond the range are not timestamps)."""
    if type(value) is float:  # the common case first
        return value if -MAX_TIMESTAMP <= value <= MAX_TIMESTAMP else None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not abs(value) <= MAX_TIMESTAMP:  # exact for ints; False for NaN
        return None
    return float(value)


def _whole(value: object, low: int, high: int) -> bool:
    """Whether ``value`` is an int (not a bool) in ``low..high``."""
    if type(value) is int:  # the common case first
        return low <= value <= high
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def _range_problem(worker: object, attempt: object) -> str | None:
    """What is out of range in a record's ``worker`` and ``attempt`` (None: both absent or in
    range); the one rule the reader and the writer share (``updated``: ``_number``)."""
    if worker is not None and not _whole(worker, 0, MAX_WORKER):
        return f"worker is not an integer in 0..{MAX_WORKER} (an MPI rank)"
    if attempt is not None and not _whole(attempt, 0, MAX_ATTEMPT):
        return f"attempt is not an integer in 0..{MAX_ATTEMPT}"
    return None


# The exact layout ``encode_record`` writes for every record this implementation appends
# (lease, done and reclaim alike), with a plain decimal ``updated``. A line of this shape is
# parsed without the JSON machinery: its canonical form is rebuilt from the captured text and
# checksummed. Anything else (legacy records, other spacing or key order, exponents, a
# mismatching checksum) goes through the general path, which alone decides what is bad.
_FAST_LINE = re.compile(
    rb'\{"event":"(lease|done|reclaim)","work_id":"([0-9a-fA-F]{64})",'
    rb'"worker":(null|0|[1-9][0-9]{0,8}),"updated":(-?[0-9]{1,15}\.[0-9]{1,17}),'
    rb'"clock":"unix","attempt":(0|[1-9][0-9]{0,17}),"crc":"([0-9a-f]{8})"\}'
)
_JSON = json.JSONDecoder(parse_constant=lambda name: _reject_constant(name))


#: A good record as the scanner produces it: ``Record``'s fields in order, as a plain tuple
#: (building a frozen dataclass per line would double the cost of opening a journal).
_Row = tuple[
    int, str, str, int | None, float | None, str | None, int | None, bool, Generation | None
]


def _parse_fast(raw: bytes, line: int) -> _Row | None:
    """The record on a line in ``encode_record``'s layout, or None to use the general path."""
    m = _FAST_LINE.fullmatch(raw)
    if m is None:
        return None
    event, work_id, worker, updated, attempt, crc = m.groups()
    if worker == b"null" and event == b"lease":
        return None
    stamp = float(updated)
    if repr(stamp).encode("ascii") != updated or abs(stamp) > MAX_TIMESTAMP:
        return None  # not the canonical spelling or out of range: the general path decides
    canonical = (
        b'{"attempt":%s,"clock":"unix","event":"%s","updated":%s,"work_id":"%s","worker":%s}'
        % (
            attempt,
            event,
            updated,
            work_id,
            worker,
        )
    )
    if b"%08x" % (zlib.crc32(canonical) & 0xFFFFFFFF) != crc:
        return None
    return (
        line,
        event.decode("ascii"),
        work_id.decode("ascii"),
        None if worker == b"null" else int(worker),
        stamp,
        UNIX,
        int(attempt),
        True,
        None,
    )


#: The fields a record in F314's original (legacy, unchecksummed) format may carry.
_LEGACY_FIELDS = frozenset({"event", "work_id", "worker", "updated", "clock"})


def _crc_problem(doc: dict[str, Any]) -> str | None:
    """Pop ``doc``'s ``crc`` and say what is wrong with it, or None when it is the checksum of
    the rest of ``doc``."""
    crc = doc.pop("crc", None)
    if not isinstance(crc, str) or not _CRC.fullmatch(crc):
        return "crc is not 8 lowercase hexadecimal digits"
    try:
        expected = record_crc(doc)
    except ValueError:
        return "record cannot be put in canonical form"
    if crc != expected:
        return f"checksum mismatch (crc {crc}, computed {expected})"
    return None


def parse_line(raw: bytes, line: int) -> Record | str:
    """The record on one line (without its newline), or the reason it is bad."""
    parsed = _parse_row(raw, line)
    return parsed if isinstance(parsed, str) else Record(*parsed)


def _parse_row(raw: bytes, line: int) -> _Row | str:
    fast = _parse_fast(raw, line)
    if fast is not None:
        return fast
    try:
        doc = _JSON.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):  # ValueError covers over-long integers too
        return "not a JSON line"
    except RecursionError:
        return "nested too deeply"
    if not isinstance(doc, dict):
        return "not a JSON object"
    checksummed = "crc" in doc
    if checksummed:
        if (problem := _crc_problem(doc)) is not None:
            return problem
    elif not doc.keys() <= _LEGACY_FIELDS:
        # F314's original records carry only these fields; anything else without a checksum is
        # damage (a flipped byte in "crc" must not turn a record into an unchecked legacy one).
        return f"record without a checksum has fields {sorted(doc.keys() - _LEGACY_FIELDS)}"
    event = doc.get("event")
    if event not in EVENTS:
        return f"unknown event {event!r}"
    work_id = doc.get("work_id")
    if not isinstance(work_id, str) or not _WORK_ID.fullmatch(work_id):
        return "work_id is not 64 hexadecimal characters"
    worker = doc.get("worker")
    attempt = doc.get("attempt")
    if (problem := _range_problem(worker, attempt)) is not None:
        return problem
    updated = doc.get("updated")
    if updated is not None and _number(updated) is None:
        return f"updated is not a finite number within {MAX_TIMESTAMP:.0f} seconds of 0"
    clock = doc.get("clock")
    if clock is not None and not isinstance(clock, str):
        return "clock is not a string"
    if event == LEASE and (worker is None or updated is None):
        return "lease record without worker or updated"
    gen = doc.get("generation")
    if gen is not None and not valid_generation(gen):
        return "generation is not [epoch, counter] (two whole numbers)"
    generation = None if gen is None else (gen[0], gen[1])
    return (line, event, work_id, worker, updated, clock, attempt, checksummed, generation)


def _parse_batch(raw: bytes, line: int) -> list[_Row] | str:
    """The records of a ``batch`` line, in order, or the reason it is bad. The line is
    checksummed as a whole, and each record in it as on a line of its own."""
    try:
        doc = _JSON.decode(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return "not a JSON line"
    except RecursionError:
        return "nested too deeply"
    if not isinstance(doc, dict) or doc.get("event") != BATCH:
        return "not a batch object"
    if (problem := _crc_problem(doc)) is not None:
        return problem
    records = doc.get("records")
    if not isinstance(records, list) or not records:
        return "batch without a list of records"
    rows: list[_Row] = []
    for k, record in enumerate(records, 1):
        parsed = _parse_row(json.dumps(record, separators=(",", ":")).encode("ascii"), line)
        if isinstance(parsed, str) or not parsed[7]:
            why = parsed if isinstance(parsed, str) else "no crc"
            return f"record {k} of the batch is bad ({why})"
        rows.append(parsed)
    return rows


def _parse_rows(raw: bytes, line: int) -> _Row | list[_Row] | str:
    """The record, or the records of a batch, on one line, or the reason it is bad."""
    return _parse_batch(raw, line) if raw.startswith(_BATCH_START) else _parse_row(raw, line)


# -- the bulk reader --------------------------------------------------------------------------
#
# Opening a journal of 10^5 records line by line costs several microseconds a record in the
# interpreter. ``_scan_bulk`` reads the whole lines of a journal written by this implementation
# in a few passes of C code over the file instead: one regular expression splits every record
# (alone on its line, or in a batch line) into its fields, and each remaining step (canonical
# forms, checksums) maps a builtin over a whole column; a journal replays the columns as they
# are, making numbers only for the leases still active at the end. It accepts only records in
# ``encode_record``'s exact layout (generation optional) and batches of them in
# ``encode_batch``'s; on anything else (a legacy or hand-written line, a bad checksum, a torn
# or bad line that is not the unterminated last one) it declines and the reference reader
# (``_scan_lines``) reads the file, so that what is good, bad, torn or corrupt is decided in
# one place only. A record it accepts is one the reference accepts with the same fields
# (tests/unit/test_journal_bulk.py checks the two against each other on valid, torn and
# hostile files).

#: A whole number below 10**18: within MAX_ATTEMPT and a generation's range.
_WHOLE_TEXT = r"(?:0|[1-9][0-9]{0,17})"
_WHOLE = "(" + _WHOLE_TEXT + ")"
#: A timestamp in the shape ``repr`` gives a float in fixed notation: no leading zero but in
#: "0.", no trailing zero but in ".0", not below 1e-4 unless 0, at most 15 digits before the
#: point and 17 after it. ``_bulk_columns`` then proves it is ``repr``'s spelling (see there).
_STAMP = (
    r"(-?(?:0\.(?:0|0{0,3}[1-9](?:[0-9]{0,12}[1-9])?)|[1-9][0-9]{0,14}\.(?:0|[0-9]{0,16}[1-9])))"
)
_BULK = re.compile(
    r'\{"event":"(lease|done|reclaim)","work_id":"([0-9a-fA-F]{64})",'
    r'"worker":(null|0|[1-9][0-9]{0,8}),"updated":' + _STAMP + ','
    r'"clock":"unix","attempt":' + _WHOLE + r'((?:,"generation":\[' + _WHOLE_TEXT + ","
    + _WHOLE_TEXT + r'\])?),"crc":"([0-9a-f]{8})"\}(\n|,|\],"crc":"([0-9a-f]{8})"\}\n)'
)  # fmt: skip
#: ``_BULK.split`` yields, per record, the text before it and its 9 groups.
_BULK_STRIDE = 10
#: What opens a ``BulkColumns.generations`` entry (then "epoch,counter]").
_GENERATION_OPENING = ',"generation":['
_BULK_BATCH_START = '{"event":"batch","records":['
#: A batch line's records each end in "," but the last, which ends the line; a line of its
#: own ends in a newline. One character per record: "\n", "[" + ","* + "]" per batch.
_BULK_LINES = re.compile(r"(?:\n|\[,*\])*+")
_BULK_EVENTS = {LEASE: LEASE, DONE: DONE, RECLAIM: RECLAIM}


class BulkColumns(NamedTuple):
    """One chunk of records the bulk reader took, column by column, each value as its line
    spells it (the worker ``"null"`` where a record has none; the generation with the comma
    before it, ``,"generation":[epoch,counter]``, as in the line and in the canonical form, or
    "" where it has none). Every record in it is checksummed, tagged ``"unix"`` and carries an
    attempt, and its timestamp spells a finite float within ``MAX_TIMESTAMP`` of 0."""

    events: list[str]
    work_ids: list[str]
    workers: list[str]
    stamps: list[str]
    attempts: list[str]
    generations: list[str]


def bulk_generation(text: str) -> Generation | None:
    """The generation a ``BulkColumns.generations`` entry spells."""
    if not text:
        return None
    epoch, counter = text[len(_GENERATION_OPENING) : -1].split(",")
    return int(epoch), int(counter)


def _scan_bulk(
    data: bytes, replay: Callable[[BulkColumns], None] | None = None
) -> tuple[int, int, list[_Row]] | None:
    """The good records of the whole lines at the start of ``data`` that the bulk reader takes,
    with where they end and how many lines they are; None when it takes none. It reads chunks of
    about ``_BULK_CHUNK`` bytes cut at line ends (which bounds the memory it needs) and stops
    before the first chunk holding a line it declines: the reference reads on from there. With
    ``replay``, each chunk's records go to it as columns, in file order, instead of into rows
    (the list returned is then empty): a journal applies them without a row per record."""
    rows: list[_Row] = []
    start = number = 0
    while True:
        end = data.rfind(b"\n", start, start + _BULK_CHUNK) + 1
        if end == 0:  # a line longer than a chunk: take up to its end
            end = data.find(b"\n", start) + 1
        if end <= start:
            break
        chunk = _bulk_columns(data[start:end])
        if chunk is None:
            break
        columns, ends = chunk
        if replay is None:
            rows += _bulk_rows(columns, ends, number)
        else:
            replay(columns)
        # a line ends after each record but those followed by "," (inside a batch)
        start, number = end, number + len(ends) - ends.count(",")
    return (start, number, rows) if start else None


#: How many bytes of whole lines ``_scan_bulk`` reads at once (about 1,500 records): small
#: enough that a chunk's strings stay in the processor's cache from the split to the checksums
#: (8 MiB chunks made opening a 100,000-record journal a third slower).
_BULK_CHUNK = 1 << 18


def _bulk_columns(data: bytes) -> tuple[BulkColumns, list[str]] | None:
    """The records of ``data`` (whole lines) and each one's end ("\\n", "," or the end of its
    batch line), when every line is a record or batch in the layout this implementation
    writes; None (read it line by line) otherwise. See the comment above."""
    # latin-1 maps every byte to one character: the pattern sees the bytes as they are.
    flat = _BULK.split(data.decode("latin-1"))
    if flat.pop():
        return None  # text after the last record: a line not in this layout
    between = flat[0::_BULK_STRIDE]
    n = len(between)
    events, ids, workers, stamps, attempts = (flat[k::_BULK_STRIDE] for k in range(1, 6))
    generations, crcs, ends, batch_crcs = (flat[k::_BULK_STRIDE] for k in range(6, 10))
    batched = between.count("") != n
    if not batched and ends.count("\n") != n:
        return None  # a record ending in "," or "]" outside a batch
    if batched and not _batch_structure(between, ends):
        return None
    if not _spelled_as_repr(stamps):
        return None  # the canonical form spells the value as ``repr`` does: the reference decides
    if "null" in workers and any(
        e == LEASE and w == "null" for e, w in zip(events, workers, strict=True)
    ):
        return None  # a lease without an owner: the reference says why it is bad
    records = BulkColumns(events, ids, workers, stamps, attempts, generations)
    if not _checksums(records, crcs, (between, ends, batch_crcs) if batched else None):
        return None
    return records, ends


def _spelled_as_repr(stamps: list[str]) -> bool:
    """Whether every timestamp of ``stamps`` (each in ``_STAMP``'s shape) is spelled as ``repr``
    spells its value, the spelling the canonical form holds. A decimal of at most 15 significant
    digits (``DBL_DIG``) is: no two such decimals are the same double, so the shortest spelling
    that reads back as its value has exactly its digits, and the shape is ``repr``'s layout of
    them. A longer one is compared with ``repr`` itself, all at once: a list's ``repr``
    separates its items by ", ", which no timestamp holds, so the two texts are equal exactly
    when every timestamp is."""
    if max(map(len, stamps)) <= 16:  # at most 15 digits besides the point
        return True
    return repr(list(map(float, stamps))) == "[" + ", ".join(stamps) + "]"


#: The ``array`` type code of a 4-byte unsigned int, a CRC32 ("I" wherever Python runs today).
_CRC_ITEM = next(code for code in "IL" if array(code).itemsize == 4)


def _checksums_match(computed: Iterable[int], crcs: list[str]) -> bool:
    """Whether the CRCs ``computed`` are those written, ``crcs`` (8 lowercase hex digits each):
    4 bytes each, most significant first, against the written ones read in one go."""
    words = array(_CRC_ITEM, computed)
    if sys.byteorder == "little":
        words.byteswap()
    return words.tobytes() == bytes.fromhex("".join(crcs))


def _bulk_rows(columns: BulkColumns, ends: list[str], before: int) -> list[_Row]:
    """The rows of a chunk's ``columns`` (records whose ends are ``ends``), after ``before``
    lines."""
    events, ids, workers, stamps, attempts, gens = columns
    n = len(ids)
    owners = {w: None if w == "null" else int(w) for w in set(workers)}
    counts = {a: int(a) for a in set(attempts)}
    lines: list[int] | range
    if ends.count("\n") != n:  # batch lines
        line_ends = list(accumulate(e[0] != "," for e in ends))
        lines = [before + 1 + k - (e[0] != ",") for k, e in zip(line_ends, ends, strict=True)]
    else:
        lines = range(before + 1, before + n + 1)
    return list(
        zip(
            lines,
            map(_BULK_EVENTS.__getitem__, events),
            ids,
            map(owners.__getitem__, workers),
            map(float, stamps),
            repeat(UNIX, n),
            map(counts.__getitem__, attempts),
            repeat(True, n),
            map(bulk_generation, gens),
            strict=True,
        )
    )


def _checksums(
    records: BulkColumns,
    crcs: list[str],
    batches: tuple[list[str], list[str], list[str | None]] | None = None,
) -> bool:
    """Whether every record's ``crc`` is that of its canonical form (``record_crc``: keys
    sorted, its timestamp as the line spells it) and, with ``batches`` (each record's text
    before it and end, and each batch line's own ``crc``, None but after a batch's last
    record), every batch line's is that of the batch's (``{"event":"batch","records":[``, its
    records sorted, each with its ``crc``, then ``]}``).

    Every canonical form is built in one text, column by column. A record's form opens with
    ``{"attempt":A,"clock":"unix",`` (its ``crc`` follows there in a batch's form) and the rest,
    its *tail* from ``"event"`` on, is the same in both forms: the tails are cut out of the
    batches' forms at the marks ("\0", which no field holds) around them, and each record's
    CRC is its tail's continued from the CRC of its opening, one per attempt's spelling
    (``zlib.crc32(tail, crc32(opening))`` is the CRC of the two joined). So a record's fields
    are joined once, not once for itself and once for its batch."""
    events, ids, workers, stamps, attempts, generations = records
    n = len(ids)
    pieces: list[str | list[str]] = []
    if batches is not None:
        between, ends, batch_crcs = batches
        pieces += [between, '{"attempt":', attempts, ',"clock":"unix","crc":"', crcs, '",']
    # the generation's text is its canonical form's ("" for none), with the "," before it
    pieces += [
        '\0"event":"',
        events,
        '"',
        generations,
        ',"updated":',
        stamps,
        ',"work_id":"',
        ids,
        '","worker":',
        workers,
        "}\0",
    ]
    if batches is not None:
        pieces.append(list(map(_CANONICAL_ENDS.get, ends, repeat("]}\n"))))
    stride = len(pieces)
    parts: list[str] = [""] * (stride * n)
    for k, piece in enumerate(pieces):
        parts[k::stride] = [piece] * n if isinstance(piece, str) else piece
    data = "".join(parts).encode("ascii")
    tails = data.split(b"\0")[1::2]
    openings = {a: zlib.crc32(b'{"attempt":%s,"clock":"unix",' % a.encode()) for a in set(attempts)}
    computed = map(zlib.crc32, tails, map(openings.__getitem__, attempts))
    if not _checksums_match(computed, crcs):
        return False
    if batches is None:
        return True
    # one line per batch, and one per record on a line of its own, which has no batch checksum
    lines = data.replace(b"\0", b"").split(b"\n")
    lines.pop()
    batch_lines = filter(methodcaller("startswith", _BATCH_CANONICAL_START), lines)
    return _checksums_match(map(zlib.crc32, batch_lines), list(filter(None, batch_crcs)))


#: The mark of a record's surroundings in a line's shape (``_BULK_LINES``): what precedes it
#: (a batch's opening) and what ends it (an end not listed here closes a batch).
_OPENS = {"": "", _BULK_BATCH_START: "["}
_ENDS = {"\n": "\n", ",": ","}
#: What follows a record in the canonical forms ``_checksums`` joins: "," within a batch, a
#: newline after a record on a line of its own; any other end closes a batch ("]}" and a
#: newline).
_CANONICAL_ENDS = {",": ",", "\n": "\n"}
#: How a batch's canonical form opens (the very text that opens its line).
_BATCH_CANONICAL_START = _BULK_BATCH_START.encode("ascii")


def _batch_structure(between: list[str], ends: list[str]) -> bool:
    """Whether the records' surroundings make whole lines: each batch's opening text before
    its first record, "," after each record but its batch's last, whose end closes the line."""
    if not _OPENS.keys() >= set(between):
        return False
    shape: list[str] = [""] * (2 * len(between))
    shape[0::2] = list(map(_OPENS.__getitem__, between))
    shape[1::2] = list(map(_ENDS.get, ends, repeat("]")))
    return _BULK_LINES.fullmatch("".join(shape)) is not None


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def scan_bytes(data: bytes) -> Scan:
    """Split a journal's bytes into good records and bad lines (see the module docstring)."""
    scan, rows = _scan(data)
    scan.records = [Record(*row) for row in rows]
    return scan


def _scan(
    data: bytes, replay: Callable[[BulkColumns], None] | None = None
) -> tuple[Scan, list[_Row]]:
    """``scan_bytes`` with the good records as rows (``scan.records`` is left empty).

    The whole lines that ``_scan_bulk`` reads are taken from it, the rest (an unterminated
    last line; every line when the bulk reader declines) line by line, exactly as before.
    With ``replay``, the bulk reader's records go to it as columns, chunk by chunk, and the
    rows returned are only the reference reader's, which follow them in the file."""
    bulk = _scan_bulk(data, replay)
    if bulk is None:
        return _scan_lines(data)
    offset, number, rows = bulk
    return _scan_lines(data, offset, number, rows)


def _scan_lines(
    data: bytes, offset: int = 0, number: int = 0, rows: list[_Row] | None = None
) -> tuple[Scan, list[_Row]]:
    """The reference reader: ``data`` line by line from ``offset`` (the start of line
    ``number + 1``), after the good ``rows`` of the lines before it."""
    scan = Scan(size=len(data))
    rows = [] if rows is None else rows
    while offset < len(data):
        number += 1
        end = data.find(b"\n", offset)
        terminated = end >= 0
        stop = end + 1 if terminated else len(data)
        raw = data[offset:end] if terminated else data[offset:]
        parsed = _parse_rows(raw, number)
        zeros = 0
        if isinstance(parsed, str) and not terminated and raw.endswith(b"\0"):
            # a last record whose newline a crash left as zero bytes (the file grew, that sector
            # did not reach the disk): the record is good, the zeros a torn tail
            kept = _parse_rows(raw.rstrip(b"\0"), number)
            if not isinstance(kept, str):
                parsed, zeros = kept, len(raw) - len(raw.rstrip(b"\0"))
        if not isinstance(parsed, str):
            if scan.bad:
                scan.corrupt = True
            if isinstance(parsed, list):
                rows.extend(parsed)
            else:
                rows.append(parsed)
            scan.unterminated = not terminated
            if zeros:
                cut = stop - zeros
                scan.bad.append(BadLine(number, cut, "zero bytes after the record", data[cut:stop]))
        else:
            scan.bad.append(BadLine(number, offset, parsed, data[offset:stop]))
        offset = stop
    scan.good_end = scan.bad[0].offset if scan.bad else len(data)
    if scan.bad and not scan.corrupt:
        # the cut starts at a line boundary, or after a last record followed by zero bytes
        scan.unterminated = data[scan.good_end - 1 : scan.good_end] not in (b"", b"\n")
    return scan, rows


def could_be_torn_first_write(data: bytes) -> bool:
    """Whether ``data``, a file holding no good record, could be what crashes left of a journal's
    first write (docs/journal-format.md, "Not a journal"): no complete line and, zero bytes aside
    (a crash can leave the part of a file that grew as zeros), nothing but record beginnings,
    each a prefix of ``RECORD_START`` or starting with it and shorter than a record (one for each
    crash that cut an append short before a reopen cut the last). Anything else is not a
    journal, and no writer may cut it."""
    # A whole sector of zeros is a sector of the write that never reached the disk: then the
    # write's last sector, its newline with it, may have, so the one line may be complete.
    lost = any(
        not data[i : i + SECTOR].strip(b"\0") for i in range(0, len(data) - SECTOR + 1, SECTOR)
    )
    body = data[:-1] if lost and data.endswith(b"\n") else data
    if b"\n" in body:
        return False
    rest = body.replace(b"\0", b"")
    if not rest:
        return True
    head, brace, tail = rest.partition(b"{")
    if head and (data[:SECTOR].strip(b"\0") or not all(32 <= c < 127 for c in head)):
        # Text before the first "{" is the rest of a record whose first sector never reached
        # the disk: only where the file starts with a whole zero sector, and only record text.
        return False
    pieces = [b"{" + piece for piece in tail.split(b"{")] if brace else []
    return all(
        len(piece) < MAX_RECORD_BYTES
        and (RECORD_START.startswith(piece) or piece.startswith(RECORD_START))
        for piece in pieces
    )


def scan_file(path: str | os.PathLike[str]) -> Scan:
    """Scan a journal file without opening it as a journal (for inspection of corrupt files)."""
    return scan_bytes(read_nofollow(Path(path)))
