"""The one parser of master traces: NDJSON lines in, typed and validated events out.

``leasefence trace check`` (``conformance.tracecheck``) and the campaign's ledger
(``leasefence.harness.campaign``) both read traces through ``parse`` (text lines) or
``parse_docs`` (JSON objects already decoded), so a trace means the same thing to both. The
format is the one ``leasefence.impl.trace.TraceWriter`` writes and ``docs/trace-format.md``
documents: one event per line, a ``Header`` first. Every field a step needs is checked for its
type here, and a bad one raises ``TraceFormatError`` naming the line and the field, so no
consumer meets a wrong type (or a NaN clock) deep inside a replay.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple, TypeVar

from leasefence.impl.generation import Generation, valid_generation

#: The trace format versions this parser reads (``impl.trace.TRACE_VERSION`` is the newest).
VERSIONS = (1, 2)
#: The owner tokens a Header may name (``model.system.FENCES``).
FENCES = ("rank", "generation")

T = TypeVar("T")


class TraceFormatError(ValueError):
    """A trace line that is not valid JSON, is not a known event, or has a field of the wrong
    type; the message names the line and the field."""


class Header(NamedTuple):
    """The bounds of a replay: TTL (seconds), worker ranks, work ID -> state task, pipeline
    depth and fence (depth 1 and the rank in a version-1 trace)."""

    line: int
    version: int
    ttl: float
    ranks: tuple[int, ...]
    task_of: dict[str, str]
    pipeline: int = 1
    fence: str = "rank"

    @property
    def event(self) -> str:
        """The event's name."""
        return "Header"


class DispatchWork(NamedTuple):
    """``DispatchWork(w, r)`` with its ``RejectDispatch``: granted or the step refused."""

    line: int
    now: float
    w: str
    r: int
    ok: bool
    refused: str | None = None
    gen: Generation | None = None

    @property
    def event(self) -> str:
        """The event's name (the TLA+ action)."""
        return "DispatchWork"


class DeliverResult(NamedTuple):
    """``DeliverResult(r, w, ...)``: a result from rank ``r`` and what the master decided."""

    line: int
    now: float
    r: int
    w: str
    ok: bool
    reported: str | None = None
    stale: bool = False
    task: str | None = None
    work_ok: bool = False
    state_ok: bool = False
    gen: Generation | None = None

    @property
    def event(self) -> str:
        """The event's name (the TLA+ action)."""
        return "DeliverResult"


class ReclaimExpired(NamedTuple):
    """``ReclaimExpired``: the work IDs the master's periodic recovery reclaimed."""

    line: int
    now: float
    reclaimed: tuple[str, ...]

    @property
    def event(self) -> str:
        """The event's name (the TLA+ action)."""
        return "ReclaimExpired"


# The values below are NamedTuples, as the events are (not frozen dataclasses: each of those
# costs ~3 million instructions to create at import, paid by every ``trace check``). Their dict
# fields are read only; the empty defaults are shared, so never change one in place.


class JournalLease(NamedTuple):
    """A work lease as a restarted master read it: owner rank, stamp, clock tag, generation."""

    owner: int
    updated: float
    clock: str | None
    gen: Generation | None = None


class StateLease(NamedTuple):
    """A state lease as a restarted master read it: owner rank, stamp, epoch, generation."""

    owner: int
    updated: float
    epoch: int
    gen: Generation | None = None


class RecoveredJournal(NamedTuple):
    leases: dict[str, JournalLease] = {}  # noqa: RUF012 (shared, read only: see above)
    completed: tuple[str, ...] = ()
    attempts: dict[str, int] = {}  # noqa: RUF012


class RecoveredCoordinator(NamedTuple):
    # The new master had already loaded into the next epoch: 2 after the first restart.
    epoch: int = 2
    leases: dict[str, StateLease] = {}  # noqa: RUF012
    stats: dict[str, tuple[int, int]] = {}  # noqa: RUF012 (task -> (done, failed))


