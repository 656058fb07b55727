"""The MPI wire protocol between the master and its workers: four tags, versioned JSON payloads.

Every message is one JSON object encoded as UTF-8 bytes and sent with MPI's buffer calls
(``Send``/``Probe``/``Recv`` into a ``bytearray``), so nothing a worker sends is ever unpickled.
The MPI tag says what the message is, and the payload repeats it::

    tag     direction         payload (protocol version 1)
    WORK    master -> worker  {"v": 1, "type": "work", "work_id": W, "state_task_id": T, "payload": {...},
                               "generation": [E, C]}   (generation only under generation fencing)
    RESULT  worker -> master  {"v": 1, "type": "result", "work_id": W, "state_task_id": T, "ok": B,
                               "cpu_s": S, "output": {...}, "generation": [E, C]}
                              (old-protocol workers omit state_task_id and generation)
    STOP    master -> worker  {"v": 1, "type": "stop"}      the sentinel: finish, answer BYE, exit
    BYE     worker -> master  {"v": 1, "type": "bye", "results": N}   a worker's last message

Frames (issue 19): WORK and RESULT messages travel in frames, several to one MPI message. A
frame is one or more messages of the frame's tag, each one line exactly as ``encode`` writes it
(``encode`` never writes a newline), joined by ``"\n"``: JSON Lines, as the journal. A frame of
one message is that message's bytes, unchanged. ``frames`` packs encoded messages into frames
of at most ``MAX_FRAME_MESSAGES`` messages and ``MAX_FRAME_BYTES`` bytes; ``decode_frame``
takes one apart (``split_frame``: blank lines carry nothing and are skipped) and decodes each
line on its own: a malformed line costs only itself, never its neighbours. A message sent
before frames may hold newlines between its JSON tokens; when such a message's lines do not
decode one by one, it is read whole, as before. STOP and BYE are never framed. The frame changes
how many MPI messages carry the protocol's messages, not what they say, nor their order between
two ranks: the spec and the model, which know messages and not MPI calls, are unchanged.

``generation`` is the dispatch generation ``[epoch, counter]`` of the WORK (issue 12): with the
rank it makes the owner token ``(rank, epoch, counter)`` of both leases, which never repeats for
a rank, across master restarts included (the epoch is the coordinator's). A worker echoes it in
its RESULT; a RESULT without one (old protocol) is settled by the master's stored view alone.

``decode`` validates everything (size, UTF-8, JSON, version, type, field names and types, the
ID formats, the ranges below) and returns a typed frozen message, or raises ``ProtocolError``
naming what is wrong.

Ranges (issue 17): a worker is not trusted, so every number a message carries is finite and
bounded, and the master never computes with anything larger::

    field                      accepted
    cpu_s (RESULT)             a finite number, 0 <= cpu_s <= MAX_CPU_S (1e12 s)
    generation parts           whole numbers, 0 <= part <= MAX_GENERATION_PART (2**63 - 1)
    results (BYE)              a whole number, 0 <= results <= MAX_COUNT (2**63 - 1)
    status (STOP)              a whole number, 0 <= status <= 255 (the exit status of the job)
    numbers in payload/output  finite (a literal that overflows to infinity is refused), integers
                               under Python's 4,300-digit limit; the master only stores them
    state_task_id              1 to 256 printable ASCII characters (no space); empty is refused
    work_id                    64 lowercase hex characters

A RESULT's ``cpu_s`` is added to the state task's cost (``coordinator.Stats``): with it at most
``MAX_CPU_S`` per result, no statistic can reach infinity. Ranks and attempts are not on the
wire (the rank is MPI's message source; attempts are counted by the receiver).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from json.encoder import encode_basestring_ascii
from typing import Any, Final, NewType

import msgspec
import orjson

from leasefence.impl.errors import ProtocolError
from leasefence.impl.frozen import FACTORY, fast_init
from leasefence.impl.generation import MAX_GENERATION_PART as MAX_GENERATION_PART
from leasefence.impl.generation import Generation as Generation
from leasefence.impl.generation import plain_generation
from leasefence.impl.generation import valid_generation as valid_generation
from leasefence.impl.generation import whole as _whole
from leasefence.impl.strictjson import strict_hooks
from leasefence.impl.wiretypes import ResultLayout, WorkLayout

#: The payload version this code speaks; a message with another ``v`` is refused.
PROTOCOL_VERSION: Final = 1

#: The largest message either side accepts (bytes of JSON).
MAX_MESSAGE_BYTES: Final = 64 * 1024

#: An exact work item: SHA-256 hex of its canonical payload (64 lowercase hex characters).
WorkId = NewType("WorkId", str)
#: An abstract state task (input, focus, target, action, schedule, continuation), hashed.
StateTaskId = NewType("StateTaskId", str)
#: An MPI rank; a worker rank is the owner fence of every lease it holds.
Rank = NewType("Rank", int)
#: The most messages one frame holds (``frames``; ``split_frame`` refuses a frame of more).
MAX_FRAME_MESSAGES: Final = 256
#: The largest frame either side accepts (bytes; a frame of one message may be as large as
#: ``MAX_MESSAGE_BYTES``, several make at most this).
MAX_FRAME_BYTES: Final = 16 * MAX_MESSAGE_BYTES
#: The largest ``cpu_s`` a RESULT may report (seconds; about 31,700 years of CPU for one item).
MAX_CPU_S: Final = 1e12
#: The largest count a message may carry (BYE ``results``).
MAX_COUNT: Final = 2**63 - 1
#: The largest exit status a STOP may carry.
MAX_STATUS: Final = 255

#: The IDs as patterns: what ``valid_work_id`` and ``valid_task_id`` take, checked there in a
#: few C calls (the tests hold each check to its pattern). State task IDs come from
#: ``coordinator.state_task_id`` (hex today); any short printable ASCII token is accepted so
#: that the wire does not second-guess the coordinator's format.
_WORK_ID = re.compile(r"[0-9a-f]{64}")
_TASK_ID = re.compile(r"[\x21-\x7e]{1,256}")


class Tag(IntEnum):
    """The MPI tag of each message type (also its ``"type"`` field, lower-cased)."""

    WORK = 1
    RESULT = 2
    STOP = 3
    BYE = 4


@dataclass(frozen=True, init=False)
class Work:
    """WORK: run one exact-work payload. ``state_task_id`` is what the master stored."""

    work_id: WorkId
    state_task_id: StateTaskId
    payload: Mapping[str, Any] = field(default_factory=dict)
    generation: Generation | None = None
    #: The message's text after its generation field (``work_text``), when the sender already
    #: has it (the master's catalogue: ``WorkItem.work_text``): ``encode`` joins it to the
    #: generation instead of encoding the payload and the IDs again. Not a field of the
    #: message: never compared, never sent on its own, None on every decoded WORK.
    work_text: str | None = field(default=None, compare=False, repr=False)

    def __init__(
        self,
        work_id: WorkId,
        state_task_id: StateTaskId,
        payload: Mapping[str, Any] = FACTORY,
        generation: Generation | None = None,
        work_text: str | None = None,
    ) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.work_id = work_id  # type: ignore[misc]
        self.state_task_id = state_task_id  # type: ignore[misc]
        self.payload = {} if payload is FACTORY else payload  # type: ignore[misc]
        self.generation = generation  # type: ignore[misc]
        self.work_text = work_text  # type: ignore[misc]


fast_init(Work)


@dataclass(frozen=True, init=False)
class Result:
    """RESULT: the outcome of one WORK. ``state_task_id`` is the worker's report (None: old
    protocol); the master never lets it override its own stored ID (L7). ``generation`` echoes
    the WORK's (None: old protocol, or a WORK sent without one)."""

    work_id: WorkId
    state_task_id: StateTaskId | None
    ok: bool
    cpu_s: float = 0.0
    output: Mapping[str, Any] = field(default_factory=dict)
    generation: Generation | None = None

    def __init__(
        self,
        work_id: WorkId,
        state_task_id: StateTaskId | None,
        ok: bool,
        cpu_s: float = 0.0,
        output: Mapping[str, Any] = FACTORY,
        generation: Generation | None = None,
    ) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.work_id = work_id  # type: ignore[misc]
        self.state_task_id = state_task_id  # type: ignore[misc]
        self.ok = ok  # type: ignore[misc]
        self.cpu_s = cpu_s  # type: ignore[misc]
        self.output = {} if output is FACTORY else output  # type: ignore[misc]
        self.generation = generation  # type: ignore[misc]


