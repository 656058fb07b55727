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
pairs every generation with the model's (``generations.GenerationNames``). A result is then the
message of the generation it presents; one that presents none (an old-protocol worker) is a
message in flight from its rank about its work.

The network may duplicate any result, so replay delivers every result as the model's
duplicating delivery (``keep``): its message stays in flight. Which copy a trace line was is
then never guessed, and no behaviour of the implementation is refused for a guess. A result
the model has no message for (work never dispatched to that rank, or a generation never
given out) is judged as the model's DeliverResult would judge it: the master must refuse it,
and the refusal changes nothing; one the implementation accepted is a divergence.

The trace is read by ``conformance.traceformat`` (the parser the campaign's ledger uses too),
which types and checks every field; replay dispatches each step from ``REPLAY``, one function
per traced event, and checks invariants in ``check_invariants`` alone.

Every replayed state is also checked against the invariants, and every step against the step
properties (``model.invariants``, in their incremental form ``model.incremental``: the same
verdicts reading only what a step changed, so replay is linear in the trace), so a trace the model allows but that breaks L1-L7 (a run of
a flavour or bounds under which the protocol is unsafe, such as rank fencing at depth 2) is
reported too. ``NoStuckLease`` reads the leases alone (at most a few per rank) and asks each
``rules.reclaimable_within``, the closed form of its scan of ``2 * TTL`` ticks.
"""

from __future__ import annotations

import copy
import gc
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from leasefence.conformance.generations import GenerationNames
from leasefence.conformance.traceformat import (
    ACTIONS,
    DeliverResult,
    DispatchWork,
    Header,
    JournalLease,
    ReclaimExpired,
    Recovered,
    RestartMaster,
    Step,
    Trace,
    TraceFormatError,
    parse,
)
from leasefence.impl.generation import Generation
from leasefence.model import incremental
from leasefence.model.invariants import SYSTEM_STEP_PROPERTIES
from leasefence.model.journal import lease_work
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_UNIX
from leasefence.model.state import (
    Coordinator,
    Journal,
    Lease,
    State,
    StateLease,
    Stats,
    as_ids,
    as_map,
    get,
)
from leasefence.model.system import (
    DISPATCH_STEPS,
    FENCE_GENERATION,
    Bounds,
    deliver_result,
    dispatch_count,
    dispatch_work,
    dispatches_of,
    initial_state,
    next_generation,
    reclaim_expired,
    restart_master,
)

__all__ = ["ACTIONS", "TraceFormatError", "TraceReport", "validate"]


#: The invariants and step properties a replayed step is checked against: all but the
#: whole-system step properties, which a trace's compound steps do not have.
_BROKEN = incremental.Checker(skip=SYSTEM_STEP_PROPERTIES)


def broken(before: State, after: State, b: Bounds, since: State | None = None) -> list[str]:
    """The invariants ``after`` breaks and the step properties ``before -> after`` breaks (see
    ``_BROKEN``), given that ``since`` (if any, the last state checked under ``b``) keeps every
    invariant."""
    return _BROKEN(before, after, b, since)


def check_invariants(
    name: str, before: State, after: State, b: Bounds, since: State | None = None
) -> str | None:
    """The one place a replayed step is checked against the invariants and step properties:
    the divergence to report when ``before -> after`` (a step ``name`` the model allows)
    breaks any, else None. ``since``: as for ``broken``."""
    bad = _BROKEN(before, after, b, since)
    if not bad:
        return None
    return (
        f"{name} is a step the model allows, but it breaks {', '.join(bad)}; state "
        f"after: {state_text(after)}"
    )


class _Record:
    """``__repr__`` and ``__eq__`` as a dataclass's, over the attributes named in ``_fields``.
    TraceReport and Replay are plain classes: creating a dataclass costs ~2 million
    instructions at import, paid by every ``trace check``."""

    _fields: tuple[str, ...] = ()

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{self.__class__.__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return tuple(getattr(self, k) for k in self._fields) == tuple(
            getattr(other, k) for k in self._fields
        )


class TraceReport(_Record):
    """The outcome of one validation: steps replayed, per-action counts, the first divergence."""

    _fields: tuple[str, ...] = (
        "steps",
        "counts",
        "rollbacks",
        "divergence",
        "line",
        "torn_tail",
        "lost_steps",
        "crashes",
        "pipeline",
        "fence",
    )

    def __init__(
        self,
        steps: int = 0,
        counts: dict[str, int] | None = None,
        rollbacks: int = 0,
        divergence: str | None = None,
        line: int | None = None,
        torn_tail: bool = False,
        lost_steps: int = 0,
        crashes: dict[str, int] | None = None,
        pipeline: int = 1,
        fence: str = "rank",
    ) -> None:
        self.steps = steps
        self.counts: dict[str, int] = {} if counts is None else counts
        self.rollbacks = rollbacks
        self.divergence = divergence
        self.line = line
        self.torn_tail = torn_tail
        self.lost_steps = lost_steps
        self.crashes: dict[str, int] = {} if crashes is None else crashes
        self.pipeline = pipeline
        self.fence = fence

    @property
    def ok(self) -> bool:
        return self.divergence is None


#: Model ticks per second of the implementation's clock.
TICKS_PER_SECOND = 1_000_000


def tick(seconds: float) -> int:
    """The model tick of an implementation time (seconds)."""
    return round(seconds * TICKS_PER_SECOND)


def state_text(s: State) -> str:
    # Imported here: only a divergence's message needs it, and model.check's dataclasses cost
    # every trace check ~7 million instructions at import.
    from leasefence.model.check import flatten

    return "; ".join(f"{k}={v!r}" for k, v in flatten(s).items())


def bounds_from_header(header: Header) -> Bounds:
    """Replay bounds: the header's works, tasks, ranks, TTL (in ticks), pipeline depth and
    fence, and no exploration limits."""
    big = 10**18  # beyond any Unix time in ticks: replay explores nothing, so nothing is bounded
    return Bounds(
        task_of=tuple(sorted(header.task_of.items())),
        ranks=header.ranks,
        ttl=tick(header.ttl),
        max_wall=big,
        max_reboots=big,
        max_rollbacks=big,
        max_restarts=big,
        max_attempts=big,
        max_leases=big,
        max_dups=big,
        pipeline=header.pipeline,
        fence=header.fence,
        gen_base=big,  # a rank's generation counter grows with the run
    )


#: ``tuple.__new__``: ``_new(State, fields)`` builds a State from its fields in order, as
#: ``State(*fields)`` does without its keyword handling (``Replay.tick``, at every step).
_new = tuple.__new__


class Replay(_Record):
    """The model's side of a replay in progress: bounds, state, the pairing of generations,
    the clock of the last traced step (``since``), and what was counted so far."""

    _fields: tuple[str, ...] = (
        *("b", "s", "names", "since", "steps", "rollbacks", "lost_steps", "crashes", "lost"),
    )

    def __init__(
        self,
        b: Bounds,
        s: State | None = None,
        names: GenerationNames | None = None,
        since: int = 0,
        steps: int = 0,
        rollbacks: int = 0,
        lost_steps: int = 0,
        crashes: dict[str, int] | None = None,
        lost: tuple[str, State] | None = None,
    ) -> None:
        self.b = b
        self.s: State = initial_state() if s is None else s
        self.names: GenerationNames = GenerationNames() if names is None else names
        self.since = since
        self.steps = steps
        self.rollbacks = rollbacks
        self.lost_steps = lost_steps
        self.crashes: dict[str, int] = {} if crashes is None else crashes
        #: A whole step lost to a kill and replayed at the restart that read it from disk: its
        #: name and the state after it (``validate`` checks it as a step of its own, before the
        #: restart).
        self.lost = lost

    def join(self, header: Header) -> None:
        """A restarted master appends its own Header: its work IDs join the bounds."""
        merged = dict(self.b.task_of) | header.task_of
        self.b = replace(self.b, task_of=tuple(sorted(merged.items())))

    def tick(self, now: float) -> None:
        """Move the model's clocks to a step's ``now`` (a step back is a rollback)."""
        at = round(now * TICKS_PER_SECOND)
        s = self.s
        if at < s.wall:
            self.rollbacks += 1
        self.since = s.wall
        self.s = _new(State, (at, at, *s[2:]))  # s._replace(wall=at, mono=at)

    def apply(self, ev: Step) -> str | None:
        """Replay one step by its event's function (``REPLAY``); the divergence, or None."""
        return REPLAY[ev.event](self, ev)


# -- one replay function per traced event (CCF's Traceccfraft.tla has one Is<Event> each) ------


#: The dispatch steps a run's fault injection may refuse (the reservations, before any lease).
_RESERVATIONS = DISPATCH_STEPS[:3]


def replay_dispatch_work(rp: Replay, ev: DispatchWork) -> str | None:
    """DispatchWork(w, r): granted, or refused at the same step, as the model decides."""
    s, b, w, r = rp.s, rp.b, ev.w, ev.r
    if w not in b.work_set:
        return f"DispatchWork of {w!r}, which the Header does not list"
    if dispatch_count(s, r) >= b.pipeline:
        return (
            f"DispatchWork to rank {r}, which the model says is still busy with "
            f"{dispatches_of(s, r)} (pipeline {b.pipeline})"
        )
    injected = ev.refused if ev.refused in _RESERVATIONS else None
    model_gen = next_generation(s, r, b)
    out, t = dispatch_work(s, w, r, b, refuse=injected)
    if out.ok != ev.ok or out.refused != ev.refused:
        return (
            f"DispatchWork({w!r}, {r}): implementation ok={ev.ok} refused={ev.refused!r}, "
            f"model ok={out.ok} refused={out.refused!r}; state before: {state_text(s)}"
        )
    if out.ok:
        try:
            rp.names.bind(r, ev.gen, model_gen)
        except AssertionError as exc:
            return f"DispatchWork({w!r}, {r}): {exc}"
    rp.s = t
    return None


def replay_deliver_result(rp: Replay, ev: DeliverResult) -> str | None:
    """DeliverResult(r, w, ...): the model's decision on the same result must be the
    implementation's. A result the model has no message for (never dispatched) is accepted
    only when refused, and changes nothing, as the master's refusal does."""
    s, b, r, w = rp.s, rp.b, ev.r, ev.w
    message = _message(s, r, w, ev.gen, rp.names, b)
    gen = message if message is not None else _unsent(r, ev.gen, rp.names, b)
    res, t = deliver_result(
        s,
        r,
        w,
        ev.reported,
        ev.ok,
        b,
        keep=True,
        gen=gen,
        presented=0 if ev.gen is None else gen,
    )
    got = (ev.stale, ev.task, ev.work_ok, ev.state_ok)
    want = (res.stale, res.task, res.work_ok, res.state_ok)
    if message is None and (got != want or res.work_ok or res.state_ok):
        return (
            f"DeliverResult({r}, {w!r}, gen={ev.gen!r}): no such result in flight in the "
            f"model (never dispatched), and the implementation did not refuse it as the model "
            f"would: implementation (stale, task, work_ok, state_ok)={got}, model {want}"
        )
    if got != want:
        return (
            f"DeliverResult({r}, {w!r}, reported={ev.reported!r}, ok={ev.ok}): implementation "
            f"(stale, task, work_ok, state_ok)={got}, model {want}; state before: {state_text(s)}"
        )
    if message is not None:
        rp.s = t
    return None


def replay_reclaim_expired(rp: Replay, ev: ReclaimExpired) -> str | None:
    """ReclaimExpired: the model reclaims the same work IDs (within a tick of the TTL)."""
    got = sorted(ev.reclaimed)
    t, works = _within_a_tick(rp.s, lambda x: reclaim_expired(x, rp.b)[1], got)
    if got != works:
        return f"ReclaimExpired: implementation reclaimed {got}, model {works}"
    rp.s = t
    return None


def replay_restart_master(rp: Replay, ev: RestartMaster) -> str | None:
    """RestartMaster: first what the new master read from disk (``_resync``; a trace that
    starts with a restart starts from it), then the restart and its recovery (what it
    reclaimed is traced since format version 2)."""
    if ev.recovered is not None:
        if rp.steps == 0:
            rp.s = _adopt(rp.s, ev.recovered, rp.names)
        problem, rp.s, lost, rp.names = _resync(rp.s, ev.recovered, rp.b, rp.names, rp.since)
        rp.lost_steps += lost is not None
        if lost is not None and lost.startswith("Crash"):
            # The journal part of a step, then this restart: the spec's Crash action; the
            # invariants are checked on its result, the restarted state, as for any step.
            rp.crashes[lost] = rp.crashes.get(lost, 0) + 1
        elif lost is not None and problem is None:
            rp.lost = (lost, rp.s)  # a whole step, then the restart: two steps of the model
        if problem is not None:
            return problem
    wants = None if ev.reclaimed is None else sorted(ev.reclaimed)
    t, works = _within_a_tick(rp.s, lambda x: restart_master(x, rp.b), wants)
    if wants is not None and wants != works:
        return f"RestartMaster: implementation reclaimed {wants}, model {works}"
    rp.s = t
    return None


#: The replay function of each traced step, by its event (TLA+ action) name.
REPLAY: dict[str, Callable[[Replay, Any], str | None]] = {
    "DispatchWork": replay_dispatch_work,
    "DeliverResult": replay_deliver_result,
    "ReclaimExpired": replay_reclaim_expired,
    "RestartMaster": replay_restart_master,
}
assert tuple(REPLAY) == ACTIONS, "one replay function per traced action"
assert State._fields[:2] == ("wall", "mono"), "Replay.tick builds a State by position"


def validate(lines: Iterable[str] | Trace) -> TraceReport:
    """Replay the trace (text lines, or one ``traceformat.parse`` read) through the model; the
    report names the first divergence, if any.

    Python's cyclic garbage collector is paused while it runs (and restored as it was): the
    parsed events and the model's states hold no reference cycles, and each full collection
    reads every object the run has built, about a fifth of the time of a 10⁵-item trace."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _validate(lines)
    finally:
        if enabled:
            gc.enable()


def _validate(lines: Iterable[str] | Trace) -> TraceReport:
    trace = lines if isinstance(lines, Trace) else parse(lines)
    header = trace.header
    rp = Replay(bounds_from_header(header))
    report = TraceReport(torn_tail=trace.torn_tail, pipeline=header.pipeline, fence=header.fence)
    checked: State | None = None  # the last state checked under the current bounds
    counts = report.counts
    events = iter(trace.events)
    next(events)  # the Header, read above
    for ev in events:
        if isinstance(ev, Header):
            rp.join(ev)
            checked = None
            continue
        rp.tick(ev.now)
        before = rp.s
        name = ev.event
        problem = REPLAY[name](rp, ev)  # rp.apply(ev)
        if problem is None and rp.lost is not None:
            # A step lost to a kill, replayed at this restart: checked as the step it was (its
            # properties hold of it alone, not of it and the restart as one step).
            (name, mid), rp.lost = rp.lost, None
            if _BROKEN(before, mid, rp.b, checked):
                problem = check_invariants(
                    f"{name} (lost, read from disk at the restart)", before, mid, rp.b, checked
                )
            before = checked = mid
        if problem is None:
            after = rp.s
            if _BROKEN(before, after, rp.b, checked):
                problem = check_invariants(name, before, after, rp.b, checked)
        if problem is not None:
            report.rollbacks, report.lost_steps = rp.rollbacks, rp.lost_steps
            report.crashes = dict(rp.crashes)
            report.divergence, report.line = problem, ev.line
            return report
        checked = rp.s
        rp.steps += 1
        counts[name] = counts.get(name, 0) + 1
    report.steps, report.rollbacks, report.lost_steps = rp.steps, rp.rollbacks, rp.lost_steps
    report.crashes = dict(rp.crashes)
    return report


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


def _unsent(r: int, presented: Generation | None, names: GenerationNames, b: Bounds) -> int:
    """The model generation a result no dispatch sent presents: the name of its token (a
    fresh one, which no lease holds, for a token never dispatched), 0 when it presents none or
    under rank fencing."""
    return names.name(r, presented) if b.fence == FENCE_GENERATION else 0


def _journal_of(lease: JournalLease, names: GenerationNames) -> Lease:
    return Lease(
        lease.owner,
        tick(lease.updated),
        CLOCK_UNIX if lease.clock == "unix" else CLOCK_LEGACY,
        names.name(lease.owner, lease.gen),
    )


def journal_of(recovered: Recovered, names: GenerationNames) -> Journal:
    """The journal a restarted master read from disk, its generations named by ``names``."""
    j = recovered.journal
    return Journal(
        leases=as_map((w, _journal_of(x, names)) for w, x in j.leases.items()),
        completed=as_ids(j.completed),
        attempts=as_map(j.attempts),
    )


def _adopt(s: State, recovered: Recovered, names: GenerationNames) -> State:
    """The model state a trace starts from when its first step is a restart on existing files."""
    doc = recovered.coordinator
    epoch = doc.epoch - 1  # the new master had already loaded into the next epoch
    leases = as_map(
        (t, StateLease(x.owner, 0, x.epoch, names.name(x.owner, x.gen)))
        for t, x in doc.leases.items()
    )
    stats = as_map((t, Stats(c, f, c, c + f)) for t, (c, f) in doc.stats.items())
    coordinator = Coordinator(epoch=max(epoch, 1), leases=leases, stats=stats)
    return s._replace(journal=journal_of(recovered, names), coordinator=coordinator)


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


def _master_steps(s: State, b: Bounds, since: int | None = None) -> list[tuple[str, State]]:
    """Every state one master step (DispatchWork, DeliverResult, ReclaimExpired) leads to, with
    the step's name, and for DispatchWork also the state after its journal lease alone
    (CrashDispatchWork): a master killed inside the transaction, before RejectDispatch gave the
    lease back, leaves exactly that on disk. ReclaimExpired is tried at every instant since ``since`` (see
    ``_reclaims_since``)."""
    out = [("ReclaimExpired", t) for t in _reclaims_since(s, b, s.wall if since is None else since)]
    for r in b.ranks:
        gen = next_generation(s, r, b)
        if dispatch_count(s, r) < b.pipeline:
            out += [("DispatchWork", dispatch_work(s, w, r, b)[1]) for w in b.works]
            for w in b.works:
                ok, j = lease_work(s.journal, w, r, s.wall, s.mono, b.flavour, gen)
                if ok:
                    out.append(("CrashDispatchWork", s._replace(journal=j)))
    for r, w in sorted(s.net):
        for rep in (*b.tasks, None):
            out += [
                ("DeliverResult", deliver_result(s, r, w, rep, ok, b)[1]) for ok in (True, False)
            ]
    for r, w, g in sorted(s.gnet):
        for rep in (*b.tasks, None):
            for p in (g, 0):
                out += [
                    ("DeliverResult", deliver_result(s, r, w, rep, ok, b, gen=g, presented=p)[1])
                    for ok in (True, False)
                ]
    return [(name, t) for name, t in out if t != s]


def _coordinator_view(c: Coordinator) -> tuple[object, ...]:
    """What is compared of a coordinator: owner tokens and epochs of leases, and the booked
    counts."""
    leases = tuple((t, x.owner, x.gen, x.epoch) for t, x in c.leases)
    stats = tuple((t, x.completions, x.failures) for t, x in c.stats if x.completions or x.failures)
    return leases, stats


def _recovered_view(recovered: Recovered, names: GenerationNames) -> tuple[object, ...]:
    doc = recovered.coordinator
    leases = tuple(
        sorted((t, x.owner, names.name(x.owner, x.gen), x.epoch) for t, x in doc.leases.items())
    )
    stats = tuple(sorted((t, c, f) for t, (c, f) in doc.stats.items()))
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


def _bind_lost(t: State, recovered: Recovered, names: GenerationNames) -> GenerationNames:
    """``names`` extended by the generation a lost step gave out: a lease on disk whose token
    the trace never showed, held by the same rank as the lease ``t`` (a candidate lost step)
    has under a model generation not yet named, is that generation."""
    named = copy.deepcopy(names)
    on_disk: list[tuple[dict[str, Any], dict[str, Lease | StateLease]]] = [
        (dict(recovered.journal.leases), dict(t.journal.leases)),
        (dict(recovered.coordinator.leases), dict(t.coordinator.leases)),
    ]
    for disk, leases in on_disk:
        for key, x in disk.items():
            held = leases.get(key)
            if x.gen is None or held is None or held.owner != x.owner or held.gen <= 0:
                continue
            token = (x.owner, x.gen[0], x.gen[1])
            if token not in named.names and (x.owner, held.gen) not in named.tokens:
                named.bind(x.owner, x.gen, held.gen)
    return named


def _resync(
    s: State,
    recovered: Recovered,
    b: Bounds,
    names: GenerationNames,
    since: int | None = None,
) -> tuple[str | None, State, str | None, GenerationNames]:
    """Check what a restarted master read from disk against the model.

    A master killed with SIGKILL may have made its last step durable (journal first, then the
    coordinator) without tracing it. The disk state must then be the model's state after one
    step the model allows from the last traced state, or a prefix of one (the journal part done,
    the coordinator part not yet: the spec's Crash action of that step, whose restart the
    caller replays). Anything else is a divergence. ``since`` is the clock of the last traced
    step (a lost step ran between it and the restart). Returns the name of the step lost
    (``Crash<Step>`` for a prefix; None when nothing was lost) and the names of generations
    with the lost step's, if any, added.
    """
    probe = copy.deepcopy(names)
    disk_j = journal_of(recovered, probe)
    disk_c = _recovered_view(recovered, probe)
    if _same_journal(s.journal, disk_j, s.journal) and _coordinator_view(s.coordinator) == disk_c:
        return None, s, None, names
    for name, t in _master_steps(s, b, since):
        named = _bind_lost(t, recovered, names)
        disk_j = journal_of(recovered, named)
        disk_c = _recovered_view(recovered, named)
        if not _same_journal(t.journal, disk_j, s.journal):
            continue
        if _coordinator_view(t.coordinator) == disk_c:
            return None, t._replace(journal=disk_j), name, named
        if _coordinator_view(s.coordinator) == disk_c:
            return None, s._replace(journal=disk_j), f"Crash{name.removeprefix('Crash')}", named
    return (
        (
            "RestartMaster: the state read from disk is neither the model's state nor one step the "
            f"model allows away from it; disk journal {disk_j!r}, disk coordinator {disk_c!r}; "
            f"model: {state_text(s)}"
        ),
        s,
        None,
        names,
    )
