"""Trace validation: replay an NDJSON trace of a real run through the model, step by step.

A trace (written by ``leasefence.impl.trace``) starts with a ``Header`` line (TTL, ranks, the map
from work ID to state task) followed by one line per master step, named by its TLA+ action:
``DispatchWork``, ``DeliverResult``, ``ReclaimExpired``, ``RestartMaster``. Each step carries the
master's clock reading ``now`` (Unix seconds) and what the implementation decided. Replay moves
the model's wall clock to ``now`` (a step backwards is a wall-clock rollback), applies the same
action with the same arguments, and compares every decision. The first step the model does not
allow, or decides differently, is reported with the state before it.

Times are compared in integer microseconds, the model's ticks (``TICKS_PER_SECOND``). The
implementation decides expiry on floats, so a lease whose age is within a tick of the TTL may
have gone either way: ``ReclaimExpired`` and the recovery of ``RestartMaster`` are replayed at
the step's tick or, when that does not give what the implementation reclaimed, one tick either
side.

Pipelined runs (issue 12): the Header gives the pipeline depth and the fence; under generation
fencing each dispatch and each result carries its generation ``[epoch, counter]``, and replay
pairs every generation with the model's (``refinement.GenerationNames``). A result is then the
message of the generation it presents; one that presents none (an old-protocol worker) is a
message in flight from its rank about its work.

The network may duplicate any result, so replay delivers every result as the model's
duplicating delivery (``keep``): its message stays in flight. Which copy a trace line was is
then never guessed, and no behaviour of the implementation is refused for a guess; a result
that was never sent is still a divergence.

Every replayed state is also checked against the invariants, and every step against the step
properties (``model.invariants``), so a trace the model allows but that breaks L1-L7 (a run of
a flavour or bounds under which the protocol is unsafe, such as rank fencing at depth 2) is
reported too. ``NoStuckLease`` is left out: it is a property of the rules over a time horizon,
not of one run, and costs a scan of ``2 * TTL`` ticks per lease.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from leasefence.conformance.refinement import GenerationNames
from leasefence.impl.wire import Generation, valid_generation
from leasefence.model.check import flatten
from leasefence.model.invariants import STATE_INVARIANTS, STEP_PROPERTIES
from leasefence.model.journal import lease_work
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_UNIX
from leasefence.model.state import Coordinator, Journal, Lease, State, StateLease, Stats, get
from leasefence.model.system import (
    DISPATCH_STEPS,
    FENCE_GENERATION,
    FENCES,
    Bounds,
    deliver_result,
    dispatch_work,
    dispatches_of,
    initial_state,
    next_generation,
    reclaim_expired,
    restart_master,
)

ACTIONS = ("DispatchWork", "DeliverResult", "ReclaimExpired", "RestartMaster")

#: The invariants checked on every replayed state (see the module's notes).
TRACE_INVARIANTS = {k: v for k, v in STATE_INVARIANTS.items() if k != "NoStuckLease"}


def broken(before: State, after: State, b: Bounds) -> list[str]:
    """The invariants ``after`` breaks and the step properties ``before -> after`` breaks."""
    bad = [name for name, check in TRACE_INVARIANTS.items() if not check(after, b)]
    return bad + [name for name, step in STEP_PROPERTIES.items() if not step(before, after, b)]


class TraceFormatError(ValueError):
    """A trace line that is not valid JSON or lacks a field its event needs."""


@dataclass
class TraceReport:
    """The outcome of one validation: steps replayed, per-action counts, the first divergence."""

    steps: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    rollbacks: int = 0
    divergence: str | None = None
    line: int | None = None
    torn_tail: bool = False
    lost_steps: int = 0
    pipeline: int = 1
    fence: str = "rank"

    @property
    def ok(self) -> bool:
        return self.divergence is None


#: Model ticks per second of the implementation's clock.
TICKS_PER_SECOND = 1_000_000


def _tick(seconds: float) -> int:
    """The model tick of an implementation time (seconds)."""
    return round(seconds * TICKS_PER_SECOND)


def _within_a_tick(s: State, step: Any, reclaimed: list[str] | None) -> tuple[State, list[str]]:
    """``step`` (a state -> state function whose only time-dependent part is the TTL rule) at
    ``s.wall``, or one tick either side when that gives the work IDs ``reclaimed`` and the
    step's own tick does not (the implementation's float arithmetic at the edge of the TTL).
    Returns the state after, back at ``s.wall``, and the work IDs it reclaimed."""
    first: tuple[State, list[str]] | None = None
    for at in (s.wall, s.wall - 1, s.wall + 1):
        t = step(s._replace(wall=at, mono=at))._replace(wall=s.wall, mono=s.mono)
        gone = sorted({w for w, _ in s.journal.leases} - {w for w, _ in t.journal.leases})
        if first is None:
            first = (t, gone)
        if reclaimed is None or gone == sorted(reclaimed):
            return t, gone
    assert first is not None
    return first


def _need(event: dict[str, Any], key: str, lineno: int) -> Any:
    if key not in event:
        raise TraceFormatError(f"line {lineno}: {event.get('event')!r} event lacks field {key!r}")
    return event[key]


def parse(lines: Iterable[str]) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """The events of a trace with their line numbers; a torn (unparsable) last line is dropped
    and reported, a bad line followed by good ones raises ``TraceFormatError``."""
    events: list[tuple[int, dict[str, Any]]] = []
    bad: tuple[int, str] | None = None
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if bad is not None:
            raise TraceFormatError(
                f"line {bad[0]}: not valid JSON ({bad[1]}), and more lines follow"
            )
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as exc:
            bad = (lineno, str(exc))
            continue
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise TraceFormatError(f"line {lineno}: expected an object with an 'event' name")
        events.append((lineno, event))
    return events, bad is not None


def bounds_from_header(header: dict[str, Any]) -> Bounds:
    """Replay bounds: the header's works, tasks, ranks, TTL (in ms), pipeline depth and fence
    (depth 1 and the rank in a version-1 trace), and no exploration limits."""
    task_of = header.get("task_of")
    ranks = header.get("ranks")
    ttl = header.get("ttl")
    if (
        not isinstance(task_of, dict)
        or not isinstance(ranks, list)
        or not isinstance(ttl, int | float)
    ):
        raise TraceFormatError("the Header needs task_of (object), ranks (list) and ttl (number)")
    pipeline, fence = header.get("pipeline", 1), header.get("fence", "rank")
    if isinstance(pipeline, bool) or not isinstance(pipeline, int) or pipeline < 1:
        raise TraceFormatError(
            f"the Header's pipeline must be a whole number >= 1, not {pipeline!r}"
        )
    if fence not in FENCES:
        raise TraceFormatError(
            f"the Header's fence must be one of {', '.join(FENCES)}, not {fence!r}"
        )
    big = 10**18  # beyond any Unix time in ms: replay explores nothing, so nothing is bounded
    return Bounds(
        task_of=tuple(sorted((str(w), str(t)) for w, t in task_of.items())),
        ranks=tuple(int(r) for r in ranks),
        ttl=_tick(float(ttl)),
        max_wall=big,
        max_reboots=big,
        max_rollbacks=big,
        max_restarts=big,
        max_attempts=big,
        max_leases=big,
        max_dups=big,
        pipeline=pipeline,
        fence=fence,
    )


def _generation(ev: dict[str, Any], lineno: int) -> Generation | None:
    """The event's ``gen`` (absent or null: none)."""
    gen = ev.get("gen")
    if gen is None:
        return None
    if not valid_generation(gen):
        raise TraceFormatError(f"line {lineno}: gen must be [epoch, counter] or null, not {gen!r}")
    return (int(gen[0]), int(gen[1]))