fast_init(Result)


@dataclass(frozen=True)
class Stop:
    """STOP: the sentinel. The worker answers BYE and leaves its loop, and its process exits
    with ``status`` (0 unless the master stops the job on an error; sent only when not 0)."""

    status: int = 0


@dataclass(frozen=True)
class Bye:
    """BYE: a worker's last message, with the number of RESULT messages it sent."""

    results: int


Message = Work | Result | Stop | Bye

_TYPE_OF: Final[dict[type[Any], Tag]] = {
    Work: Tag.WORK,
    Result: Tag.RESULT,
    Stop: Tag.STOP,
    Bye: Tag.BYE,
}

#: What each side accepts: the master takes RESULT and BYE, a worker takes WORK and STOP.
FROM_WORKER: Final = frozenset({Tag.RESULT, Tag.BYE})
FROM_MASTER: Final = frozenset({Tag.WORK, Tag.STOP})


#: The C calls of the ID checks, looked up once (compiled, a method call looks up its name).
_FROMHEX: Final = bytes.fromhex
_HEX: Final = bytes.hex
_ISASCII: Final = str.isascii
_ISPRINTABLE: Final = str.isprintable
_ASCII: Final = str.encode
_ISALNUM: Final = bytes.isalnum
#: What a work ID is made of.
_HEX_DIGITS: Final = b"0123456789abcdef"


def valid_work_id(value: object) -> bool:
    """Whether ``value`` is a work ID: 64 lowercase hexadecimal characters (``_WORK_ID``, here
    in C calls: what ``bytes.hex`` writes of what they read as; 170 ns against the pattern's
    230; tests/unit/test_fast_paths.py holds the two equal on every ASCII character)."""
    if not isinstance(value, str) or len(value) != 64:
        return False
    try:  # (``fromhex`` skips whitespace and reads capitals: then the text written differs)
        return _HEX(_FROMHEX(value)) == value
    except ValueError:  # not hexadecimal
        return False


def valid_task_id(value: object) -> bool:
    """Whether ``value`` is a state task ID: 1 to 256 printable ASCII characters but a space
    (``_TASK_ID``, here in C calls, as ``valid_work_id``). Letters and digits alone (the
    coordinator's IDs are hex) are told by a table lookup a byte (``bytes.isalnum``), any
    other ASCII text by ``str.isprintable``, which looks each character up in Unicode's
    tables (issue 19: 1,700 instructions an ID of 64 characters, against 500)."""
    if not isinstance(value, str) or not 0 < len(value) <= 256 or not _ISASCII(value):
        return False
    return _ISALNUM(_ASCII(value)) or (_ISPRINTABLE(value) and value.find(" ") < 0)


def claimed_work_id(data: bytes | bytearray | memoryview) -> WorkId | None:
    """The work ID a message that ``decode`` refused claims to be about, if one can be read
    from it (a JSON object under the size limit with a valid ``work_id``); else None. Used only
    to charge an invalid answer to the right dispatch, never to accept anything."""
    if len(data) > MAX_MESSAGE_BYTES:
        return None
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    work_id = doc.get("work_id") if isinstance(doc, dict) else None
    return WorkId(work_id) if isinstance(work_id, str) and valid_work_id(work_id) else None


