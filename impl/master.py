"""The MPI master's decisions as plain code: the dispatch transaction, result handling, recovery.

Nothing here touches MPI. ``Master`` is driven by ``transport.master_dispatch`` in a real run and
directly by the unit and conformance tests; each public step is one action of the model
(``leasefence.model.system``) and one trace event of the same name (``dispatch`` is
``DispatchWork``). The one table of actions across layers, methods and trace events included, is
``conformance/actions.py``, rendered in ``tla/README.md``.

The master is the only process that touches the journal and the snapshot. The owner fence of
every lease is the worker's MPI rank (``Status.Get_source()``), sufficient while one rank has at
most one active dispatch, which ``dispatch`` enforces at the default ``pipeline=1``.

Pipelined dispatch (issue 12): with ``pipeline=N`` a rank holds up to N dispatches at once, and
the rank alone no longer tells them apart (``leasefence model check --pipeline 2 --fence rank``
shows the counterexample). ``fence="generation"`` (the default when N > 1) gives every dispatch
a generation ``(epoch, counter)``: the counter is per rank and strictly increasing, the epoch is
the coordinator's, so a token ``(rank, epoch, counter)`` never repeats, across restarts
included. Both leases record the whole token, the WORK carries the generation, the RESULT
echoes it, and every completion must present exactly the lease's token. A RESULT without a
generation (an old-protocol worker) is settled by the master's stored view alone (its dispatch
of that rank for that work ID), as F314 settles a RESULT without a state ID.
"""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Final, Protocol

from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.errors import LeaseError, UnknownTask, UnknownWork
from leasefence.impl.errors import RankBusy as RankBusy  # re-exported: callers catch it here
from leasefence.impl.frozen import fast_init, mypyc_attr
from leasefence.impl.records import unix_stamp
from leasefence.impl.rules import authoritative_state_task
from leasefence.impl.trace import TraceWriter
from leasefence.impl.wire import Generation, Rank, Result, StateTaskId, Work, WorkId
from leasefence.impl.workload import WorkItem

log = logging.getLogger("leasefence.master")

#: The dispatch transaction's steps, in order (the model's ``DISPATCH_STEPS``); a refusal
#: undoes the steps already taken, in reverse order.
DISPATCH_STEPS: Final = (
    "reserve_target",
    "reserve_parameter",
    "reserve_algorithm",
    "lease_work",
    "lease_state",
)
#: How many of ``DISPATCH_STEPS`` are taken once the work lease, and then the state lease, is.
_WORK_LEASED: Final = DISPATCH_STEPS.index("lease_work") + 1
_STATE_LEASED: Final = DISPATCH_STEPS.index("lease_state") + 1
#: The reservation kind each reserve step takes.
RESERVATION_OF: Final = {
    "reserve_target": "target",
    "reserve_parameter": "parameter",
    "reserve_algorithm": "algorithm",
}


class Journal(Protocol):
    """What the master uses of ``impl.journal.WorkLeaseJournal``."""

    @property
    def completed(self) -> frozenset[str]: ...

    @property
    def leases(self) -> Mapping[str, object]: ...

    def lease(self, work_id: str, worker: int, generation: Generation | None = None) -> bool: ...

    def complete(
        self, work_id: str, worker: int | None = None, generation: Generation | None = None
    ) -> bool: ...

    def abandon(
        self, work_id: str, worker: int | None = None, generation: Generation | None = None
    ) -> bool: ...

    def recover(self, lease_ttl: float) -> list[str]: ...

    def close(self) -> None: ...


class Coordinator(Protocol):
    """What the master uses of ``impl.coordinator.StateShardCoordinator``."""

    def lease(self, task_id: str, worker: int, generation: Generation | None = None) -> bool: ...

    def complete(
        self,
        task_id: str,
        worker: int,
        *,
        reward: float = 0.0,
        cost: float = 0.0,
        generation: Generation | None = None,
    ) -> bool: ...

    def abandon(
        self, task_id: str, worker: int, *, cost: float = 0.0, generation: Generation | None = None
    ) -> bool: ...

    def discard(self, task_id: str, worker: int, generation: Generation | None = None) -> bool: ...

    def recover_expired(self, lease_ttl: float) -> list[str]: ...

    def active_owner(self, task_id: str) -> int | None: ...


class StepClock:
    """A clock that stands still during one master step, so that the journal, the coordinator
    and the trace all see the same ``now`` for it (the model's steps are atomic). It reads the
    base clock as the journal stamps it (``records.unix_stamp``, to 10 µs), so that the trace's
    ``now`` is the very time the journal wrote, and the coordinator writes it too."""

    def __init__(self, base: Callable[[], float] = time.time) -> None:
        self.base = base
        self._frozen: float | None = None
        self._depth = 0

    def __call__(self) -> float:
        return self._frozen if self._frozen is not None else unix_stamp(float(self.base()))

    def step(self) -> StepClock:
        """Freeze the clock for the duration of one step (re-entrant): ``with clock.step() as
        now``. The clock is its own context manager, counting how deep the steps are nested,
        rather than a generator (a step is taken on every decision; this costs a third)."""
        return self

    def __enter__(self) -> float:
        if self._depth == 0:
            self._frozen = unix_stamp(float(self.base()))
        self._depth += 1
        return self._frozen  # type: ignore[return-value]

    def __exit__(self, *exc: object) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._frozen = None


class Pace:
    """When a rank's results come (``Master._note_result``, read by ``Master.depth``): the time
    of its last one, and the mean gap between them once ``known`` (after two). One object a
    rank, its fields native when compiled (issue 19: two dictionaries of floats were four
    lookups and two floats made a result)."""

    def __init__(self, last: float) -> None:
        self.last = last
        self.gap = 0.0
        self.known = False