class Recovered(NamedTuple):
    """What a restarted master read from disk before recovering (``Master.recovered_state``)."""

    journal: RecoveredJournal = RecoveredJournal()
    coordinator: RecoveredCoordinator = RecoveredCoordinator()


class RestartMaster(NamedTuple):
    """``RestartMaster``: what the new master read from disk, and what its recovery reclaimed
    (None in traces before format version 2)."""

    line: int
    now: float
    recovered: Recovered | None = None
    reclaimed: tuple[str, ...] | None = None

    @property
    def event(self) -> str:
        """The event's name (the TLA+ action)."""
        return "RestartMaster"


#: A step of the master: every event but the Header.
Step = DispatchWork | DeliverResult | ReclaimExpired | RestartMaster
Event = Header | Step


class Trace(NamedTuple):
    """A parsed trace: its events in order (the first a Header) and whether a torn last line
    was dropped."""

    events: tuple[Event, ...]
    torn_tail: bool = False

    @property
    def header(self) -> Header:
        first = self.events[0] if self.events else None
        if not isinstance(first, Header):
            raise TraceFormatError("a trace starts with a Header line")
        return first

    def segments(self) -> list[Trace]:
        """Each job's part: from one Header to the next (a restarted master writes its own)."""
        starts = [i for i, ev in enumerate(self.events) if isinstance(ev, Header)]
        ends = [*starts[1:], len(self.events)]
        return [Trace(self.events[a:z]) for a, z in zip(starts, ends, strict=True)]


# -- field readers: each names the line, the event and the field it refuses --------------------


class _Missing:
    """The default of a field that must be present."""


_REQUIRED = _Missing()


class _Fields:
    """The fields of one JSON object, read with the type each must have."""

    def __init__(self, doc: Mapping[str, Any], line: int, where: str) -> None:
        self.doc, self.line, self.where = doc, line, where

    def fail(self, key: str, want: str) -> TraceFormatError:
        got = self.doc.get(key)
        return TraceFormatError(
            f"line {self.line}: {self.where} field {key!r} must be {want}, not {got!r}"
        )

    def get(
        self,
        key: str,
        check: Callable[[Any], T | None],
        want: str,
        default: T | _Missing = _REQUIRED,
    ) -> T:
        """The field ``key`` as ``check`` reads it (None: refused); absent: ``default``."""
        if key not in self.doc:
            if isinstance(default, _Missing):
                raise TraceFormatError(f"line {self.line}: {self.where} lacks field {key!r}")
            return default
        value = check(self.doc[key])
        if value is None:
            raise self.fail(key, want)
        return value

    def number(self, key: str) -> float:
        return self.get(key, _finite, "a finite number")

    def whole(self, key: str, default: int | _Missing = _REQUIRED) -> int:
        return self.get(key, _whole, "a whole number", default)

    def text(self, key: str) -> str:
        return self.get(key, _text, "a string")

    def flag(self, key: str, default: bool | _Missing = _REQUIRED) -> bool:
        return self.get(key, _flag, "true or false", default)

    def texts(self, key: str) -> tuple[str, ...]:
        return self.get(key, _texts, "a list of strings")

    def maybe_text(self, key: str) -> str | None:
        """A string or null (absent: null)."""
        value = self.doc.get(key)
        if value is None or isinstance(value, str):
            return value
        raise self.fail(key, "a string or null")

    def gen(self) -> Generation | None:
        """The event's ``gen``: ``[epoch, counter]`` or null (absent: null)."""
        value = self.doc.get("gen")
        if value is None:
            return None
        if not valid_generation(value):
            raise TraceFormatError(
                f"line {self.line}: gen must be [epoch, counter] or null, not {value!r}"
            )
        return (int(value[0]), int(value[1]))

    def obj(self, key: str) -> Mapping[str, Any]:
        """A nested object (empty when absent or null)."""
        value = self.doc.get(key)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(key, "an object")
        return value


