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
from dataclasses import dataclass
from pathlib import Path

from leasefence.conformance import strategies as gen
from leasefence.conformance.tracecheck import validate
from leasefence.impl.master import Master, ResultOutcome, pending_only
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
from leasefence.impl.wire import Rank, Result, Tag, Work, WorkId
from leasefence.impl.workload import Outcome, WorkerFn
from leasefence.model.system import Bounds


class LoopFailure(AssertionError):
    """The dispatch loop at a replayed state did something the model does not allow."""


@dataclass(frozen=True)
class LoopProfile:
    """One configuration of the loop and its workers.

    ``pipeline``/``fence``/``group_commit``/``depth_by_ttl``: the master's (``Master.open``).
    ``failing``: the catalogue items (by index) whose worker always fails (given up after
    ``max_failures``). ``invalid``: items always answered with a malformed RESULT naming the
    work (charged at expiry, given up after ``max_invalid``). ``late``: items whose first
    answer is held past the TTL (reclaimed, then the late result is refused). ``restart``: the
    loop restarts the master inside the job after this many dispatch rounds that sent work.
    ``reverse``: a candidate policy that offers the pending items last first (the general
    ``dispatch_pending`` path)."""

    name: str
    pipeline: int = 1
    fence: str | None = None
    group_commit: bool = False
    depth_by_ttl: bool = False
    failing: tuple[int, ...] = ()
    invalid: tuple[int, ...] = ()
    late: tuple[int, ...] = ()
    restart: int | None = None
    reverse: bool = False


#: The profiles run at each kind of state: ``leasefence run``'s own configuration (group commit,
#: depth by TTL, generation fence at depth 16), F314's depth 1, and the faulty workers.
PROFILES = (
    LoopProfile("run", pipeline=16, group_commit=True, depth_by_ttl=True, restart=1),
    LoopProfile("depth 1, faulty workers", failing=(0,), invalid=(2,), late=(1,), reverse=True),
    LoopProfile("depth 2, faulty workers", pipeline=2, failing=(1,), invalid=(0,), late=(2,)),
)


def _reverse(pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
    return pending[::-1]


class _Hooks(DispatchHooks):
    """Restart inside the job once, after ``after`` rounds that sent work."""

    def __init__(self, after: int | None) -> None:
        self.after = after
        self.rounds = 0
        self.restarts = 0
        self.results = 0

    def restart_due(self, master: Master, sent: Sequence[tuple[Rank, Work]]) -> bool:
        if self.after is None or not sent:
            return False
        self.rounds += 1
        return self.rounds == self.after and not self.restarts

    def on_restart(self, old: Master, new: Master) -> None:
        self.restarts += 1

    def on_result(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        self.results += 1


def _workers(profile: LoopProfile, ttl: float) -> tuple[WorkerFn, Respond]:
    """The worker function and ``respond`` hook of ``profile``."""
    works = [i.work_id for i in gen.CATALOGUE]
    failing = {works[i] for i in profile.failing}
    invalid = {works[i] for i in profile.invalid}
    late = {works[i] for i in profile.late}

    def worker(work: Work) -> Outcome:
        return Outcome(work.work_id not in failing, 1.0, {})

    def respond(result: Result, rank: int, attempt: int) -> list[Reply]:
        tag, data = encode_result(result)
        if result.work_id in invalid:
            doc = json.loads(data)
            doc["ok"] = "yes"  # not a boolean: refused by the decoder, the work ID readable
            return [Reply(int(Tag.RESULT), json.dumps(doc).encode())]
        if result.work_id in late and attempt == 0:
            return [Reply(tag, data, hold=3 * ttl + 1)]
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
        clock = ManualClock(float(now))
        master = _run(j, s, t, clock, bounds, profile)
        with t.open(encoding="utf-8") as fh:
            report = validate(fh)
        if not report.ok:
            raise LoopFailure(
                f"loop {profile.name!r} from tick {now}: the trace does not validate at line "
                f"{report.line}: {report.divergence}"
            )
    return master


def _run(
    journal: Path,
    snapshot: Path,
    trace_path: Path,
    clock: ManualClock,
    bounds: Bounds,
    profile: LoopProfile,
) -> Master:
    worker, respond = _workers(profile, bounds.ttl)
    transport = InProcessTransport(worker, bounds.ranks, respond=respond, clock=clock)
    fence = profile.fence or ("generation" if profile.pipeline > 1 else "rank")
    trace = TraceWriter(
        trace_path,
        ttl=bounds.ttl,
        ranks=bounds.ranks,
        task_of={str(i.work_id): str(i.state_task_id) for i in gen.CATALOGUE},
        pipeline=profile.pipeline,
        fence=fence,
    )
    hooks = _Hooks(profile.restart)
    master = Master.open(
        journal,
        snapshot,
        gen.CATALOGUE,
        ttl=bounds.ttl,
        clock=clock,
        trace=trace,
        reservation_limits=gen.RESERVATION_LIMITS,
        pipeline=profile.pipeline,
        fence=fence,
        candidates=_reverse if profile.reverse else pending_only,
        group_commit=profile.group_commit,
        depth_by_ttl=profile.depth_by_ttl,
    )
    try:
        master = master_dispatch(master, transport, poll=1.0, hooks=hooks)
        left = master.unfinished()
        if master.counters.duplicate_completions:
            raise LoopFailure(f"loop {profile.name!r}: a work item was completed twice")
        if left:
            raise LoopFailure(f"loop {profile.name!r}: ended with {left} neither done nor given up")
        if profile.restart is not None and hooks.rounds >= profile.restart and not hooks.restarts:
            raise LoopFailure(f"loop {profile.name!r}: the restart inside the job did not happen")
    finally:
        master.close()
        trace.close()
    return master