@mypyc_attr(allow_interpreted_subclasses=True)
class Reservations:
    """The target, parameter and algorithm pools of the dispatch transaction.

    A reservation of ``(kind, key)`` is held by one active dispatch and released when it ends.
    ``limits[kind]`` is how many dispatches may hold the same key at once (None: no limit). Only
    a limited pool counts what it holds: an unlimited one never refuses, so a count would
    decide nothing (issue 19: counting the three pools of a run, all unlimited by default, was a
    tenth of the master's time a task). A limit applies to the takes after it is set
    (``set_limit``): give a kind its limit before its reservations are taken (``Master`` takes
    its limits when made); a pool without a limit is refused one once any reservation was
    taken, since what it holds then was never counted.
    """

    KINDS: ClassVar[tuple[str, ...]] = ("target", "parameter", "algorithm")

    def __init__(self, limits: Mapping[str, int | None] | None = None) -> None:
        self._limits: dict[str, int | None] = dict.fromkeys(self.KINDS)
        self._limits.update(limits or {})
        # kind -> key -> how many dispatches hold it (never an entry at 0). Keyed by strings,
        # whose hashes they keep: keyed by ``(kind, key)`` tuples, every lookup hashed a tuple
        # and compared one (issue 19: 8,000 instructions a task, take and give back).
        self._held: dict[str, dict[str, int]] = {kind: {} for kind in self._limits}
        # Whether a pool counts or holds a count: when none does, giving back only checks
        # that each kind has a pool (issue 19: a run's pools are all unlimited by default).
        self._counting = any(limit is not None for limit in self._limits.values())
        self._took = False  # whether any reservation was ever taken (``set_limit``)

    @property
    def limits(self) -> Mapping[str, int | None]:
        """Each pool's limit (None: none), read-only: ``set_limit`` changes one."""
        return MappingProxyType(self._limits)

    def set_limit(self, kind: str, limit: int | None) -> None:
        """Give pool ``kind`` (a new one too) the limit ``limit`` (None: none) for the takes from
        now on; what it counted before is given back as before. ``ValueError`` for a limit given
        to a pool that has none once any reservation was taken: it counted none of what it
        holds, so a count from now on would be short, and a give back of an uncounted hold would
        free a counted one (found by review)."""
        if limit is not None and self._took and kind in self._limits and self._limits[kind] is None:
            raise ValueError(
                f"pool {kind!r} has no limit and reservations were taken uncounted: give it "
                "its limit before any reservation is taken"
            )
        self._limits[kind] = limit
        self._held.setdefault(kind, {})
        self._counting = self._counting or limit is not None

    def reserve(self, kind: str, key: str) -> bool:
        """Take one reservation of ``key`` in pool ``kind``; False (nothing taken) when full."""
        return self.take(((kind, key),)) == 1

    def release(self, kind: str, key: str) -> None:
        """Give back one reservation of ``key`` in pool ``kind``."""
        self.give_back(((kind, key),))

    def take(self, wanted: Sequence[tuple[str, str]]) -> int:
        """Reserve each ``(kind, key)`` of ``wanted`` in order until one is refused (its pool
        holds the key ``limits[kind]`` times already); how many were taken (all:
        ``len(wanted)``), those first ones held (a dispatch's three reservations in one call:
        ``reserve`` is this of one key)."""
        held, limits = self._held, self._limits
        self._took = True
        n = 0
        for kind, key in wanted:
            limit = limits[kind]  # (``KeyError`` for a kind with no pool)
            if limit is None:  # never refused, not counted
                n += 1
                continue
            pool = held[kind]  # (``set_limit`` makes a new kind's pool)
            count = pool.get(key, 0)
            if count >= limit:
                break
            pool[key] = count + 1
            n += 1
        return n

    def give_back(self, taken: Sequence[tuple[str, str]]) -> None:
        """Give back one reservation of each ``(kind, key)`` of ``taken``, last first
        (``release`` is this of one key); ``RuntimeError`` for one that a limited pool does not
        hold, or of a kind with no pool. An unlimited pool has nothing to give back (what it
        counted while it had a limit excepted)."""
        held, limits = self._held, self._limits
        if not self._counting:  # nothing counted: only the kinds to check
            for kind, key in taken:
                if kind not in limits:
                    raise RuntimeError(f"release of an unheld {kind} reservation {key!r}")
            return
        for kind, key in reversed(taken):
            pool = held.get(kind)
            count = pool.get(key, 0) if pool else 0  # (an unlimited pool: empty)
            if pool is not None and count == 1:
                del pool[key]
            elif pool is not None and count > 1:
                pool[key] = count - 1
            elif limits.get(kind, 0) is not None:
                raise RuntimeError(f"release of an unheld {kind} reservation {key!r}")

    def held(self) -> dict[tuple[str, str], int]:
        """Every reservation a limited pool holds now, by (kind, key) (an unlimited pool
        counts none: see the class)."""
        return {(kind, key): n for kind, pool in self._held.items() for key, n in pool.items()}


@dataclass(frozen=True, init=False)
class ActiveDispatch:
    """A rank's active dispatch: the work, the authoritative task stored at dispatch time, the
    reservations it holds (kind, key), in the order taken, and its generation (None under rank
    fencing: the rank alone is the owner token)."""

    work_id: WorkId
    task_id: StateTaskId
    reservations: tuple[tuple[str, str], ...]
    generation: Generation | None = None

    def __init__(
        self,
        work_id: WorkId,
        task_id: StateTaskId,
        reservations: tuple[tuple[str, str], ...],
        generation: Generation | None = None,
    ) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.work_id = work_id  # type: ignore[misc]
        self.task_id = task_id  # type: ignore[misc]
        self.reservations = reservations  # type: ignore[misc]
        self.generation = generation  # type: ignore[misc]


fast_init(ActiveDispatch)


#: The owner token of every lease: the rank alone (F314) or (rank, dispatch generation).
FENCE_RANK: Final = "rank"
FENCE_GENERATION: Final = "generation"
FENCES: Final = (FENCE_RANK, FENCE_GENERATION)


def default_fence(pipeline: int) -> str:
    """The owner token when none is asked for: the rank alone at depth 1 (F314), the dispatch
    generation beyond (the rank alone no longer tells a rank's dispatches apart)."""
    return FENCE_RANK if pipeline == 1 else FENCE_GENERATION


def _kw(generation: Generation | None) -> dict[str, Generation]:
    """``generation=`` for a container call, only when there is one (rank fencing calls the
    journal and the coordinator exactly as F314 does)."""
    return {} if generation is None else {"generation": generation}


@dataclass(frozen=True)
class DispatchOutcome:
    """What one dispatch attempt did (the model's ``DispatchOutcome``): the steps taken, the
    step refused, and the undo order."""

    ok: bool
    taken: tuple[str, ...]
    refused: str | None
    undone: tuple[str, ...]


#: The outcome of every dispatch that succeeds (an immutable value: one for all of them).
_DISPATCHED: Final = DispatchOutcome(True, DISPATCH_STEPS, None, ())