def tag_of(msg: Message) -> Tag:
    """The MPI tag that carries ``msg``."""
    return _TYPE_OF[type(msg)]


def _body(msg: Message) -> dict[str, Any]:
    if isinstance(msg, Work):
        work: dict[str, Any] = {
            "work_id": msg.work_id,
            "state_task_id": msg.state_task_id,
            "payload": dict(msg.payload),
        }
        if msg.generation is not None:
            work["generation"] = list(msg.generation)
        return work
    if isinstance(msg, Result):
        body: dict[str, Any] = {
            "work_id": msg.work_id,
            "ok": msg.ok,
            "cpu_s": msg.cpu_s,
            "output": dict(msg.output),
        }
        if msg.state_task_id is not None:
            body["state_task_id"] = msg.state_task_id
        if msg.generation is not None:
            body["generation"] = list(msg.generation)
        return body
    if isinstance(msg, Bye):
        return {"results": msg.results}
    return {"status": msg.status} if msg.status else {}


def encode(msg: Message) -> tuple[Tag, bytes]:
    """``msg`` as (MPI tag, JSON bytes); ``ProtocolError`` if it is over ``MAX_MESSAGE_BYTES``
    or holds something JSON cannot carry exactly (NaN, infinity, a non-string key)."""
    tag = tag_of(msg)
    if tag is Tag.WORK:
        fast = _work_bytes(msg)
    else:
        fast = _result_bytes(msg) if tag is Tag.RESULT else None
    if fast is not None:
        data = fast
    else:
        doc = {"v": PROTOCOL_VERSION, "type": tag.name.lower(), **_body(msg)}
        try:
            data = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()
        except (TypeError, ValueError) as exc:
            raise ProtocolError(f"cannot encode {tag.name} message: {exc}") from None
    if len(data) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            f"{tag.name} message of {len(data)} bytes exceeds the limit of {MAX_MESSAGE_BYTES}"
        )
    return tag, data


#: The tags whose messages travel in frames.
FRAMED: Final = frozenset({Tag.WORK, Tag.RESULT})
#: The byte that separates a frame's messages, as an int: ``NEWLINE in data`` is one
#: ``memchr``, where ``b"\n" in data`` runs the general search (31 against 177 ns for a
#: message, on every message framed, issue 19).
NEWLINE: Final = 10


def frames(parts: Iterable[bytes], limit: int = MAX_FRAME_BYTES) -> Iterator[bytes]:
    """Encoded messages of one framed tag (``encode``'s bytes, in order) packed into as few
    frames as ``MAX_FRAME_MESSAGES`` and ``limit`` bytes (at most ``MAX_FRAME_BYTES``) allow,
    in order; a message larger than ``limit`` goes alone. A part that holds a newline (never
    ``encode``'s: only a faulty worker's garbage) goes alone, as it is."""
    limit = min(limit, MAX_FRAME_BYTES)
    batch: list[bytes] = []
    size = 0
    for part in parts:
        if NEWLINE in part:
            if batch:
                yield b"\n".join(batch)
                batch, size = [], 0
            yield part
            continue
        if batch and (len(batch) == MAX_FRAME_MESSAGES or size + 1 + len(part) > limit):
            yield b"\n".join(batch)
            batch, size = [], 0
        size += len(part) + (1 if batch else 0)
        batch.append(part)
    if batch:
        yield b"\n".join(batch)


def encode_frames(msgs: Sequence[Message], limit: int = MAX_FRAME_BYTES) -> tuple[Tag, list[bytes]]:
    """Messages of one framed tag, in order, as (their tag, the frames of at most ``limit``
    bytes that carry them, ``frames``'s); ``ProtocolError`` as ``encode``'s, ``ValueError`` if
    they are not all of one framed tag."""
    tag = tag_of(msgs[0]) if msgs else Tag.WORK
    parts = []
    for msg in msgs:
        kind, data = encode(msg)
        if kind is not tag or kind not in FRAMED:
            raise ValueError(f"a frame carries WORK or RESULT messages of one tag, not {kind.name}")
        parts.append(data)
    return tag, list(frames(parts, limit))


def split_frame(tag: int, data: bytes) -> list[bytes]:
    """The messages of the frame ``data`` carried by MPI tag ``tag``, each still to be decoded
    (``decode``); a message of a tag that is not framed (STOP, BYE, an unknown tag) is returned
    whole. Blank lines (empty or whitespace only, as a trailing newline leaves) carry no
    message and are left out; a frame of nothing else is returned whole (``decode`` names what
    is wrong with it). ``ProtocolError`` for a frame over ``MAX_FRAME_BYTES`` or of more than
    ``MAX_FRAME_MESSAGES`` messages: nothing of it is read."""
    if len(data) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame of {len(data)} bytes exceeds the limit of {MAX_FRAME_BYTES}")
    if NEWLINE not in data or tag not in FRAMED:
        return [data]
    lines = [line for line in data.split(b"\n") if not line.isspace() and line]
    if len(lines) > MAX_FRAME_MESSAGES:
        raise ProtocolError(
            f"frame of {len(lines)} messages exceeds the limit of {MAX_FRAME_MESSAGES}"
        )
    return lines or [data]


#: One message of a frame as ``decode_frame`` read it: its bytes (None when the whole frame was
#: refused) and the message, or the ``ProtocolError`` that says why it was refused.
Decoded = tuple[bytes | None, Message | ProtocolError]


def decode_frame(tag: int, data: bytes, accept: frozenset[Tag]) -> list[Decoded]:
    """Every message of the frame ``data`` carried by MPI tag ``tag``, in order, each decoded on
    its own (``split_frame``, then ``decode``): a malformed line costs only itself. A frame
    refused whole (``split_frame``'s error) is one entry ``(None, error)``. A message that is
    not one line (JSON may hold newlines between its tokens, and the protocol before frames
    read such a message) is read whole: when a line of a multi-line ``data`` fails to decode
    and ``data`` decodes as one message, that message is the frame's only one.

    A frame every line of which a fast library reads as its own writing (``_fast_frame``:
    the frames ``encode_frames`` writes) is read without ``split_frame``'s and ``decode``'s
    checks a line; any other frame is read line by line (``_decode_lines``), which alone
    decides what is refused.
    tests/unit/test_fast_paths.py holds the two equal."""
    fast = _fast_frame(tag, data, accept)
    return fast if fast is not None else _decode_lines(tag, data, accept)


