"""The dispatch loop at replayed states: at a state the transition replay reached, the master's
journal and snapshot are copied as they are, opened again (a restart from disk in the middle of
a path) and driven to the end by ``transport.master_dispatch``, the loop ``leasefence run``
runs, over the in-process transport with a manual clock.

The transition replay calls the master's transaction methods one model action at a time; a real
run calls them from the loop (``dispatch_pending``'s lazy queue, group commit before each WORK,
depth by TTL, reclaims every quarter TTL, malformed answers charged, items given up, restarts
inside the job). Each ``LoopProfile`` runs that loop in one configuration, with workers that
fail, answer invalidly or late, so that every branch of it runs on states the model reached.

The oracle is the model: the run's trace, which starts with what the reopened master read from
disk, is validated step by step (every invariant on every state); no work is completed twice;
and the run ends with every item completed or given up, or starved with a reason
(``Master.starved``), which a profile without a faulty candidate policy never is.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from leasefence.conformance import strategies as gen
from leasefence.conformance.refinement import persisted_coordinator, persisted_journal
from leasefence.conformance.tracecheck import validate
from leasefence.impl.journal import WorkLeaseJournal
from leasefence.impl.master import CandidatePolicy, Master, default_fence, pending_only
from leasefence.impl.trace import TraceWriter
from leasefence.impl.transport import (
    DispatchHooks,
    InProcessTransport,
    ManualClock,
    Reply,
    Respond,
    encode_result,
    master_dispatch,
)
from leasefence.impl.wire import Generation, Rank, Result, StateTaskId, Tag, Work, WorkId
from leasefence.impl.workload import Outcome, WorkerFn, WorkItem
from leasefence.model.system import Bounds


class LoopFailure(AssertionError):
    """The dispatch loop at a replayed state did something the model does not allow."""


@dataclass(frozen=True)
class LoopProfile:
    """One configuration of the loop and its workers.

    ``pipeline``/``fence``/``group_commit``/``depth_by_ttl``: the master's (``Master.open``).
    The workers, by catalogue index: ``failing`` always fail (given up after ``max_failures``);
    ``invalid`` always answer with a malformed RESULT naming the work (charged at expiry, given
    up after ``max_invalid``); ``twice`` answer their first WORK invalidly and then validly;
    ``late`` hold their first answer past the TTL (reclaimed, then the late result is refused
    or stale); ``confused`` present, to their first WORK, the generation of the WORK their rank
    received before (a generation mismatch while that dispatch is active). ``restart``: the loop restarts the master inside the job after this
    many dispatch rounds that sent work. ``reverse``: a candidate policy that offers the
    pending items last first (the general ``dispatch_pending`` path); ``starve``: items that
    policy never offers (the loop must end on ``Master.starved`` naming them). ``extra``: more
    catalogue items (each its own task and target), so the lazy queue passes over many
    finished ones. ``untraced``: the same run without a trace writer must leave files that read the
    same (the trace observes, it never decides; its group commits are smaller)."""

    name: str
    pipeline: int = 1
    fence: str | None = None
    group_commit: bool = False
    depth_by_ttl: bool = False
    failing: tuple[int, ...] = ()
    invalid: tuple[int, ...] = ()
    twice: tuple[int, ...] = ()
    late: tuple[int, ...] = ()
    confused: tuple[int, ...] = ()
    restart: int | None = None
    reverse: bool = False
    starve: tuple[int, ...] = ()
    extra: int = 0
    untraced: bool = False
    compact: bool = False
    hold: float = 0.0
    early: tuple[int, ...] = ()
    poll: float = 1.0


#: The profiles run at each kind of state: ``leasefence run``'s own configuration (group commit,
#: depth by TTL, generation fence at depth 64) on a bigger catalogue and with a restart inside
#: the job, F314's depth 1, and depth 2, with faulty workers and candidate policies.
PROFILES = (
    LoopProfile(
        "run", pipeline=64, group_commit=True, depth_by_ttl=True, extra=70, late=(0,), untraced=True
    ),
    LoopProfile("run, restarted", pipeline=64, group_commit=True, depth_by_ttl=True, restart=1),
    LoopProfile(
        "depth 1, restarted, slow workers",
        restart=1,
        twice=(3,),
        extra=4,
        hold=0.75,
        early=(2,),
        poll=0.25,
    ),
    LoopProfile("depth 1, faulty workers", failing=(0,), invalid=(2,), late=(1,), reverse=True),
    LoopProfile("depth 1, starving policy", reverse=True, starve=(3,), late=(0,)),
    LoopProfile(
        "depth 2, faulty workers",
        pipeline=2,
        failing=(1,),
        invalid=(0,),
        late=(2,),
        confused=(3,),
        compact=True,
    ),
)


def catalogue(profile: LoopProfile) -> list[WorkItem]:
    """The conformance catalogue and ``profile.extra`` items more."""
    more = [
        WorkItem(WorkId(f"{i:064x}"), StateTaskId(f"x{i}"), f"x{i}", "bound=1", "smt")
        for i in range(1, profile.extra + 1)
    ]
    return [*gen.CATALOGUE, *more]


def _policy(profile: LoopProfile, items: list[WorkItem]) -> CandidatePolicy:
    if not profile.reverse:
        return pending_only
    left_out = {items[i].work_id for i in profile.starve}

    def reverse(pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
        return [w for w in pending[::-1] if w not in left_out]

    return reverse


class _Hooks(DispatchHooks):
    """Restart inside the job once, after ``after`` rounds that sent work; under generation
    fencing, at every dispatch a master built on the same containers (what a restart without a
    new epoch would be) must not issue a generation the rank already holds a lease for."""

    def __init__(self, after: int | None, compact: bool) -> None:
        self.after = after
        self.rounds = 0
        self.restarts = 0
        self.compact = compact

    def on_progress(self, master: Master) -> None:
        journal = master.journal
        assert isinstance(journal, WorkLeaseJournal)
        if self.compact and journal.leases:
            journal.compact()
            self.compact = False

    def restart_due(self, master: Master, sent: Sequence[tuple[Rank, Work]]) -> bool:
        if self.after is None or not sent:
            return False
        self.rounds += 1
        return self.rounds == self.after and not self.restarts

    def on_restart(self, old: Master, new: Master) -> None:
        self.restarts += 1

    def on_dispatch(self, master: Master, rank: Rank, work: Work) -> None:
        if work.generation is None:
            return
        twin = Master(
            master.journal,
            master.coordinator,
            master.catalogue.values(),
            ttl=master.ttl,
            pipeline=master.pipeline,
            fence=master.fence,
        )
        issued = twin.next_generation(rank)
        assert isinstance(master.journal, WorkLeaseJournal)
        held = [x.generation for x in master.journal.leases.values() if x.owner == rank]
        if issued is None or any(g is not None and issued <= g for g in held):
            raise LoopFailure(f"a master on the same files would issue {issued} again: {held}")


def _workers(profile: LoopProfile, items: list[WorkItem], ttl: float) -> tuple[WorkerFn, Respond]:
    """The worker function and ``respond`` hook of ``profile``."""
    works = [i.work_id for i in items]
    failing = {works[i] for i in profile.failing}
    invalid = {works[i] for i in profile.invalid}
    twice = {works[i] for i in profile.twice}
    late = {works[i] for i in profile.late}
    confused = {works[i] for i in profile.confused}
    early = {works[i] for i in profile.early}
    last: dict[int, Generation | None] = {}  # the generation of each rank's previous WORK

    def worker(work: Work) -> Outcome:
        return Outcome(work.work_id not in failing, 1.0, {})

    def malformed(data: bytes) -> Reply:
        doc = json.loads(data)
        doc["ok"] = "yes"  # not a boolean: refused by the decoder, the work ID readable
        return Reply(int(Tag.RESULT), json.dumps(doc).encode())

    def respond(result: Result, rank: int, attempt: int) -> list[Reply]:
        previous = last.get(rank)
        last[rank] = result.generation
        if result.work_id in confused and previous is not None and attempt == 0:
            result = replace(result, generation=previous)
        tag, data = encode_result(result)
        if result.work_id in invalid:
            return [malformed(data)]
        if result.work_id in twice and attempt == 0:
            return [malformed(data), Reply(tag, data)]
        if result.work_id in late and attempt == 0:
            return [Reply(tag, data, hold=2 * ttl + 1)]
        if attempt == 0:
            return [Reply(tag, data, hold=profile.hold / (2 if result.work_id in early else 1))]
        return [Reply(tag, data)]

    return worker, respond


def run_loop(
    journal: Path, snapshot: Path, now: int, bounds: Bounds, profile: LoopProfile
) -> Master:
    """Copy ``journal`` and ``snapshot``, reopen them at ``now`` under ``profile`` and run the
    dispatch loop to its end; raises ``LoopFailure`` if the run breaks the model. Returns the
    (closed) master at the end."""
    with tempfile.TemporaryDirectory(prefix="leasefence-loop-", dir=str(journal.parent)) as tmp:
        j, s, t = Path(tmp) / journal.name, Path(tmp) / snapshot.name, Path(tmp) / "trace.ndjson"
        for src, dst in ((journal, j), (snapshot, s)):
            if src.exists():
                shutil.copyfile(src, dst)
        if profile.untraced:
            u = Path(tmp) / "untraced"
            u.mkdir()
            for src in (j, s):
                if src.exists():
                    shutil.copyfile(src, u / src.name)
        master = _run(j, s, t, ManualClock(float(now)), bounds, profile)
        with t.open(encoding="utf-8") as fh:
            report = validate(fh)
        if not report.ok:
            raise LoopFailure(
                f"loop {profile.name!r} from tick {now}: the trace does not validate at line "
                f"{report.line}: {report.divergence}"
            )
        if profile.untraced:
            _run(u / j.name, u / s.name, None, ManualClock(float(now)), bounds, profile)
            reads = ((persisted_journal, j), (lambda p: persisted_coordinator(p, []), s))
            for read, f in reads:
                if read(u / f.name) != read(f):
                    raise LoopFailure(
                        f"loop {profile.name!r} from tick {now}: without a trace writer the "
                        f"run left another {f.name}"
                    )
    return master


def _run(
    journal: Path,
    snapshot: Path,
    trace_path: Path | None,
    clock: ManualClock,
    bounds: Bounds,
    profile: LoopProfile,
) -> Master:
    items = catalogue(profile)
    worker, respond = _workers(profile, items, bounds.ttl)
    transport = InProcessTransport(
        worker, bounds.ranks, respond=respond, clock=clock, frame_results=True
    )
    fence = profile.fence or default_fence(profile.pipeline)
    trace = (
        None
        if trace_path is None
        else TraceWriter(
            trace_path,
            ttl=bounds.ttl,
            ranks=bounds.ranks,
            task_of={str(i.work_id): str(i.state_task_id) for i in items},
            pipeline=profile.pipeline,
            fence=fence,
        )
    )
    hooks = _Hooks(profile.restart, profile.compact)
    master = Master.open(
        journal,
        snapshot,
        items,
        ttl=bounds.ttl,
        clock=clock,
        trace=trace,
        reservation_limits=gen.RESERVATION_LIMITS,
        pipeline=profile.pipeline,
        fence=fence,
        candidates=_policy(profile, items),
        group_commit=profile.group_commit,
        depth_by_ttl=profile.depth_by_ttl,
    )
    try:
        master = master_dispatch(master, transport, poll=profile.poll, hooks=hooks)
        left = master.unfinished()
        starved = [items[i].work_id for i in profile.starve]
        starved = [w for w in starved if w in left]
        if master.counters.duplicate_completions:
            raise LoopFailure(f"loop {profile.name!r}: a work item was completed twice")
        if left != starved:
            raise LoopFailure(
                f"loop {profile.name!r}: ended with {left} neither done nor given up "
                f"(the policy starves {starved})"
            )
        if starved and master.starved() != starved:
            raise LoopFailure(f"loop {profile.name!r}: starved() does not name {starved}")
        if profile.restart is not None and hooks.rounds >= profile.restart and not hooks.restarts:
            raise LoopFailure(f"loop {profile.name!r}: the restart inside the job did not happen")
    finally:
        master.close()
        if trace is not None:
            trace.close()
    return master