@dataclass(frozen=True, init=False)
class ResultOutcome:
    """What the master did with one result (the model's ``ResultOutcome``): whether it was
    stale, the task it used, whether the report disagreed with the stored ID, and what the
    journal and the coordinator said."""

    stale: bool
    task: str | None
    mismatch: bool
    work_ok: bool
    state_ok: bool

    def __init__(
        self, stale: bool, task: str | None, mismatch: bool, work_ok: bool, state_ok: bool
    ) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.stale = stale  # type: ignore[misc]
        self.task = task  # type: ignore[misc]
        self.mismatch = mismatch  # type: ignore[misc]
        self.work_ok = work_ok  # type: ignore[misc]
        self.state_ok = state_ok  # type: ignore[misc]


fast_init(ResultOutcome)


@dataclass
class Counters:
    """What ``leasefence run`` reports. ``duplicate_completions`` must stay 0."""

    dispatched: int = 0
    completed: int = 0
    failed: int = 0
    duplicate_completions: int = 0
    refused_leases: int = 0
    refused_reservations: int = 0
    wrong_owner_rejections: int = 0
    state_rejections: int = 0
    stale_results: int = 0
    id_mismatches: int = 0
    results_without_dispatch: int = 0
    malformed_messages: int = 0
    generation_mismatches: int = 0
    reclaimed_work: int = 0
    reclaimed_states: int = 0
    given_up: int = 0
    invalid_results: int = 0
    solver_cpu_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


#: Which pending work an idle rank is offered, in order: ``(pending, running)`` to candidates,
#: ``pending`` being the unfinished work no rank is running (catalogue order) and ``running`` the
#: work IDs of the active dispatches not yet offered in this round (sorted). A policy is passed
#: in; the default, ``pending_only``, offers the pending work. (A harness passes a faulty one:
#: ``leasefence.harness.faults.DuplicateCandidates``.)
CandidatePolicy = Callable[[list[WorkId], list[WorkId]], list[WorkId]]


