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

import orjson

from leasefence.impl.errors import ProtocolError
from leasefence.impl.frozen import FACTORY, fast_init
from leasefence.impl.generation import MAX_GENERATION_PART as MAX_GENERATION_PART
from leasefence.impl.generation import Generation as Generation
from leasefence.impl.generation import valid_generation as valid_generation
from leasefence.impl.generation import whole as _whole
from leasefence.impl.strictjson import strict_hooks

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
    (``_TASK_ID``, here in C calls, as ``valid_work_id``)."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= 256
        and _ISASCII(value)
        and _ISPRINTABLE(value)
        and value.find(" ") < 0
    )


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

    A frame every line of which the fast library reads as its own writing (``_fast_frame``:
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


def _fast_frame(tag: int, data: bytes, accept: frozenset[Tag]) -> list[Decoded] | None:
    """The messages of a frame whose every line the fast library reads as its own writing
    (``_written``, else ``_canonical``) and whose every message passes its checks
    (``_message``): what ``_decode_lines`` reads of it, without ``split_frame``'s and
    ``decode``'s checks a line (issue 19: a message's reading was a sixth of the master's time
    a task). None for any other
    frame (``_decode_lines`` decides, and names what is wrong): one over ``MAX_MESSAGE_BYTES``
    (so no line of it is over the limit either), a tag not framed or not taken here, a blank
    line, a line the fast library reads otherwise or a check refuses, more than
    ``MAX_FRAME_MESSAGES`` messages."""
    kind = _TAGS.get(tag) if type(tag) is int or type(tag) is Tag else None
    if kind is None or kind not in FRAMED or kind not in accept or len(data) > MAX_MESSAGE_BYTES:
        return None
    out: list[Decoded] = []
    for line in data.split(b"\n"):
        msg = _written(kind, line)
        if msg is None:
            doc = _canonical(line)
            if doc is None:
                return None
            try:
                msg = _message(kind, doc)
            except ProtocolError:
                return None
        out.append((line, msg))
    return out if len(out) <= MAX_FRAME_MESSAGES else None


#: The fixed text at the end of a WORK or RESULT line as the fast library writes it, keys
#: sorted (``_written``): the key of the state task ID, and what follows that ID up to the
#: work ID.
_TASK_KEY: Final = b',"state_task_id":"'
_RESULT_TAIL: Final = b'","type":"result","v":1,"work_id":"'
_WORK_TAIL: Final = b'","type":"work","v":1,"work_id":"'
#: Byte maps that leave a byte as it is where an ID's text may hold it and change it elsewhere
#: (to its neighbour, ``c ^ 1``), so that a text translated through one is unchanged exactly
#: when it is all such bytes: a work ID's (lowercase hex), a state task ID's (printable ASCII
#: but the space, the quote and the backslash: its JSON text is itself between quotes).
_HEX_ONLY: Final = bytes(c if c in b"0123456789abcdef" else c ^ 1 for c in range(256))
_TASK_TEXT_ONLY: Final = bytes(
    c if 0x21 <= c <= 0x7E and c not in b'"\\' else c ^ 1 for c in range(256)
)
#: The C calls of ``_written``, looked up once (compiled, a method call looks up its name).
_TRANSLATE: Final = bytes.translate
_RFIND: Final = bytes.rfind


def _written(kind: Tag, line: bytes) -> Message | None:
    """The WORK or RESULT (``kind``) that ``line`` is, when ``line`` is the fast library's sorted
    writing (``_canonical``) of a message that passes every check of ``_message``, with a
    generation and a state task ID whose JSON text needs no escape; None for any other line
    (``_canonical`` and ``_message`` then decide, and name what is wrong). The fields after
    the message's object (payload or output) are read by their fixed text, and only the
    fields up to it by the library::

        {"cpu_s":N,"generation":[E,C],"ok":B,"output":{..},"state_task_id":"T","type":"result","v":1,"work_id":"W"}
        {"generation":[E,C],"payload":{..},"state_task_id":"T","type":"work","v":1,"work_id":"W"}

    The line ends with the fixed text around ``W``, 64 lowercase hex digits; ``T`` is 1 to 256
    printable ASCII characters but the space, the quote and the backslash (so the last
    ``_TASK_KEY`` of the line is the one before it, and its JSON text is itself between quotes);
    what comes before ``_TASK_KEY``, closed with a brace, is the library's sorted writing of its
    own reading, an object of exactly the fields that sort before ``state_task_id``, checked
    as ``_message`` checks them. So the line is the library's sorted writing of the object
    ``_canonical`` would read, and ``_message`` would make of it the message made here.
    ``decode`` and ``_fast_frame`` try it first. A line over ``MAX_MESSAGE_BYTES``, or of
    another tag, is None too (they check both first; so does this, for any other caller).
    Issue 19: a RESULT's reading was 23,000 of the master's 70,000 instructions a task, half
    of it the library reading and writing back the IDs and the fixed fields.
    tests/unit/test_fast_paths.py holds it to the line-by-line reading."""
    # Every slice below is taken with its start at most its end: compiled, a slice whose end
    # is before its start raises ``SystemError`` (mypyc does not clamp it to empty as Python
    # does), and a hostile line would then stop the master (found by review: a line of the
    # tail alone behind 1 to 16 bytes).
    size = len(line)
    if kind is Tag.RESULT:
        tail = _RESULT_TAIL
    elif kind is Tag.WORK:
        tail = _WORK_TAIL
    else:
        return None
    work_at = size - 66  # the work ID's 64 characters, then '"}'
    task_end = work_at - len(tail)
    if (
        task_end <= 0
        or size > MAX_MESSAGE_BYTES
        or line[task_end:work_at] != tail
        or line[size - 2 :] != b'"}'
    ):
        return None
    work_id = line[work_at : size - 2]
    if _TRANSLATE(work_id, _HEX_ONLY) != work_id:
        return None
    key_at = _RFIND(line, _TASK_KEY, 0, task_end)
    if key_at < 0:  # (found, it ends at or before ``task_end``)
        return None
    task = line[key_at + len(_TASK_KEY) : task_end]
    if not 0 < len(task) <= 256 or _TRANSLATE(task, _TASK_TEXT_ONLY) != task:
        return None
    head = line[:key_at] + b"}"
    try:
        doc = _LOADS(head)
        if type(doc) is not dict or _DUMPS(doc, option=_SORTED) != head:
            return None
    except (ValueError, TypeError):  # not JSON to it, or nothing it writes
        return None
    gen = doc.get("generation")
    if type(gen) is not list or not valid_generation(gen):
        return None
    generation = (gen[0], gen[1])
    if kind is Tag.WORK:
        payload = doc.get("payload")
        if len(doc) != 2 or type(payload) is not dict:
            return None
        return Work(WorkId(work_id.decode()), StateTaskId(task.decode()), payload, generation)
    ok, output = doc.get("ok"), doc.get("output")
    cpu: Any = doc.get("cpu_s")
    number = type(cpu)  # (a JSON reading: exactly int or float; True is a bool, not a number)
    if (
        len(doc) != 4
        or type(ok) is not bool
        or type(output) is not dict
        or (number is not float and number is not int)
        or not 0 <= cpu <= MAX_CPU_S
    ):
        return None
    return Result(
        WorkId(work_id.decode()), StateTaskId(task.decode()), ok, float(cpu), output, generation
    )


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
        msg = _written(kind, raw)
        if msg is not None:
            return msg
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