def _decode_lines(tag: int, data: bytes, accept: frozenset[Tag]) -> list[Decoded]:
    """``decode_frame`` line by line: ``split_frame``, then ``decode`` each line."""
    try:
        lines = split_frame(tag, data)
    except ProtocolError as exc:
        return [(None, exc)]
    out: list[Decoded] = []
    failed = False
    for line in lines:
        try:
            out.append((line, decode(tag, line, accept)))
        except ProtocolError as exc:
            out.append((line, exc))
            failed = True
    if failed and len(lines) > 1:
        try:
            return [(data, decode(tag, data, accept))]
        except ProtocolError:
            pass
    return out


def frame_messages(
    tag: int, data: bytes, accept: frozenset[Tag]
) -> Sequence[Message | ProtocolError]:
    """The messages of a frame, each a message or the ``ProtocolError`` that refused it, in
    order: ``read_frame``'s when it reads the frame, else ``decode_frame``'s without their
    bytes. What a worker reads of a frame from the master (``transport.worker_execute``)."""
    valid = read_frame(tag, data, accept)
    if valid is not None:
        return valid
    return [msg for _, msg in decode_frame(tag, data, accept)]


def _framed_kind(tag: int, data: bytes, accept: frozenset[Tag]) -> Tag | None:
    """The framed tag (WORK or RESULT) that ``tag`` is, when this side takes it and ``data`` is
    at most ``MAX_MESSAGE_BYTES`` (so no line of it is over the limit either); else None."""
    kind = _TAGS.get(tag) if type(tag) is int or type(tag) is Tag else None
    if kind is None or kind not in FRAMED or kind not in accept or len(data) > MAX_MESSAGE_BYTES:
        return None
    return kind


def read_frame(tag: int, data: bytes, accept: frozenset[Tag]) -> list[Message] | None:
    """The messages of a frame carried by MPI tag ``tag``, all valid, when it is written as the
    loops write it (``_typed_messages``: read and checked in one call): what ``decode_frame``
    reads of it, without each message's bytes, which only a refused message needs (to name the
    work it claims). None for any other frame: ``decode_frame`` then reads it. Both loops read
    every frame here first. tests/unit/test_fast_paths.py holds it to ``decode_frame``."""
    kind = _framed_kind(tag, data, accept)
    return None if kind is None else _typed_messages(kind, data)


def _fast_frame(tag: int, data: bytes, accept: frozenset[Tag]) -> list[Decoded] | None:
    """The messages of a frame read by the fast libraries, with the checks of ``_message``:
    the whole frame in one call where it is written as the loops write it (``_typed_frame``),
    else each line by ``orjson`` where it is that library's sorted writing (``_canonical``: a
    message of the protocol before generations or state task IDs were sent, which the typed
    layouts leave out); what ``_decode_lines`` reads of it, without ``split_frame``'s and
    ``decode``'s checks a line (issue 19: a message's reading was a sixth of the master's time
    a task, then more than a third). None for any other frame (``_decode_lines`` decides, and
    names what is wrong): one over ``MAX_MESSAGE_BYTES`` (so no line of it is over the limit
    either), a tag not framed or not taken here, a blank line, a line neither library reads as
    its own writing or a check refuses, more than ``MAX_FRAME_MESSAGES`` messages."""
    kind = _framed_kind(tag, data, accept)
    if kind is None:
        return None
    typed = _typed_frame(kind, data)
    if typed is not None:
        return typed
    out: list[Decoded] = []
    for line in data.split(b"\n"):
        doc = _canonical(line)
        if doc is None:
            return None
        try:
            msg = _message(kind, doc)
        except ProtocolError:
            return None
        out.append((line, msg))
    return out if len(out) <= MAX_FRAME_MESSAGES else None


#: ``msgspec``'s readers of a frame of RESULTs and of WORKs in the layouts of ``wiretypes``
#: (``decode_lines``: JSON values apart by whitespace, each type-checked as it is read), and its
#: writer of values as lines (``encode_lines``: each value's text and a newline; a layout's
#: fields in its order, an object's keys in the order read: sorting them cost a fifth of the
#: writing). Built once.
_READ_RESULTS: Final[Callable[[bytes], list[Any]]] = msgspec.json.Decoder(ResultLayout).decode_lines
_READ_WORKS: Final[Callable[[bytes], list[Any]]] = msgspec.json.Decoder(WorkLayout).decode_lines
_WRITE_LINES: Final[Callable[[list[Any]], bytes]] = msgspec.json.Encoder().encode_lines
#: The deepest nesting the typed reading takes, the message's own object included (as
#: ``orjson``'s writer, ``_canonical``): far inside the strict decoder's limit from where the
#: loops call it, which ``msgspec``'s own limit is not (they differ by the frames above each: a
#: few levels near 1,000).
_MAX_DEPTH: Final = 255
#: A layout's fields as a tuple, in its order (``ResultLayout``: cpu_s, generation, ok,
#: output, state_task_id, type, v, work_id; ``WorkLayout``: generation, payload, state_task_id,
#: type, v, work_id).
_FIELDS_OF: Final[Callable[[Any], tuple[Any, ...]]] = msgspec.structs.astuple
#: How many levels a message's output or payload, itself the message's second level, may hold
#: below it.
_BODY_ROOM: Final = _MAX_DEPTH - 2