def validate(lines: Iterable[str]) -> TraceReport:
    """Replay the trace through the model; the report names the first divergence, if any."""
    events, torn = parse(lines)
    report = TraceReport(torn_tail=torn)
    if not events or events[0][1]["event"] != "Header":
        raise TraceFormatError("a trace starts with a Header line")
    b = bounds_from_header(events[0][1])
    report.pipeline, report.fence = b.pipeline, b.fence
    names = GenerationNames()
    s: State = initial_state()
    body = events[1:]
    for lineno, ev in body:
        name = ev["event"]
        if name == "Header":
            # A restarted master appends its own header; new work IDs join the bounds.
            merged = dict(b.task_of) | {str(w): str(t) for w, t in ev.get("task_of", {}).items()}
            b = replace(b, task_of=tuple(sorted(merged.items())))
            continue
        if name not in ACTIONS:
            raise TraceFormatError(
                f"line {lineno}: unknown event {name!r} (known: {', '.join(ACTIONS)})"
            )
        now = _tick(float(_need(ev, "now", lineno)))
        if now < s.wall:
            report.rollbacks += 1
        since = s.wall
        s = s._replace(wall=now, mono=now)
        before = s
        if name == "RestartMaster" and isinstance(ev.get("recovered"), dict):
            if report.steps == 0:
                # The trace starts on existing files: its history starts from what was on disk.
                s = _adopt(s, ev["recovered"], names)
            problem, s, lost, names = _resync(s, ev["recovered"], b, names, since)
            report.lost_steps += lost
            if problem is not None:
                report.divergence, report.line = problem, lineno
                return report
        problem, s = _apply(s, name, ev, lineno, b, names)
        if problem is None and (bad := broken(before, s, b)):
            problem = (
                f"{name} is a step the model allows, but it breaks {', '.join(bad)}; state "
                f"after: {'; '.join(f'{k}={v!r}' for k, v in flatten(s).items())}"
            )
        if problem is not None:
            report.divergence, report.line = problem, lineno
            return report
        report.steps += 1
        report.counts[name] = report.counts.get(name, 0) + 1
    return report