def pending_only(pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
    """The candidate policy of a real run: the pending work, in catalogue order."""
    return pending


class Master:
    """Journal + coordinator + reservations + up to ``pipeline`` active dispatches per rank (one
    by default) + counters. ``fence`` is the owner token: ``"rank"`` (F314, the default at depth
    1) or ``"generation"`` (the default beyond)."""

    def __init__(
        self,
        journal: Journal,
        coordinator: Coordinator,
        catalogue: Iterable[WorkItem],
        *,
        ttl: float,
        clock: Callable[[], float] | StepClock = time.time,
        reservations: Reservations | None = None,
        trace: TraceWriter | None = None,
        max_failures: int = 3,
        max_invalid: int = 3,
        pipeline: int = 1,
        fence: str | None = None,
        candidates: CandidatePolicy = pending_only,
        group_commit: bool = False,
        depth_by_ttl: bool = False,
    ) -> None:
        if isinstance(pipeline, bool) or not isinstance(pipeline, int) or pipeline < 1:
            raise ValueError(f"pipeline must be a whole number >= 1, got {pipeline!r}")
        for name, limit in (("max_failures", max_failures), ("max_invalid", max_invalid)):
            # ``_finished_here`` counts on it: no item is given up before it failed once.
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
                raise ValueError(f"{name} must be a whole number >= 1, got {limit!r}")
        fence = fence if fence is not None else default_fence(pipeline)
        if fence not in FENCES:
            raise ValueError(f"fence must be one of {', '.join(FENCES)}, got {fence!r}")
        self.pipeline = pipeline
        self.fence = fence
        self.journal = journal
        self._coordinator: Coordinator = coordinator
        self._native_coordinator: StateShardCoordinator | None = None
        self.coordinator = coordinator  # (the setter: both fields)
        self.catalogue: dict[WorkId, WorkItem] = {i.work_id: i for i in catalogue}
        self.ttl = float(ttl)
        self.clock = clock if isinstance(clock, StepClock) else StepClock(clock)
        self.reservations = reservations or Reservations()
        self.trace = trace
        self.max_failures = max_failures
        self.max_invalid = max_invalid
        self.candidates = candidates
        # Group commit (issue 19): the containers keep decisions pending until ``commit()``.
        self.group_commit = group_commit
        # Depth by TTL (issue 19): beyond 2, how many of its ``pipeline`` slots a rank is given
        # follows the gap between its results (``depth``).
        self.depth_by_ttl = depth_by_ttl
        self._pace: dict[Rank, Pace] = {}
        self._slots: dict[Rank, list[ActiveDispatch]] = {}
        # (a plain dict: compiled, a Counter is indexed through its class, at every dispatch)
        self._generations: dict[Rank, int] = {}
        self.counters = Counters()
        self.failures: Counter[WorkId] = Counter()
        self.invalid: Counter[WorkId] = Counter()
        self._answered_invalidly: set[tuple[Rank, ActiveDispatch]] = set()
        self._seen_completed: set[str] = set(journal.completed)
        # The scheduling queue (``_pending``): every item that may still be pending, in
        # catalogue order read from the end (the head is ``_queue[-1]``), so that dropping
        # finished items from the part read costs what was read, never a copy of the rest;
        # ``_done`` the IDs known completed (a cache of ``journal.completed``, made exact again
        # whenever ``finished`` finds it stale).
        self._queue: list[WorkId] = list(reversed(self.catalogue))
        self._done: set[str] = set(self._seen_completed)
        self._dirty = True
        self._reopen: Callable[[], Master] | None = None
        self._resume_generations()

    @property
    def coordinator(self) -> Coordinator:
        """The state-shard coordinator the master decides with."""
        return self._coordinator

    @coordinator.setter
    def coordinator(self, coordinator: Coordinator) -> None:
        # Kept beside it, the coordinator as its own class when it is exactly one: compiled, a
        # call of it is then native, where a call through the protocol looks the method up by
        # name and matches its arguments (issue 19: 1,200 instructions a task). The same calls
        # either way; set together, so that a coordinator replaced is the one decided with.
        self._coordinator = coordinator
        self._native_coordinator = (
            coordinator if type(coordinator) is StateShardCoordinator else None
        )

    # -- dispatches and generations ---------------------------------------------------------

    @property
    def active(self) -> dict[Rank, ActiveDispatch]:
        """Each busy rank's oldest active dispatch (at depth 1: its one dispatch), as a new dict.
        Every dispatch, at any depth: ``dispatches()``."""
        return {r: ds[0] for r, ds in self._slots.items() if ds}

    def dispatches(self, rank: Rank | None = None) -> list[tuple[Rank, ActiveDispatch]]:
        """The active dispatches (of ``rank``, or of every rank), oldest first per rank."""
        ranks = [rank] if rank is not None else sorted(self._slots)
        return [(r, d) for r in ranks for d in self._slots.get(r, [])]

    def in_flight(self) -> int:
        """How many dispatches are active, every rank's together."""
        n = 0
        for ds in self._slots.values():
            n += len(ds)
        return n

    def held_by_rank(self) -> dict[Rank, int]:
        """How many active dispatches each busy rank holds: ``dispatches()`` counted by rank,
        without listing them (a count every loop turn, in the benchmark's timed part)."""
        return {r: len(ds) for r, ds in self._slots.items() if ds}

    def _resume_generations(self) -> None:
        """Resume(j, e): start each rank's counter after every generation of this epoch still
        leased on disk. With the epoch a restart advances there is none: every counter starts
        at 0. Where the epoch did not advance, a token of a lease that already ended could
        repeat (the model's ``Fence = "counter"``, where only the stale test of
        ``handle_result`` protects): hence generation fencing needs a snapshot path."""
        from leasefence.impl.journal import WorkLeaseJournal

        if not isinstance(self.journal, WorkLeaseJournal):
            return
        epoch = self._epoch()
        for x in self.journal.leases.values():
            if x.generation is not None and x.generation[0] == epoch:
                rank = Rank(x.owner)
                self._generations[rank] = max(self._generations.get(rank, 0), x.generation[1])

    def _epoch(self) -> int:
        native = self._native_coordinator
        if native is not None:
            return native.epoch
        epoch = getattr(self.coordinator, "epoch", 1)
        return epoch if isinstance(epoch, int) else 1

    def next_generation(self, rank: Rank) -> Generation | None:
        """NextGen(r): the generation of ``rank``'s next dispatch, ``(epoch, counter + 1)``; None
        under rank fencing. The counter is per rank and advances when the journal grants a lease
        with it (``dispatch``), so it strictly increases within a process; with the
        coordinator's epoch, which every restart advances, the token ``(rank, epoch, counter)``
        never repeats, across restarts included."""
        if self.fence != FENCE_GENERATION:
            return None
        return (self._epoch(), self._generations.get(rank, 0) + 1)

    def generation_counters(self) -> dict[Rank, int]:
        """Each rank's generation counter (the model's ``gens``), the ranks at 0 left out."""
        return {r: n for r, n in sorted(self._generations.items()) if n}

    #: The depth every rank is given under ``depth_by_ttl`` before its gap is known, and the
    #: least it is given after (at most ``pipeline``).
    BASE_DEPTH = 2

    def depth(self, rank: Rank) -> int:
        """How many dispatches ``rank`` is given at once (``dispatch_pending``): ``pipeline``,
        or under ``depth_by_ttl`` as many as keep its last one's wait within a quarter of the
        TTL, ``ttl / (4 * gap)`` for the rank's mean gap between results (``_note_result``),
        never below ``BASE_DEPTH`` nor above ``pipeline``. A deep pipeline wins while results
        come back fast; with long tasks a dispatch queued behind many would outlive its lease
        and be dispatched again. Fewer dispatches than ``pipeline`` is always allowed: the
        protocol, the model and the spec are unchanged."""
        if not self.depth_by_ttl or self.pipeline <= self.BASE_DEPTH:
            return self.pipeline
        pace = self._pace.get(rank)
        if pace is None or not pace.known:
            return self.BASE_DEPTH
        gap = pace.gap
        if gap <= 0.0:
            return self.pipeline
        return max(self.BASE_DEPTH, min(self.pipeline, int(self.ttl / (4.0 * gap))))

    def _note_result(self, rank: Rank) -> None:
        """A dispatch of ``rank`` ended by its result: the gap since its previous one, averaged
        (a quarter of each new gap) into the rank's mean gap (``depth``)."""
        if not self.depth_by_ttl:
            return
        now = self.clock()
        pace = self._pace.get(rank)
        if pace is None:
            self._pace[rank] = Pace(now)
            return
        last, pace.last = pace.last, now
        if now < last:
            return
        gap = now - last
        pace.gap = pace.gap + (gap - pace.gap) / 4.0 if pace.known else gap
        pace.known = True

    # -- opening, restart ------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        journal_path: str | os.PathLike[str],
        snapshot_path: str | os.PathLike[str] | None,
        catalogue: Sequence[WorkItem],
        *,
        ttl: float,
        clock: Callable[[], float] = time.time,
        trace: TraceWriter | None = None,
        reservation_limits: Mapping[str, int | None] | None = None,
        max_failures: int = 3,
        max_invalid: int = 3,
        pipeline: int = 1,
        fence: str | None = None,
        candidates: CandidatePolicy = pending_only,
        group_commit: bool = False,
        depth_by_ttl: bool = False,
    ) -> Master:
        """A master on the journal and snapshot at these paths, recovered if they exist.

        When either file already exists this is RestartMaster: the coordinator loads the
        snapshot into the next epoch (L6), then ``journal.recover(ttl)`` and
        ``coordinator.recover_expired(ttl)`` run, and the unfinished work is dispatched again.

        ``group_commit`` (issue 19): the journal (``sync="group"``) and the coordinator
        (``autosave=False``) keep each decision pending until ``commit()``, which makes all of
        them durable with one write and one fsync each; the caller commits before anything it
        decided leaves the process (``transport.master_dispatch`` does, before every WORK).
        Without it every decision is durable before its call returns. Either way the master
        returned is committed: its new epoch and its recovery are durable.
        """
        from leasefence.impl.journal import WorkLeaseJournal

        if snapshot_path is None and (fence or default_fence(pipeline)) == FENCE_GENERATION:
            raise ValueError(
                "generation fencing needs a snapshot path: its epoch keeps a dispatch "
                "generation from repeating across master restarts"
            )
        step = StepClock(clock)
        restarting = Path(journal_path).exists() and Path(journal_path).stat().st_size > 0
        restarting |= snapshot_path is not None and Path(snapshot_path).exists()
        # The journal first: its exclusive lock keeps a second master off these files before
        # the coordinator loads (and re-saves) the snapshot into a new epoch.
        journal = WorkLeaseJournal(
            journal_path, clock=step, sync="group" if group_commit else "always"
        )
        try:
            coordinator = StateShardCoordinator(
                snapshot_path, clock=step, autosave=not group_commit
            )
            master = cls(
                journal,
                coordinator,
                catalogue,
                ttl=ttl,
                clock=step,
                reservations=Reservations(reservation_limits),
                trace=trace,
                max_failures=max_failures,
                max_invalid=max_invalid,
                pipeline=pipeline,
                fence=fence,
                candidates=candidates,
                group_commit=group_commit,
                depth_by_ttl=depth_by_ttl,
            )
            if restarting:
                master.recover_after_restart()
            master.commit()
        except BaseException:
            journal.close()
            raise
        master._reopen = lambda: cls.open(
            journal_path,
            snapshot_path,
            catalogue,
            ttl=ttl,
            clock=clock,
            trace=trace,
            reservation_limits=reservation_limits,
            max_failures=max_failures,
            max_invalid=max_invalid,
            pipeline=pipeline,
            fence=fence,
            candidates=candidates,
            group_commit=group_commit,
            depth_by_ttl=depth_by_ttl,
        )
        return master

    def recover_after_restart(self) -> None:
        """RestartMaster, the part after loading: recover the journal and the coordinator with
        the TTL. (Loading the snapshot into a new epoch happened in the coordinator's
        constructor; this master's memory of dispatches is empty by construction.)"""
        recovered = self.recovered_state()
        with self.clock.step() as now:
            works = self.journal.recover(self.ttl)
            tasks = self.coordinator.recover_expired(self.ttl)
            self.counters.reclaimed_work += len(works)
            self.counters.reclaimed_states += len(tasks)
            log.info(
                "restart: reclaimed %d work leases and %d state leases", len(works), len(tasks)
            )
            if self.trace is not None:
                self.commit()  # a traced step is durable before its line (group of one)
                self.trace.restart_master(now, recovered or None, works)
        self._dirty = True

    def recovered_state(self) -> dict[str, Any]:
        """The journal and coordinator as read from disk, before recovery, for the trace
        (empty for stand-in containers, which have no disk state)."""
        from leasefence.impl.journal import WorkLeaseJournal

        j, c = self.journal, self.coordinator
        if not isinstance(j, WorkLeaseJournal) or not isinstance(c, StateShardCoordinator):
            return {}
        return {
            "journal": {
                "leases": {
                    w: [x.owner, x.updated, x.clock, x.generation] for w, x in j.leases.items()
                },
                "completed": sorted(j.completed),
                "attempts": dict(j.attempts),
            },
            "coordinator": {
                "epoch": c.epoch,
                "leases": {
                    t: [x.owner, x.updated, x.epoch, x.generation] for t, x in c.leases.items()
                },
                "stats": {
                    t: [x.completions, x.failures]
                    for t, x in c.statistics.items()
                    if x.completions or x.failures
                },
            },
        }

    def restart_master(self) -> Master:
        """RestartMaster as one call (for tests and conformance): close this master (which
        commits what is pending) and open a new
        one on the same journal and snapshot. In-flight results may still reach the new one."""
        if self._reopen is None:
            raise RuntimeError("restart_master() needs a master made by Master.open()")
        self.close()
        return self._reopen()

    def restart_in_job(self) -> Master:
        """RestartMaster inside a running job: ``restart_master()``, then the run's counters
        (summed: the new master's own start with what its recovery reclaimed) and the failures
        per work ID (toward ``max_failures`` and ``max_invalid``) carried to the new master. Its memory of dispatches
        is not carried: that is the restart. ``duplicate_completions`` stays exact: the new
        master counts against every completion in the journal."""
        new = self.restart_master()
        for f in fields(new.counters):
            total = getattr(self.counters, f.name) + getattr(new.counters, f.name)
            setattr(new.counters, f.name, total)
        new.failures = self.failures.copy()  # the run's count toward max_failures (given up)
        new.invalid = self.invalid.copy()  # and toward max_invalid
        return new

    def commit(self) -> None:
        """Make every decision so far durable (group commit, issue 19): the journal's pending
        records with one write and one fsync, then the coordinator's changes with one append
        and one fsync (journal first, as every single step writes them). Nothing to do without
        ``group_commit`` (the containers write on every change; a change one of them failed to
        write stays visible as such) or for containers that have no ``commit``."""
        if not self.group_commit:
            return
        for container in (self.journal, self.coordinator):
            commit = getattr(container, "commit", None)
            pending = getattr(container, "pending", None)
            if commit is None or pending is None:
                continue
            if pending() if callable(pending) else pending:
                commit()

    def close(self) -> None:
        """Commit what is pending, then close the journal (the coordinator holds no file).

        A commit that fails here is logged, not raised: what it held was never acknowledged
        (no WORK left for it, no completion was reported), so a restart simply decides again,
        and the error that stopped the run, if any, is not masked."""
        try:
            self.commit()
        except (LeaseError, OSError) as exc:
            log.warning("closing the master: its last decisions were not made durable: %s", exc)
        finally:
            self.journal.close()

    # -- DispatchWork ----------------------------------------------------------------------

    def dispatch(self, work_id: WorkId, rank: Rank) -> DispatchOutcome:
        """DispatchWork(w, r). Enabled when ``rank`` holds fewer than ``pipeline`` dispatches
        (at depth 1: none; else ``RankBusy``).

        One compensating transaction: reserve target, parameter, algorithm; ``journal.lease``;
        ``coordinator.lease`` of the authoritative task, both by the owner token (the rank, and
        under generation fencing ``next_generation(rank)``). Any refusal runs
        ``_reject_dispatch``, which undoes what was taken in reverse order; nothing stays
        reserved and nothing is to be sent. On success the rank's active dispatch stores (work,
        task, reservations, generation) and the caller sends the WORK message
        (``work_message``).
        """
        held = self._slots.get(rank)
        if held is not None and len(held) >= self.pipeline:
            raise RankBusy(
                f"rank {rank} still has {len(held)} active dispatch(es) (pipeline "
                f"{self.pipeline}): {held[0] if len(held) == 1 else held}"
            )
        item = self.catalogue.get(work_id)
        if item is None:
            raise UnknownWork(f"work {work_id!r} is not in the master's catalogue")
        gen = self.next_generation(rank)
        # The reservations in the order of DISPATCH_STEPS, (kind, key) each: one tuple of
        # tuples, made once for ``take`` and the dispatch (as a fixed-length tuple, mypyc would
        # pack it anew for each).
        reservations: tuple[tuple[str, str], ...] = (
            ("target", item.target),
            ("parameter", item.parameter),
            ("algorithm", item.algorithm),
        )
        done = 0  # how many of DISPATCH_STEPS were taken, in order
        with self.clock.step() as now:
            try:
                # The steps of DISPATCH_STEPS in order, each only once the one before was
                # granted (written out: a loop over the step names cost a fifth of a dispatch).
                done = self.reservations.take(reservations)
                ok = done == len(reservations)  # the reserve steps come first
                if ok:
                    # (positional: a call with keywords matches them, at each dispatch)
                    ok = self.journal.lease(work_id, rank, gen)
                if ok:
                    done = _WORK_LEASED
                    if gen is not None:
                        self._generations[rank] = gen[1]  # Bump(r): the counter advances
                    task = item.state_task_id
                    native = self._native_coordinator
                    ok = (
                        native.lease(task, rank, gen)
                        if native is not None
                        else self.coordinator.lease(task, rank, **_kw(gen))
                    )
                if ok:
                    done = _STATE_LEASED
            except BaseException:
                # An error (not a refusal) inside a step: leave nothing taken behind.
                self._reject_dispatch(item, rank, DISPATCH_STEPS[:done], gen)
                raise
            if ok:  # every step taken
                disp = ActiveDispatch(work_id, item.state_task_id, reservations, gen)
                if held:
                    held.append(disp)
                else:
                    self._slots[rank] = [disp]
                self.counters.dispatched += 1
                outcome = _DISPATCHED
            else:
                taken, step = DISPATCH_STEPS[:done], DISPATCH_STEPS[done]
                undone = self._reject_dispatch(item, rank, taken, gen)
                outcome = DispatchOutcome(False, taken, step, undone)
                if step in RESERVATION_OF:
                    self.counters.refused_reservations += 1
                else:
                    self.counters.refused_leases += 1
            if self.trace is not None:
                self.commit()  # a traced step is durable before its line (group of one)
                self.trace.dispatch_work(work_id, rank, now, outcome.ok, outcome.refused, gen)
        return outcome

    def work_message(self, rank: Rank, work_id: WorkId) -> Work:
        """The WORK message of ``rank``'s active dispatch of ``work_id``: the catalogue's payload
        with the dispatch's generation (none under rank fencing)."""
        slots = self._slots.get(rank, [])
        if slots and slots[-1].work_id == work_id:  # the dispatch just made, at once
            gen = slots[-1].generation
        else:
            gen = next((d.generation for d in slots if d.work_id == work_id), None)
        return self.catalogue[work_id].work(gen)

    def _reject_dispatch(
        self,
        item: WorkItem,
        rank: Rank,
        taken: Sequence[str],
        generation: Generation | None = None,
    ) -> tuple[str, ...]:
        """RejectDispatch: undo the steps in ``taken``, last first; returns the undo order.

        A taken work lease is given back with ``journal.abandon(work_id, worker=rank)``; a
        reservation is released. (The state lease is the last step, so it is never taken when
        a step refuses.)
        """
        undone = tuple(reversed(taken))
        for step in undone:
            if step == "lease_work":
                self.journal.abandon(item.work_id, worker=rank, **_kw(generation))
            elif step == "lease_state":
                self.coordinator.discard(item.state_task_id, rank, **_kw(generation))
            else:
                kind = RESERVATION_OF[step]
                self.reservations.release(kind, getattr(item, kind))
        return undone

    # -- DeliverResult ---------------------------------------------------------------------

    def handle_result(self, rank: Rank, result: Result) -> ResultOutcome:
        """DeliverResult(r, w, t, ok). ``rank`` is the message's source (the fence).

        The dispatch the result is for is found among the rank's: by generation when the
        result carries one under generation fencing, else by work ID (the master's stored view;
        an old-protocol result). Found but for another work ID (a generation mismatch), or not
        found while every slot of the rank holds another dispatch (at depth 1: a result for
        another work ID than the rank's active dispatch): stale, refused, counted, nothing
        changes. Otherwise the owner token is the rank with the stored generation (or, when no
        dispatch is found, the one the result carries) and the task is
        ``authoritative_state_task(active, reported)`` (L7): the stored ID wins, the report
        only detects a mismatch (a warning, counted) and is used only when the master holds no
        active ID (old protocol). Success completes the work lease and, only if that was
        accepted, the state lease; failure abandons both the same way; each needs exactly the
        lease's owner token. A refused completion is a wrong-owner rejection and changes
        nothing. The dispatch found ends and its reservations are released.
        """
        work_id, reported = result.work_id, result.state_task_id
        mine = self._slots.get(rank, [])
        presented = result.generation if self.fence == FENCE_GENERATION else None
        disp: ActiveDispatch | None = None  # oldest first: results come back in order
        if presented is not None:
            for d in mine:
                if d.generation == presented:
                    disp = d
                    break
        else:
            for d in mine:
                if d.work_id == work_id:
                    disp = d
                    break
        self.counters.solver_cpu_s += result.cpu_s
        with self.clock.step() as now:
            if (disp is not None and disp.work_id != work_id) or (
                disp is None and len(mine) >= self.pipeline
            ):
                self.counters.stale_results += 1
                if disp is not None:
                    self.counters.generation_mismatches += 1
                log.info(
                    "stale result from rank %d for %s (its active dispatches are %s): refused",
                    rank,
                    work_id[:12],
                    ", ".join(d.work_id[:12] for d in mine),
                )
                outcome = ResultOutcome(True, None, False, False, False)
            else:
                gen = disp.generation if disp is not None else presented
                outcome = self._settle(rank, result, disp, gen)
            if self.trace is not None:
                self.commit()  # a traced step is durable before its line (group of one)
                self.trace.deliver_result(
                    rank, work_id, reported, result.ok, now, outcome, presented
                )
        return outcome

    def _settle(
        self,
        rank: Rank,
        result: Result,
        disp: ActiveDispatch | None,
        gen: Generation | None = None,
    ) -> ResultOutcome:
        work_id, reported = result.work_id, result.state_task_id
        task = authoritative_state_task(disp.task_id if disp else None, reported)
        mismatch = disp is not None and reported is not None and reported != disp.task_id
        if mismatch:
            self.counters.id_mismatches += 1
            log.warning(
                "rank %d reported state task %s for work %s, but the master stored %s at "
                "dispatch; the stored ID is used (F314 L7)",
                rank,
                reported,
                work_id[:12],
                task,
            )
        if disp is None:
            self.counters.results_without_dispatch += 1
        state_ok = False
        if result.ok:
            work_ok = self.journal.complete(work_id, rank, gen)  # (positional, as the lease)
            if work_ok:
                if work_id in self._seen_completed:
                    self.counters.duplicate_completions += 1
                    log.error("work %s was completed twice", work_id)
                self._seen_completed.add(work_id)
                self._done.add(work_id)
                self.counters.completed += 1
                if task is not None:
                    native = self._native_coordinator
                    try:
                        if native is not None:
                            state_ok = native.complete(
                                task, rank, reward=1.0, cost=result.cpu_s, generation=gen
                            )
                        else:  # a stand-in: through the protocol, generation= only if fenced
                            state_ok = self.coordinator.complete(
                                task, rank, reward=1.0, cost=result.cpu_s, **_kw(gen)
                            )
                    except UnknownTask:  # (``_state``, without a closure on every result)
                        state_ok = False
        else:
            work_ok = self.journal.abandon(work_id, worker=rank, **_kw(gen))
            if work_ok:
                self.counters.failed += 1
                self.failures[work_id] += 1
                if (
                    self.failures[work_id] == self.max_failures
                    and self.invalid[work_id] < self.max_invalid
                ):
                    self.counters.given_up += 1
                    log.error("work %s failed %d times; given up", work_id, self.failures[work_id])
                if task is not None:
                    state_ok = self._state(
                        lambda t: self.coordinator.abandon(t, rank, cost=result.cpu_s, **_kw(gen)),
                        task,
                    )
        if not work_ok:
            self.counters.wrong_owner_rejections += 1
            log.info(
                "rank %d does not own work %s: its %s was refused",
                rank,
                work_id[:12],
                "completion" if result.ok else "abandon",
            )
        elif task is not None and not state_ok:
            self.counters.state_rejections += 1
            log.info("rank %d does not own state task %s: refused", rank, task[:12])
        if disp is not None:
            self._note_result(rank)
            self._end(rank, disp)
        elif work_ok or state_ok:
            # A result of a dispatch this master never made (one from before a restart) ended
            # a lease: its work may be dispatchable again.
            self._dirty = True
        return ResultOutcome(False, task, mismatch, work_ok, state_ok)

    @staticmethod
    def _state(call: Callable[[str], bool], task: str) -> bool:
        try:
            return call(task)
        except UnknownTask:
            return False  # a task the coordinator never leased: nobody owns it

    def _end(self, rank: Rank, disp: ActiveDispatch, expired: bool = False) -> None:
        """End one active dispatch of the rank and release its reservations (last taken first).
        One that ``expired`` after an invalid answer charges its item (``count_malformed``)."""
        if self._answered_invalidly and (rank, disp) in self._answered_invalidly:
            self._answered_invalidly.discard((rank, disp))
            if expired:
                self._charge_invalid(disp.work_id)
        slots = self._slots[rank]
        slots.remove(disp)
        if not slots:
            del self._slots[rank]
        self.reservations.give_back(disp.reservations)  # last taken first
        self._dirty = True

    def count_malformed(self, rank: int, error: Exception, claimed: WorkId | None = None) -> None:
        """A message that failed ``wire.decode``: logged, counted and dropped. It marks as
        answered invalidly the active dispatch of ``rank`` whose work ID it ``claimed``
        (``wire.claimed_work_id``), or, when it names none of them, every active dispatch of
        ``rank``. A marked dispatch that then ends by expiry, without a valid result, charges its
        item one invalid result (``_end``); an item charged ``max_invalid`` times is given up
        (counted, logged, never dispatched again), so a worker that always answers invalidly
        cannot keep an item in the run for ever."""
        self.counters.malformed_messages += 1
        log.warning("dropped a malformed message from rank %d: %s", rank, error)
        mine = self._slots.get(Rank(rank), [])
        named = [d for d in mine if d.work_id == claimed]
        for disp in named or mine:
            self._answered_invalidly.add((Rank(rank), disp))

    def _charge_invalid(self, work_id: WorkId) -> None:
        self.counters.invalid_results += 1
        self.invalid[work_id] += 1
        if self.invalid[work_id] == self.max_invalid and self.failures[work_id] < self.max_failures:
            self.counters.given_up += 1
            log.error(
                "work %s was answered only invalidly %d times; given up", work_id, self.max_invalid
            )

    # -- ReclaimExpired --------------------------------------------------------------------

    def reclaim_expired(self) -> list[str]:
        """ReclaimExpired. ``journal.recover(ttl)`` and ``coordinator.recover_expired(ttl)``;
        every dispatch whose work or task was reclaimed is forgotten (its rank is idle again).
        Returns the reclaimed work IDs."""
        with self.clock.step() as now:
            works = self.journal.recover(self.ttl)
            tasks = self.coordinator.recover_expired(self.ttl)
            gone_w, gone_t = set(works), set(tasks)
            for rank, disp in self.dispatches():
                if disp.work_id in gone_w or disp.task_id in gone_t:
                    log.warning(
                        "rank %d: lease of work %s expired; reclaimed", rank, disp.work_id[:12]
                    )
                    self._end(rank, disp, expired=True)
            self.counters.reclaimed_work += len(works)
            self.counters.reclaimed_states += len(tasks)
            if works or tasks:
                self._dirty = True
            if self.trace is not None:
                self.commit()  # a traced step is durable before its line (group of one)
                self.trace.reclaim_expired(now, works)
        return works

    # -- scheduling ------------------------------------------------------------------------

    def given_up(self, work_id: WorkId) -> bool:
        """Whether ``work_id`` was given up: failed ``max_failures`` times, or answered
        invalidly ``max_invalid`` times (``count_malformed``). A harness decision the model does
        not make (``tla/README.md``, Known divergences)."""
        return (
            self.failures.get(work_id, 0) >= self.max_failures
            or self.invalid.get(work_id, 0) >= self.max_invalid
        )

    def unfinished(self) -> list[WorkId]:
        """Catalogue work neither completed in the journal nor given up, in catalogue order."""
        done = self.journal.completed
        return [w for w in self.catalogue if w not in done and not self.given_up(w)]

    def _finished_here(self, work_id: WorkId) -> bool:
        if work_id in self._done:
            return True
        # ``given_up`` only when some item failed or was answered invalidly at all
        return bool(self.failures or self.invalid) and self.given_up(work_id)

    def _pending(self, skip: set[WorkId]) -> Iterator[WorkId]:
        """The unfinished work not in ``skip``, in catalogue order, read lazily from the queue:
        a round that dispatches early reads only the queue's head, so a round costs what it
        dispatches, not the catalogue's size (issue 19). Items finished for good (completed,
        given up) are dropped from the head as they are met, and from the part read so far once
        64 of them were passed over in one read (not from the whole rest: items finished after
        held ones accumulate, and filtering the rest each time made a run quadratic, 1.1 million
        ``_finished_here`` calls for 20,000 items). The queue is kept reversed, its head last:
        the part read is the list's tail, so dropping from it (and from the head) moves nothing
        else (a forward list copied the whole rest on every drop, ~6 us an item at 40,000)."""
        queue = self._queue
        while queue and self._finished_here(queue[-1]):
            queue.pop()
        passed = 0
        i = len(queue)
        while i:
            i -= 1
            w = queue[i]
            if w in skip:  # busy or tried: first, a set lookup (a read passes every busy one)
                continue
            if self._finished_here(w):
                passed += 1
                if passed == 64:
                    queue[i:] = [x for x in queue[i:] if not self._finished_here(x)]
                    passed = 0
                continue
            yield w

    @property
    def finished(self) -> bool:
        """Every catalogue item is completed (or given up) and no dispatch is active."""
        if self._slots or next(self._pending(set()), None) is not None:
            return False
        exact = self.unfinished()
        completed = self.journal.completed
        if exact and not self._done <= completed:
            # The journal completed fewer than this master saw (the cache is stale): read the
            # queue again. Only then: were the cache exact, a new round would offer the same
            # items again, and an item the queue lost (a bug) would keep the loop spinning
            # instead of ending it on ``starved``.
            self._done = set(completed)
            self._queue, self._dirty = list(reversed(self.catalogue)), True
        return not exact

    def starved(self) -> list[WorkId]:
        """The unfinished items when nothing can change any more (else ``[]``): no dispatch is
        active, nothing changed since the last round offered every idle rank its candidates,
        and no unfinished item holds a work lease or a task lease that could still expire. A
        late result cannot complete anything then (every release is fenced by the owner's
        lease), so these items would never be completed or given up: the liveness property
        ``EveryItemSettled`` (tla/LeaseFenceLive.tla) is broken, and the loop stops on it
        instead of spinning for ever (a candidate policy that leaves an item out ends here)."""
        if self._slots or self._dirty:
            return []
        left = self.unfinished()
        held = self.journal.leases
        for work_id in left:
            task = self.catalogue[work_id].state_task_id
            if work_id in held or self.coordinator.active_owner(task) is not None:
                return []
        return left

    def dispatch_pending(self, ranks: Iterable[Rank]) -> list[tuple[Rank, Work]]:
        """Give work to the idle ``ranks``; returns the (rank, WORK) messages to send.

        Runs only when something changed since the last call (a result, a reclaim, a
        restart), so a refused candidate is not retried in a loop. Each rank with a free slot
        takes the first of its candidates (``self.candidates``'s; by default the pending items,
        in catalogue order) whose transaction succeeds; a refused item stays pending and is not
        offered again in the same round. With ``pipeline > 1`` the ranks are served round by
        round, one slot each per round.
        """
        if not self._dirty:
            return []
        self._dirty = False
        ranks = list(ranks)
        free = {r: self.depth(r) - len(self._slots.get(r, [])) for r in ranks}
        # (rounds up to the most free slots of a rank, not the pipeline: a turn frees a frame's
        # slots of 128, and each round more cost a pass over the ranks)
        idle = [r for k in range(max(free.values(), default=0)) for r in ranks if free[r] > k]
        if not idle:
            return []
        busy = {d.work_id for ds in self._slots.values() for d in ds}  # every active one
        if self.candidates is pending_only:
            return self._dispatch_in_order(idle, busy)
        pending = [w for w in self.unfinished() if w not in busy]
        if not pending:
            return []
        refused: set[WorkId] = set()
        sends: list[tuple[Rank, Work]] = []
        for rank in idle:
            running = sorted({d.work_id for _, d in self.dispatches()} - refused)
            for work_id in self.candidates(pending, running):
                if work_id in refused:
                    continue
                outcome = self.dispatch(work_id, rank)
                if outcome.ok:
                    refused.add(work_id)  # taken: not for another rank
                    sends.append((rank, self.work_message(rank, work_id)))
                    break
                refused.add(work_id)
        return sends

    def _dispatch_in_order(self, idle: list[Rank], busy: set[WorkId]) -> list[tuple[Rank, Work]]:
        """``dispatch_pending`` with the default policy (``pending_only``), reading the pending
        work lazily and once per round (``_pending``): the same offers in the same order (an
        item tried in a round is never offered again in it, so each rank goes on where the
        previous one stopped), without building the list of every pending item. An item whose
        state task the coordinator holds leased now is passed over: its transaction would be
        refused at ``lease_state`` after writing a lease and its undo to the journal."""
        skip = busy  # busy, then taken or tried in this round (the caller's set, grown here)
        native = self._native_coordinator
        held = None if native is not None else getattr(self.coordinator, "active_owner", None)
        offers = self._pending(skip)
        catalogue = self.catalogue
        sends: list[tuple[Rank, Work]] = []
        for rank in idle:
            for work_id in offers:
                skip.add(work_id)
                task = catalogue[work_id].state_task_id
                if native is not None:
                    if native.active_owner(task) is not None:
                        continue
                elif held is not None and held(task) is not None:
                    continue
                if self.dispatch(work_id, rank).ok:
                    sends.append((rank, self.work_message(rank, work_id)))
                    break
            else:
                break  # nothing left to offer in this round
        return sends

    def summary(self) -> dict[str, Any]:
        """Counters plus the journal's view of the catalogue."""
        done = self.journal.completed
        return {
            **self.counters.as_dict(),
            "catalogue": len(self.catalogue),
            "completed_in_journal": sum(1 for w in self.catalogue if w in done),
        }