def _nests_within(value: Any, room: int) -> bool:
    """Whether no object or array in ``value`` (an object or an array as ``msgspec`` reads them:
    a ``dict`` or a ``list``) lies more than ``room`` levels below it. Issue 19: counting a
    frame's brackets (two passes over its bytes) cost 2,700 of the master's 47,000 instructions
    a task; an output or payload of plain values is one pass over them."""
    for child in value.values() if type(value) is dict else value:
        if (type(child) is dict or type(child) is list) and (
            room == 0 or not _nests_within(child, room - 1)
        ):
            return False
    return True


def _typed_messages(kind: Tag, data: bytes) -> list[Message] | None:
    """The messages of a frame of WORKs or RESULTs (``kind``) every line of which is
    ``msgspec``'s writing of one message in its layout (``wiretypes``) that passes every
    check of ``_message``; None for any other frame (the other readers decide, and name what
    is wrong). Issue 19: a RESULT's reading was 17,000 of the master's 45,000 instructions a
    task, read line by line by its layout; here a frame is read and checked in one C call
    and written back in another.

    Why this is the line-by-line reading: the frame is taken only when ``msgspec``'s writing
    of the values it read (``encode_lines``: each value's text, then a newline) is the frame
    and a newline. No value's text holds a newline (one in a string is escaped, and the writer
    puts nothing between tokens), so the frame's lines are exactly those texts, in order:
    each line is the writer's own text of the value read from it, however the reader found
    the values' bounds. Such a text has no duplicate key (the object read would have one key
    fewer), no NaN, no escape the writer does not write, no number it spells otherwise than
    it reads (an integer ``cpu_s`` is written as a float), no integer the strict decoder
    refuses (``msgspec`` takes no more digits than Python's limit, nor than 4,300); its
    objects' keys may come in any order, which both readers keep; and it is nested at most
    ``_MAX_DEPTH`` deep (its output or payload walked below; as with ``_canonical``, a caller
    some 735 frames deep could see the strict decoder refuse what is read here). So the strict
    decoder reads each line to the same values of the same types, and ``_message`` makes of
    them the message made here: the layout checked every field's JSON type, the version, the
    type name, the ranges and the IDs' lengths; the IDs' characters are checked here (joined,
    ``_valid_ids``). An independent review (2026-12-07) fuzzed it against the strict reading:
    355,765 frames, no difference (before the IDs were checked joined and the nesting walked).
    tests/unit/test_fast_paths.py holds it to the line-by-line reading."""
    read = _READ_RESULTS if kind is Tag.RESULT else _READ_WORKS
    try:
        docs = read(data)
        if len(docs) > MAX_FRAME_MESSAGES:
            return None
        written = _WRITE_LINES(docs)  # (empty for no value: never the frame and a newline)
        if len(written) != len(data) + 1 or not written.startswith(data):
            return None
    except (ValueError, RecursionError):  # (``msgspec.DecodeError`` is a ``ValueError``)
        return None
    out: list[Message] = []
    work_ids: list[str] = []
    tasks: list[str] = []
    # Each layout's fields in one call, in the layout's order (compiled, an attribute of a
    # ``msgspec`` structure is a generic lookup: 160 instructions each, six a message).
    # Nesting: the message's object, then its generation (an array of two integers) and its
    # output or payload, whose depth is walked.
    work_id: str
    task: str
    if kind is Tag.RESULT:
        for doc in docs:
            cpu, gen, ok, output, task, _, _, work_id = _FIELDS_OF(doc)
            if not _nests_within(output, _BODY_ROOM):
                return None
            work_ids.append(work_id)
            tasks.append(task)
            out.append(Result(WorkId(work_id), StateTaskId(task), ok, cpu, output, gen))
    else:
        for doc in docs:
            gen, payload, task, _, _, work_id = _FIELDS_OF(doc)
            if not _nests_within(payload, _BODY_ROOM):
                return None
            work_ids.append(work_id)
            tasks.append(task)
            out.append(Work(WorkId(work_id), StateTaskId(task), payload, gen))
    return out if _valid_ids(work_ids, tasks) else None


def _valid_ids(work_ids: list[str], tasks: list[str]) -> bool:
    """Whether every one of ``work_ids`` is a work ID and every one of ``tasks`` a state task
    ID, as ``valid_work_id`` and ``valid_task_id`` say, for a frame's IDs of the lengths its
    layout takes (64 characters each, and 1 to 256): checked joined, a few C calls a frame,
    not a message (issue 19: a call's overhead was most of each check's 1,800 and 1,000
    instructions). The work IDs are all valid if their joined text is ASCII and nothing is
    left of it once the lowercase hex digits are taken out; the task IDs, if theirs is ASCII
    letters and digits alone, else each is checked by itself."""
    joined = "".join(work_ids)
    if not _ISASCII(joined) or _ASCII(joined).translate(None, _HEX_DIGITS):
        return False
    text = "".join(tasks)
    if _ISASCII(text) and _ISALNUM(_ASCII(text)):  # (ASCII first: a lone surrogate has no UTF-8)
        return True
    return all(valid_task_id(task) for task in tasks)


def _typed_frame(kind: Tag, data: bytes) -> list[Decoded] | None:
    """``_typed_messages``, each message with its line (as many lines as messages, by its
    argument)."""
    msgs = _typed_messages(kind, data)
    if msgs is None:
        return None
    lines = data.split(b"\n") if len(msgs) > 1 else [data]
    return [(lines[i], msgs[i]) for i in range(len(msgs))]


def work_text(work_id: object, state_task_id: object, payload_json: str) -> str | None:
    """The text of a WORK after its generation field, exactly as ``encode``'s ``json.dumps``
    writes it, from the payload's canonical JSON (keys sorted, no spaces, ASCII) and the IDs;
    None when an ID is not a plain ``str`` (typed ``object``: compiled, a ``str`` parameter would
    refuse anything else with ``TypeError``). The catalogue keeps it for each item
    (``WorkItem.work_text``), so that a dispatch's WORK is its generation joined to it (issue
    19: the payload and the IDs are not encoded again for every dispatch)."""
    if type(work_id) is not str or type(state_task_id) is not str:
        return None
    return (
        f'"payload":{payload_json},"state_task_id":{encode_basestring_ascii(state_task_id)},'
        f'"type":"work","v":{PROTOCOL_VERSION},"work_id":{encode_basestring_ascii(work_id)}}}'
    )