def _apply(
    s: State,
    name: str,
    ev: dict[str, Any],
    lineno: int,
    b: Bounds,
    names: GenerationNames,
) -> tuple[str | None, State]:
    def state_text(st: State) -> str:
        return "; ".join(f"{k}={v!r}" for k, v in flatten(st).items())

    if name == "DispatchWork":
        w, r = str(_need(ev, "w", lineno)), int(_need(ev, "r", lineno))
        if w not in b.works:
            return f"DispatchWork of {w!r}, which the Header does not list", s
        if len(dispatches_of(s, r)) >= b.pipeline:
            return (
                f"DispatchWork to rank {r}, which the model says is still busy with "
                f"{dispatches_of(s, r)} (pipeline {b.pipeline})",
                s,
            )
        refuse = ev.get("refused")
        injected = refuse if refuse in DISPATCH_STEPS[:3] else None
        model_gen = next_generation(s, b)
        out, t = dispatch_work(s, w, r, b, refuse=injected)
        if out.ok != bool(_need(ev, "ok", lineno)) or (not out.ok and out.refused != refuse):
            return (
                f"DispatchWork({w!r}, {r}): implementation ok={ev['ok']} refused={refuse!r}, "
                f"model ok={out.ok} refused={out.refused!r}; state before: {state_text(s)}"
            ), s
        if out.ok:
            try:
                names.bind(r, _generation(ev, lineno), model_gen)
            except AssertionError as exc:
                return f"DispatchWork({w!r}, {r}): {exc}", s
        return None, t
    if name == "DeliverResult":
        r, w = int(_need(ev, "r", lineno)), str(_need(ev, "w", lineno))
        reported = ev.get("reported")
        presented = _generation(ev, lineno)
        message = _message(s, r, w, presented, names, b)
        if message is None:
            return (
                f"DeliverResult({r}, {w!r}, gen={presented!r}): no such result in flight in the "
                "model (never dispatched)",
                s,
            )
        res, t = deliver_result(
            s,
            r,
            w,
            reported,
            bool(_need(ev, "ok", lineno)),
            b,
            keep=True,
            gen=message,
            presented=0 if presented is None else message,
        )
        got = (
            bool(ev.get("stale", False)),
            ev.get("task"),
            bool(ev.get("work_ok")),
            bool(ev.get("state_ok")),
        )
        want = (res.stale, res.task, res.work_ok, res.state_ok)
        if got != want:
            return (
                f"DeliverResult({r}, {w!r}, reported={reported!r}, ok={ev['ok']}): implementation "
                f"(stale, task, work_ok, state_ok)={got}, model {want}; state before: {state_text(s)}"
            ), s
        return None, t
    if name == "ReclaimExpired":
        got_list = sorted(str(x) for x in _need(ev, "reclaimed", lineno))
        t, works = _within_a_tick(s, lambda x: reclaim_expired(x, b)[1], got_list)
        if got_list != works:
            return f"ReclaimExpired: implementation reclaimed {got_list}, model {works}", s
        return None, t
    # RestartMaster: first what the new master read from disk (see _resync), then the restart
    # and its recovery (what it reclaimed is traced since format version 2).
    reclaimed = ev.get("reclaimed")
    restart_wants = None if reclaimed is None else sorted(str(x) for x in reclaimed)
    t, works = _within_a_tick(s, lambda x: restart_master(x, b), restart_wants)
    if restart_wants is not None and restart_wants != works:
        return f"RestartMaster: implementation reclaimed {restart_wants}, model {works}", s
    return None, t