def _finite(x: Any) -> float | None:
    ok = isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
    return float(x) if ok else None


def _whole(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def _text(x: Any) -> str | None:
    return x if isinstance(x, str) else None


def _flag(x: Any) -> bool | None:
    return x if isinstance(x, bool) else None


def _texts(x: Any) -> tuple[str, ...] | None:
    ok = isinstance(x, list) and all(isinstance(y, str) for y in x)
    return tuple(x) if ok else None


def _header(f: _Fields) -> Header:
    version = f.whole("version")
    if version not in VERSIONS:
        raise f.fail("version", f"one of {', '.join(map(str, VERSIONS))} (a known trace format)")
    ttl = f.number("ttl")
    if ttl < 0:
        raise f.fail("ttl", "a number of seconds >= 0")
    ranks = f.get("ranks", _ranks, "a list of whole numbers")
    task_of = f.get("task_of", _task_map, "an object of work ID -> state task ID")
    pipeline = f.doc.get("pipeline", 1)
    if isinstance(pipeline, bool) or not isinstance(pipeline, int) or pipeline < 1:
        raise TraceFormatError(
            f"line {f.line}: the Header's pipeline must be a whole number >= 1, not {pipeline!r}"
        )
    fence = f.doc.get("fence", "rank")
    if fence not in FENCES:
        raise TraceFormatError(
            f"line {f.line}: the Header's fence must be one of {', '.join(FENCES)}, not {fence!r}"
        )
    return Header(f.line, version, ttl, ranks, task_of, pipeline, str(fence))


def _ranks(x: Any) -> tuple[int, ...] | None:
    ok = isinstance(x, list) and all(_whole(y) is not None for y in x)
    return tuple(x) if ok else None


def _task_map(x: Any) -> dict[str, str] | None:
    ok = isinstance(x, dict) and all(isinstance(v, str) for v in x.values())
    return dict(x) if ok else None


def _dispatch(f: _Fields) -> DispatchWork:
    return DispatchWork(
        f.line,
        f.number("now"),
        f.text("w"),
        f.whole("r"),
        f.flag("ok"),
        f.maybe_text("refused"),
        f.gen(),
    )


def _deliver(f: _Fields) -> DeliverResult:
    return DeliverResult(
        f.line,
        f.number("now"),
        f.whole("r"),
        f.text("w"),
        f.flag("ok"),
        reported=f.maybe_text("reported"),
        stale=f.flag("stale", False),
        task=f.maybe_text("task"),
        work_ok=f.flag("work_ok", False),
        state_ok=f.flag("state_ok", False),
        gen=f.gen(),
    )


def _reclaim(f: _Fields) -> ReclaimExpired:
    return ReclaimExpired(f.line, f.number("now"), f.texts("reclaimed"))


def _restart(f: _Fields) -> RestartMaster:
    recovered = None if f.doc.get("recovered") is None else _recovered(f.obj("recovered"), f.line)
    reclaimed = f.texts("reclaimed") if f.doc.get("reclaimed") is not None else None
    return RestartMaster(f.line, f.number("now"), recovered, reclaimed)


def _recovered(doc: Mapping[str, Any], line: int) -> Recovered:
    """The ``recovered`` object of a RestartMaster, every lease and count checked."""
    outer = _Fields(doc, line, "RestartMaster's recovered")
    j = _Fields(outer.obj("journal"), line, "recovered journal")
    c = _Fields(outer.obj("coordinator"), line, "recovered coordinator")
    journal = RecoveredJournal(
        leases={
            str(w): JournalLease(*_lease_row(x, line, f"recovered journal lease of {w}", "clock"))
            for w, x in j.obj("leases").items()
        },
        completed=j.texts("completed") if "completed" in j.doc else (),
        attempts={
            str(w): _count(n, line, f"recovered attempts of {w}")
            for w, n in j.obj("attempts").items()
        },
    )
    coordinator = RecoveredCoordinator(
        epoch=c.whole("epoch", 2),
        leases={
            str(t): StateLease(*_lease_row(x, line, f"recovered state lease of {t}", "epoch"))
            for t, x in c.obj("leases").items()
        },
        stats={str(t): _stats(x, line, str(t)) for t, x in c.obj("stats").items()},
    )
    return Recovered(journal, coordinator)


def _count(n: Any, line: int, what: str) -> int:
    if _whole(n) is None or n < 0:
        raise TraceFormatError(f"line {line}: {what} must be a whole number >= 0, not {n!r}")
    return int(n)


def _lease_row(x: Any, line: int, what: str, third: str) -> tuple[Any, ...]:
    """``[owner, updated, clock or epoch, generation?]`` of a recovered lease."""
    want = f"[owner, updated, {third}] or [owner, updated, {third}, generation]"
    if not isinstance(x, list) or len(x) not in (3, 4):
        raise TraceFormatError(f"line {line}: {what} must be {want}, not {x!r}")
    owner, updated, tag = x[0], _finite(x[1]), x[2]
    tag_ok = _whole(tag) is not None if third == "epoch" else tag is None or isinstance(tag, str)
    gen = x[3] if len(x) == 4 else None
    if _whole(owner) is None or updated is None or not tag_ok:
        raise TraceFormatError(f"line {line}: {what} must be {want}, not {x!r}")
    if gen is not None and not valid_generation(gen):
        raise TraceFormatError(
            f"line {line}: {what}: a generation must be [epoch, counter] or null, not {gen!r}"
        )
    return owner, updated, tag, None if gen is None else (int(gen[0]), int(gen[1]))


def _stats(x: Any, line: int, task: str) -> tuple[int, int]:
    if not (isinstance(x, list) and len(x) == 2 and all(_whole(y) is not None for y in x)):
        raise TraceFormatError(
            f"line {line}: recovered statistics of {task} must be [completions, failures], "
            f"not {x!r}"
        )
    return int(x[0]), int(x[1])


#: One reader per event name.
READERS: dict[str, Callable[[_Fields], Event]] = {
    "Header": _header,
    "DispatchWork": _dispatch,
    "DeliverResult": _deliver,
    "ReclaimExpired": _reclaim,
    "RestartMaster": _restart,
}
#: The master's steps, named by their TLA+ actions.
ACTIONS = tuple(name for name in READERS if name != "Header")


# -- the fast path: the two events of almost every line, read in one go -----------------------
# Each returns the same event as its reader above for a line whose fields all have their usual
# types, and None for anything else, which the reader then reads (and refuses, naming the
# field). ``x - x == 0.0`` holds exactly for a finite float. A trace of 10⁵ items has about
# 250,000 such lines, and the field readers' calls cost more than the JSON decoding
# (``tests/unit/test_tracecheck.py`` compares both paths). The events are named tuples, made
# by their constructors: a frozen dataclass set each field through ``object.__setattr__`` (1.0-1.7
# µs an event, 2.8 % of a step's instructions) and took 352 bytes with its ``__dict__``, a named
# tuple 96-128 (setting a dataclass's ``__dict__`` in one update was faster but took 560).


def _fast_gen(value: Any) -> Generation | bool | None:
    """``value`` as a generation, None for null, False when not plainly either."""
    if value is None:
        return None
    if type(value) is list and valid_generation(value):
        return (value[0], value[1])
    return False


def _fast_dispatch(doc: dict[str, Any], line: int) -> DispatchWork | None:
    get = doc.get
    now, w, r, ok, refused = get("now"), get("w"), get("r"), get("ok"), get("refused")
    gen = _fast_gen(get("gen"))
    if (
        type(now) is float
        and now - now == 0.0
        and type(w) is str
        and type(r) is int
        and type(ok) is bool
        and (refused is None or type(refused) is str)
        and gen is not False
    ):
        return DispatchWork(line, now, w, r, ok, refused, gen)  # type: ignore[arg-type]
    return None


def _fast_deliver(doc: dict[str, Any], line: int) -> DeliverResult | None:
    get = doc.get
    now, r, w, ok, reported = get("now"), get("r"), get("w"), get("ok"), get("reported")
    stale, task = get("stale", False), get("task")
    work_ok, state_ok = get("work_ok", False), get("state_ok", False)
    gen = _fast_gen(get("gen"))
    if (
        type(now) is float
        and now - now == 0.0
        and type(r) is int
        and type(w) is str
        and type(ok) is bool
        and (reported is None or type(reported) is str)
        and type(stale) is bool
        and (task is None or type(task) is str)
        and type(work_ok) is bool
        and type(state_ok) is bool
        and gen is not False
    ):
        return DeliverResult(
            line,
            now,
            r,
            w,
            ok,
            reported,
            stale,
            task,
            work_ok,
            state_ok,
            gen,  # type: ignore[arg-type]
        )
    return None


FAST: dict[str, Callable[[dict[str, Any], int], Event | None]] = {
    "DispatchWork": _fast_dispatch,
    "DeliverResult": _fast_deliver,
}


def event_of(doc: object, line: int) -> Event:
    """One decoded JSON line as a typed event; ``TraceFormatError`` names what is wrong."""
    if type(doc) is dict:
        fast = FAST.get(doc.get("event"))  # type: ignore[arg-type]
        if fast is not None:
            ev = fast(doc, line)
            if ev is not None:
                return ev
    if not isinstance(doc, dict) or not isinstance(doc.get("event"), str):
        raise TraceFormatError(f"line {line}: expected an object with an 'event' name")
    name = doc["event"]
    reader = READERS.get(name)
    if reader is None:
        raise TraceFormatError(f"line {line}: unknown event {name!r} (known: {', '.join(READERS)})")
    return reader(_Fields(doc, line, name))


def parse(lines: Iterable[str]) -> Trace:
    """The events of a trace's text lines. A torn (unparsable) last line is dropped and
    reported; a bad line followed by more lines raises ``TraceFormatError``."""
    events: list[Event] = []
    bad: tuple[int, str] | None = None
    for lineno, raw in enumerate(lines, start=1):
        if not raw or raw.isspace():
            continue
        if bad is not None:
            raise TraceFormatError(
                f"line {bad[0]}: not valid JSON ({bad[1]}), and more lines follow"
            )
        try:
            doc = _decode_line(raw)
        except json.JSONDecodeError as exc:
            bad = (lineno, str(exc))
            continue
        except RecursionError:  # not torn: no writer nests this deep
            raise TraceFormatError(f"line {lineno}: nested too deeply to be an event") from None
        events.append(event_of(doc, lineno))
    return Trace(tuple(events), bad is not None)


#: The decoder's scanner (C), which ``loads`` and ``raw_decode`` call: ``(value, end)``.
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def _decode_line(raw: str) -> Any:
    """``json.loads(raw)``: a line that is one JSON value and a newline is decoded by the
    scanner ``loads`` itself calls, without its two whitespace scans and two Python calls;
    anything else goes through ``loads`` (and its errors)."""
    try:
        doc, end = _scan_once(raw, 0)
    except (StopIteration, json.JSONDecodeError):
        return json.loads(raw)
    if end != len(raw) and not raw[end:].isspace():
        return json.loads(raw)
    return doc


def parse_docs(docs: Iterable[Mapping[str, Any]]) -> Trace:
    """The events of already decoded trace lines (line numbers count from 1)."""
    return Trace(tuple(event_of(doc, n) for n, doc in enumerate(docs, start=1)))


def json_objects(lines: Iterable[str | bytes]) -> Iterator[dict[str, Any]]:
    """Every line of an NDJSON log that is a whole JSON object; torn or foreign lines are
    skipped (the campaign's event logs and journals, read while jobs run or after a kill)."""
    for line in lines:
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            yield doc