def _work_bytes(msg: Message) -> bytes | None:
    """A WORK's bytes, exactly as ``encode``'s ``json.dumps`` writes them, joined from its
    generation and the text after it when the sender has that (``Work.work_text``); None when
    it has none, the generation is not of the plain type assumed here, or the text does not end
    with the message's own work ID (a text kept for another item: the general path then writes
    the message's fields). tests/unit/test_fast_paths.py compares the two."""
    if type(msg) is not Work or msg.work_text is None:
        return None
    text, work_id = msg.work_text, msg.work_id
    # (an ID that JSON escapes is not found as it is, and takes the general path; a one-argument
    # ``endswith`` of a string built is 50 ns compiled, one with bounds a method call, 180)
    if type(work_id) is not str or not text.endswith(f'"work_id":"{work_id}"}}'):
        return None
    generation = _generation_field(msg.generation)
    if generation is None:
        return None
    return f"{{{generation}{text}".encode()


def _generation_field(gen: object) -> str | None:
    """A message's ``"generation"`` field with its comma, as ``json.dumps`` writes it (empty
    when there is none); None when ``gen`` is neither None nor a tuple of two ``int`` in
    ``0.._GEN_TEXT_MAX`` (the general encoder then writes it, the same way)."""
    if gen is None:
        return ""
    if type(gen) is tuple and len(gen) == 2:
        epoch, counter = gen
        if (
            type(epoch) is int  # (exactly ``int``: its format is its ``repr``, never a bool's)
            and type(counter) is int
            and 0 <= epoch <= _GEN_TEXT_MAX
            and 0 <= counter <= _GEN_TEXT_MAX
        ):
            return f'"generation":[{epoch},{counter}],'
    # The general encoder writes the rest the same, and says what is wrong with what it refuses
    # (an integer past str's digit limit).
    return None


#: The largest generation part ``_generation_field`` spells itself, a ``Final`` small enough for
#: a compiled comparison without a boxed integer (issue 19: ``2**64``, a module global, was read
#: from the module's dictionary and compared as an object four times a message, 3,800
#: instructions a WORK or RESULT, a third of writing one). A dispatch generation counts
#: dispatches from 0: a larger part, or a negative one, takes the general path.
_GEN_TEXT_MAX: Final = 2**62 - 1


#: ``json.dumps``'s settings for a message, and so for every object inside one, in one encoder
#: made once: ``json.dumps`` with settings builds a ``JSONEncoder`` on every call (~0.9 of its
#: 2.2 us for a small RESULT output, on every worker's every result).
_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), allow_nan=False)
#: The C encoder ``_ENCODER.encode`` makes on every call, with the same settings, made once
#: (0.5 of a small output's 1.2 us, on every result; None without the C accelerator). Its
#: circular-reference marks (``_MARKS``) are empty after every encoding that ends, and are
#: emptied after one that raises.
_MARKS: dict[int, Any] = {}
_MAKE_ENCODER: Callable[..., Any] | None = getattr(json.encoder, "c_make_encoder", None)
_ENCODE = (
    None
    if _MAKE_ENCODER is None
    else _MAKE_ENCODER(
        _MARKS, _ENCODER.default, encode_basestring_ascii, None, ":", ",", True, False, False
    )
)


def _json_text(value: dict[str, Any]) -> str:
    """``_ENCODER.encode(value)``: ``json.dumps``'s text of an object in a message."""
    if _ENCODE is None:
        return _ENCODER.encode(value)
    try:
        return "".join(_ENCODE(value, 0))
    except BaseException:
        _MARKS.clear()
        raise


def _result_bytes(msg: Message) -> bytes | None:
    """A RESULT's bytes, exactly as ``encode``'s ``json.dumps`` writes them, joined from the
    text of its values (only ``output`` through ``json.dumps``: a worker's CPU is the master's
    loss where ranks share cores, issue 19); None when a value is not of the plain type assumed
    here or ``output`` cannot be encoded (the general path decides, and names the error).
    tests/unit/test_fast_paths.py compares the two."""
    if type(msg) is not Result:
        return None
    work_id, task, gen, cpu, ok, output = (
        msg.work_id,
        msg.state_task_id,
        msg.generation,
        msg.cpu_s,
        msg.ok,
        msg.output,
    )
    if (
        type(work_id) is not str
        or not (task is None or type(task) is str)
        or type(cpu) is not float
        or not math.isfinite(cpu)
        or type(ok) is not bool
        or type(output) is not dict
    ):
        return None
    typed = _typed_result(work_id, task, gen, cpu, ok, output)
    if typed is not None:
        return typed
    generation = _generation_field(gen)
    if generation is None:
        return None
    try:
        output_text = _json_text(output)
    except (TypeError, ValueError):
        return None
    task_text = "" if task is None else f'"state_task_id":{encode_basestring_ascii(task)},'
    return (
        f'{{"cpu_s":{float.__repr__(cpu)},{generation}"ok":{"true" if ok else "false"},'
        f'"output":{output_text},{task_text}"type":"result","v":{PROTOCOL_VERSION},'
        f'"work_id":{encode_basestring_ascii(work_id)}}}'
    ).encode()