def _message(
    s: State, r: int, w: str, presented: Generation | None, names: GenerationNames, b: Bounds
) -> int | None:
    """The model message a delivered result is: its generation (0: a message of ``net``, rank
    fencing), or None when the model has no such result in flight. A result that presents no
    generation under generation fencing (an old-protocol worker) is the oldest message in
    flight from ``r`` about ``w`` (any: the outcome does not depend on which)."""
    if b.fence != FENCE_GENERATION:
        return 0 if (r, w) in s.net else None
    if presented is not None:
        g = names.name(r, presented)
        return g if (r, w, g) in s.gnet else None
    mine = sorted(g for rr, ww, g in s.gnet if (rr, ww) == (r, w))
    return mine[0] if mine else None


def _disk_generation(x: list[Any], at: int) -> Generation | None:
    """The generation at position ``at`` of a recovered lease (absent in a version-1 trace)."""
    gen = x[at] if len(x) > at else None
    if gen is None:
        return None
    if not valid_generation(gen):
        raise TraceFormatError(f"a recovered lease's generation is not [epoch, counter]: {gen!r}")
    return (int(gen[0]), int(gen[1]))


def _journal_of(doc: dict[str, Any], names: GenerationNames) -> Journal:
    """The journal a restarted master read from disk, its generations named by ``names``."""
    leases = tuple(
        sorted(
            (
                str(w),
                Lease(
                    int(x[0]),
                    _tick(float(x[1])),
                    CLOCK_UNIX if x[2] == "unix" else CLOCK_LEGACY,
                    names.name(int(x[0]), _disk_generation(x, 3)),
                ),
            )
            for w, x in doc.get("leases", {}).items()
        )
    )
    attempts = tuple(sorted((str(w), int(n)) for w, n in doc.get("attempts", {}).items()))
    return Journal(leases=leases, completed=frozenset(doc.get("completed", [])), attempts=attempts)


def _adopt(s: State, recovered: dict[str, Any], names: GenerationNames) -> State:
    """The model state a trace starts from when its first step is a restart on existing files."""
    doc = recovered.get("coordinator", {})
    epoch = int(doc.get("epoch", 2)) - 1  # the new master had already loaded into the next epoch
    leases = tuple(
        sorted(
            (
                str(t),
                StateLease(int(x[0]), 0, int(x[2]), names.name(int(x[0]), _disk_generation(x, 3))),
            )
            for t, x in doc.get("leases", {}).items()
        )
    )
    stats = tuple(
        sorted(
            (str(t), Stats(int(x[0]), int(x[1]), int(x[0]), int(x[0]) + int(x[1])))
            for t, x in doc.get("stats", {}).items()
        )
    )
    coordinator = Coordinator(epoch=max(epoch, 1), leases=leases, stats=stats)
    journal = _journal_of(recovered.get("journal", {}), names)
    return s._replace(journal=journal, coordinator=coordinator)


def _reclaims_since(s: State, b: Bounds, since: int) -> list[State]:
    """ReclaimExpired at every instant from ``since`` (the last traced step) to ``s.wall`` (the
    restart) where its outcome can change (a lease's expiry), each put at ``s.wall``: a lost
    reclaim ran at its own time, when fewer leases may have expired than at the restart."""
    stamps = [x.updated for _, x in s.journal.leases] + [x.updated for _, x in s.coordinator.leases]
    instants = sorted({since, s.wall} | {u + b.ttl for u in stamps if since < u + b.ttl <= s.wall})
    out = []
    for at in instants:
        t = reclaim_expired(s._replace(wall=at, mono=at), b)[1]
        out.append(t._replace(wall=s.wall, mono=s.mono))
    return out


def _master_steps(s: State, b: Bounds, since: int | None = None) -> list[State]:
    """Every state one master step (DispatchWork, DeliverResult, ReclaimExpired) leads to, and
    for DispatchWork also the state after its journal lease alone: a master killed inside the
    transaction, before RejectDispatch gave the lease back, leaves exactly that on disk.
    ReclaimExpired is tried at every instant since ``since`` (see ``_reclaims_since``)."""
    out = _reclaims_since(s, b, s.wall if since is None else since)
    gen = next_generation(s, b)
    for r in b.ranks:
        if len(dispatches_of(s, r)) < b.pipeline:
            out += [dispatch_work(s, w, r, b)[1] for w in b.works]
            for w in b.works:
                ok, j = lease_work(s.journal, w, r, s.wall, s.mono, b.flavour, gen)
                if ok:
                    out.append(s._replace(journal=j))
    for r, w in sorted(s.net):
        for rep in (*b.tasks, None):
            out += [deliver_result(s, r, w, rep, ok, b)[1] for ok in (True, False)]
    for r, w, g in sorted(s.gnet):
        for rep in (*b.tasks, None):
            for p in (g, 0):
                out += [
                    deliver_result(s, r, w, rep, ok, b, gen=g, presented=p)[1]
                    for ok in (True, False)
                ]
    return [t for t in out if t != s]