#: ``msgspec``'s writer of a value: a layout's fields in its order, an object's keys in the
#: order they were put in (sorting them, ``order="sorted"``, sorts the layout's fields again on
#: every call: a fifth of the writing).
_WRITE: Final[Callable[[Any], bytes]] = msgspec.json.Encoder().encode
#: ``cpu_s`` in ``[_DECIMAL_MIN, _DECIMAL_END)`` (or zero) is spelled in decimals, the same
#: digits, by ``float.__repr__`` and by ``msgspec`` (outside it each has its own exponent form:
#: ``1e-05`` and ``0.00001``, ``1e+16`` and ``1e16``).
_DECIMAL_MIN: Final = 1e-4
_DECIMAL_END: Final = 1e16
#: The byte that only ``json``'s ASCII writing escapes (DEL): the one difference between the
#: two writers in the ASCII range.
_DEL: Final = b"\x7f"


def _typed_result(
    work_id: str, task: str | None, gen: object, cpu: float, ok: bool, output: dict[Any, Any]
) -> bytes | None:
    """A RESULT of protocol v1 written by ``msgspec`` in one C call (its layout,
    ``wiretypes.ResultLayout``), where that is byte for byte what ``json.dumps`` writes; None
    elsewhere (``_result_bytes`` then writes it). Issue 19: a worker's writing of a RESULT was
    3.5 us of its 12 a task, with a rank a core, and the worker set the pace as much as the
    master.

    Why the bytes are the same: both writers put no space between tokens; the layout's fields
    are in sorted order, and the output's keys are put in sorted order here (a copy, when they
    are not already; for keys in ASCII, code point order is byte order). The state task ID and
    the generation are present, the generation two ``int``, and the output's keys are ``str``
    and its values ``str``, ``bool``, ``int`` or None, which both spell alike (``true``,
    ``null``, the digits; an ``int`` past Python's digit limit both refuse, ``ValueError``).
    ``cpu_s`` is zero or in the range both spell as decimals. Both escape a string alike in
    the ASCII range but for DEL, and ``msgspec`` writes any other character as UTF-8: so the
    bytes are taken only when they are ASCII without DEL (``json`` would have escaped the
    rest). The IDs and the output are of exactly those types (a subclass is written by the
    other path). tests/unit/test_fast_paths.py holds it to ``json.dumps``."""
    if (
        type(work_id) is not str  # (``msgspec`` refuses a subclass, ``TypeError``)
        or type(task) is not str
        or type(output) is not dict  # (``msgspec`` reads a subclass's storage, not its items)
        or not (cpu == 0.0 or _DECIMAL_MIN <= cpu < _DECIMAL_END)
    ):
        return None
    if not plain_generation(gen) or gen is None:
        return None
    ordered = True
    last = ""
    for key, value in output.items():  # (``Any`` keys: compiled, ``str`` would refuse others)
        kind = type(value)
        if type(key) is not str or not (
            kind is str or kind is bool or kind is int or value is None
        ):
            return None
        if key < last:
            ordered = False
        last = key
    if not ordered:
        output = {key: output[key] for key in sorted(output)}
    try:
        data = _WRITE(ResultLayout(cpu, gen, ok, output, task, "result", PROTOCOL_VERSION, work_id))
    except ValueError:  # a lone surrogate (``json`` escapes it), an int past the digit limit
        return None
    # (``find``, not ``in``: ``in`` tries the byte as an integer first, and formats the error)
    return data if data.isascii() and data.find(_DEL) < 0 else None


_FIELDS: Final[dict[Tag, tuple[tuple[str, ...], tuple[str, ...]]]] = {
    # tag: (required fields, optional fields), besides "v" and "type"
    Tag.WORK: (("work_id", "state_task_id", "payload"), ("generation",)),
    Tag.RESULT: (("work_id", "ok", "cpu_s", "output"), ("state_task_id", "generation")),
    Tag.STOP: ((), ("status",)),
    Tag.BYE: (("results",), ()),
}
#: Each tag by its number and its ``"type"`` name (looked up once, not per message).
_TAGS: Final = {int(tag): tag for tag in Tag}
_TYPE_NAMES: Final = {tag: tag.name.lower() for tag in Tag}

#: Strict JSON for messages: a duplicate field or a NaN is a malformed message.
_STRICT = strict_hooks(ProtocolError, "field {} appears twice")
#: Built once: ``json.loads`` with hooks builds a decoder at every call.
_DECODER = json.JSONDecoder(**_STRICT)


#: The fast JSON library (issue 19: the standard library's scanner took 1.7 us of a worker's
#: 8 for a WORK's payload of nine fields, and a RESULT's reading was a sixth of the master's
#: time a task). Its reading of a message is taken only for bytes that are exactly what its
#: writer makes of that reading, keys sorted (``_canonical``): such a text has no duplicate
#: key, no NaN, no number that reads as infinity or as a float where the general path reads an
#: integer (a misrounded float would be written back otherwise), no escape but those it writes,
#: no space, nothing but the object, and is UTF-8; so the strict decoder reads it the same,
#: value for value and type for type, and the message's checks (``_message``) run on either
#: reading alike. Nor does it nest deeper than the writer's limit (255 levels, documented; it
#: refuses deeper with ``JSONEncodeError``), far inside the strict decoder's recursion limit
#: from where the loops call ``decode`` (a caller already some 750 Python frames deep could see
#: the general path refuse what is read here). Any other text the strict decoder reads.
_LOADS: Final = orjson.loads
_DUMPS: Final = orjson.dumps
_SORTED: Final = orjson.OPT_SORT_KEYS


def _canonical(data: bytes) -> dict[str, Any] | None:
    """The JSON object ``data`` holds when ``data`` is exactly the fast library's sorted
    writing of its reading (see ``_LOADS``), else None: the strict decoder decides."""
    try:
        doc = _LOADS(data)
        if type(doc) is dict and _DUMPS(doc, option=_SORTED) == data:
            return doc
    except (ValueError, TypeError):  # not JSON to it, or nothing it writes
        pass
    return None


def decode(tag: int, data: bytes | bytearray | memoryview, accept: frozenset[Tag]) -> Message:
    """The message carried by MPI tag ``tag`` and bytes ``data``, validated.

    ``accept`` is the set of tags this side takes (``FROM_WORKER`` on the master). Raises
    ``ProtocolError`` naming the first thing wrong; nothing is evaluated beyond plain JSON.
    """
    size = len(data)
    if size > MAX_MESSAGE_BYTES:
        raise ProtocolError(f"message of {size} bytes exceeds the limit of {MAX_MESSAGE_BYTES}")
    kind = _TAGS.get(tag) if type(tag) is int else None
    if kind is None:
        try:
            kind = Tag(tag)
        except ValueError:
            raise ProtocolError(f"unknown message tag {tag}") from None
    if kind not in accept:
        raise ProtocolError(f"unexpected {kind.name} message on this side")
    raw = data if type(data) is bytes else bytes(data)
    if kind is Tag.RESULT or kind is Tag.WORK:
        typed = _typed_messages(kind, raw)
        if typed is not None and len(typed) == 1:  # (one line: a message, not a frame)
            return typed[0]
    doc = _canonical(raw)
    return _message(kind, _strict_document(kind, raw) if doc is None else doc)


def _strict_document(kind: Tag, data: bytes) -> dict[str, Any]:
    """The JSON object ``data`` holds, read by the strict decoder (any text ``_canonical`` does
    not take), or ``ProtocolError`` naming what is wrong: not UTF-8, not JSON, not an object."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProtocolError(f"{kind.name} message is not UTF-8: {exc.reason}") from None
    try:
        # json.loads's one check beyond the decoder's: a BOM, refused with its own message
        doc = json.loads(text, **_STRICT) if text[:1] == "\ufeff" else _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"{kind.name} message is not JSON: {exc.msg} at {exc.pos}") from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise ProtocolError(f"{kind.name} message is not acceptable JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError(f"{kind.name} message nests too deeply") from None
    if not isinstance(doc, dict):
        raise ProtocolError(f"{kind.name} message is not a JSON object")
    return doc


def _message(kind: Tag, doc: dict[str, Any]) -> Message:
    """The message of tag ``kind`` that the JSON object ``doc`` is, validated (version, type,
    field names and types, the ID formats, the ranges), or ``ProtocolError`` naming the first
    thing wrong. One reading of either JSON reader (``decode``)."""
    version = doc.get("v")
    if not (type(version) is int and version == PROTOCOL_VERSION) and (  # (in C, the usual)
        version != PROTOCOL_VERSION or isinstance(version, bool)  # 1.0 is 1, True is not
    ):
        raise ProtocolError(
            f"{kind.name} message has protocol version {version!r}; this side speaks "
            f"{PROTOCOL_VERSION}"
        )
    name = _TYPE_NAMES[kind]
    typed = doc.get("type")
    if type(typed) is not str or typed != name:  # (a JSON reading: a string is a str)
        raise ProtocolError(f"tag {kind.name} carries a payload of type {typed!r}")
    # Every required field, and no field but those and the optional ones: with "v" and "type"
    # there (above), that is the required fields there and as many fields as they, the
    # optional ones there and those two make (a few lookups, no sets).
    required, optional = _FIELDS[kind]
    fields = 2 + len(required)
    for field_name in optional:
        if field_name in doc:
            fields += 1
    if len(doc) != fields or not all(field_name in doc for field_name in required):
        present = set(doc) - {"v", "type"}
        if missing := sorted(set(required) - present):
            raise ProtocolError(f"{kind.name} message lacks {', '.join(missing)}")
        if unknown := sorted(present - set(required) - set(optional)):
            raise ProtocolError(f"{kind.name} message has unknown field(s) {', '.join(unknown)}")
    if kind is Tag.STOP:
        status = doc.get("status", 0)
        if not _whole(status, MAX_STATUS):
            raise ProtocolError(f"STOP status must be a whole number in 0..255, got {status!r:.40}")
        return Stop(status)
    if kind is Tag.BYE:
        results = doc["results"]
        if not _whole(results, MAX_COUNT):
            raise ProtocolError(
                f"BYE results must be a whole number in 0..2**63-1, got {results!r:.40}"
            )
        return Bye(results)
    work_id = doc["work_id"]
    if not valid_work_id(work_id):
        raise ProtocolError(
            f"{kind.name} work_id must be 64 lowercase hex characters, got {work_id!r:.80}"
        )
    task = doc.get("state_task_id")
    if task is not None and not valid_task_id(task):
        raise ProtocolError(f"{kind.name} state_task_id is not a task ID: {task!r:.80}")
    gen = doc.get("generation")
    if gen is not None and not valid_generation(gen):
        raise ProtocolError(
            f"{kind.name} generation must be [epoch, counter], two whole numbers "
            f"in 0..2**63-1, got {gen!r:.80}"
        )
    generation: Generation | None = None if gen is None else (gen[0], gen[1])
    if kind is Tag.WORK:
        payload = doc["payload"]
        if task is None:
            raise ProtocolError("WORK state_task_id must not be null")
        if not isinstance(payload, dict):
            raise ProtocolError(f"WORK payload must be an object, got {type(payload).__name__}")
        return Work(WorkId(work_id), StateTaskId(task), payload, generation)
    ok, cpu, output = doc["ok"], doc["cpu_s"], doc["output"]
    if not isinstance(ok, bool):
        raise ProtocolError(f"RESULT ok must be true or false, got {ok!r:.40}")
    number = type(cpu)  # (a JSON reading: exactly int or float; True is a bool, not a number)
    if (number is not float and number is not int) or not 0 <= cpu <= MAX_CPU_S:
        raise ProtocolError(
            f"RESULT cpu_s must be a finite number in 0..{MAX_CPU_S:g} (seconds), got {cpu!r:.40}"
        )
    if not isinstance(output, dict):
        raise ProtocolError(f"RESULT output must be an object, got {type(output).__name__}")
    return Result(
        WorkId(work_id),
        StateTaskId(task) if task is not None else None,
        ok,
        float(cpu),
        output,
        generation,
    )