def _coordinator_view(c: Coordinator) -> tuple[object, ...]:
    """What is compared of a coordinator: owner tokens and epochs of leases, and the booked
    counts."""
    leases = tuple((t, x.owner, x.gen, x.epoch) for t, x in c.leases)
    stats = tuple((t, x.completions, x.failures) for t, x in c.stats if x.completions or x.failures)
    return leases, stats


def _recovered_view(doc: dict[str, Any], names: GenerationNames) -> tuple[object, ...]:
    leases = tuple(
        sorted(
            (str(t), int(x[0]), names.name(int(x[0]), _disk_generation(x, 3)), int(x[2]))
            for t, x in doc.get("leases", {}).items()
        )
    )
    stats = tuple(sorted((str(t), int(x[0]), int(x[1])) for t, x in doc.get("stats", {}).items()))
    return leases, stats


def _same_journal(model: Journal, disk: Journal, before: Journal) -> bool:
    """Equal, except that a lease the step itself wrote may carry the step's own (untraced) time."""
    if model.completed != disk.completed or model.attempts != disk.attempts:
        return False
    if {w for w, _ in model.leases} != {w for w, _ in disk.leases}:
        return False
    for w, x in model.leases:
        y = get(disk.leases, w)
        assert y is not None
        if (x.owner, x.clock, x.gen) != (y.owner, y.clock, y.gen):
            return False
        if x.updated != y.updated and get(before.leases, w) == y:
            return False
    return True


def _bind_lost(t: State, recovered: dict[str, Any], names: GenerationNames) -> GenerationNames:
    """``names`` extended by the generation a lost step gave out: a lease on disk whose token
    the trace never showed, held by the same rank as the lease ``t`` (a candidate lost step)
    has under a model generation not yet named, is that generation."""
    named = copy.deepcopy(names)
    held_by: list[tuple[dict[str, Any], dict[str, Lease | StateLease]]] = [
        (recovered.get("journal", {}), dict(t.journal.leases)),
        (recovered.get("coordinator", {}), dict(t.coordinator.leases)),
    ]
    for doc, leases in held_by:
        for key, x in doc.get("leases", {}).items():
            gen, held = _disk_generation(x, 3), leases.get(str(key))
            if gen is None or held is None or held.owner != int(x[0]) or held.gen <= 0:
                continue
            token = (int(x[0]), gen[0], gen[1])
            if token not in named.names and held.gen not in named.tokens:
                named.bind(int(x[0]), gen, held.gen)
    return named


def _resync(
    s: State,
    recovered: dict[str, Any],
    b: Bounds,
    names: GenerationNames,
    since: int | None = None,
) -> tuple[str | None, State, bool, GenerationNames]:
    """Check what a restarted master read from disk against the model.

    A master killed with SIGKILL may have made its last step durable (journal first, then the
    coordinator) without tracing it. The disk state must then be the model's state after one
    step the model allows from the last traced state, or a prefix of one (the journal part done,
    the coordinator part not yet). Anything else is a divergence. ``since`` is the clock of the
    last traced step (a lost step ran between it and the restart). Returns the names of
    generations with the lost step's, if any, added.
    """
    disk_doc = recovered.get("journal", {})
    coordinator_doc = recovered.get("coordinator", {})
    probe = copy.deepcopy(names)
    disk_j = _journal_of(disk_doc, probe)
    disk_c = _recovered_view(coordinator_doc, probe)
    if _same_journal(s.journal, disk_j, s.journal) and _coordinator_view(s.coordinator) == disk_c:
        return None, s, False, names
    for t in _master_steps(s, b, since):
        named = _bind_lost(t, recovered, names)
        disk_j = _journal_of(disk_doc, named)
        disk_c = _recovered_view(coordinator_doc, named)
        if not _same_journal(t.journal, disk_j, s.journal):
            continue
        if _coordinator_view(t.coordinator) == disk_c:
            return None, t._replace(journal=disk_j), True, named
        if _coordinator_view(s.coordinator) == disk_c:
            return None, s._replace(journal=disk_j), True, named
    return (
        (
            "RestartMaster: the state read from disk is neither the model's state nor one step the "
            f"model allows away from it; disk journal {disk_j!r}, disk coordinator {disk_c!r}; "
            f"model: {'; '.join(f'{k}={v!r}' for k, v in flatten(s).items())}"
        ),
        s,
        False,
        names,
    )
