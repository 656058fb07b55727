"""The whole protocol: the master's dispatch transaction and result handling over the journal and
the coordinator, clocks with faults, and the bounds under which it is explored exhaustively.

``successors(state, bounds)`` is the next-state relation: every enabled action with its label.
Action names are the TLA+ ones (see the mapping table in ``tla/README.md``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property

from leasefence.model import coordinator as co
from leasefence.model import journal as jo
from leasefence.model.flavours import Flavour
from leasefence.model.rules import authoritative_state_task
from leasefence.model.state import Dispatch, State, drop, get, put


@dataclass(frozen=True)
class Bounds:
    """The constants of one exploration (the TLA+ model's CONSTANTS), each a CLI flag.

    ``task_of`` maps every work ID to its state task; the default maps two work IDs to one task
    (different exact-work payloads, same state) plus one more. ``legacy_stamp`` is the monotonic
    value in legacy records: an uptime from an earlier boot, larger than any reachable one.
    ``max_attempts`` (per work ID) and ``max_leases`` (in all) bound the leases granted; they are
    a state constraint (TLC's CONSTRAINT): states beyond them are checked but not explored.
    """

    task_of: tuple[tuple[str, str], ...] = (("w1", "s1"), ("w2", "s1"), ("w3", "s2"))
    ranks: tuple[int, ...] = (1, 2)
    ttl: int = 1
    max_wall: int = 2
    max_reboots: int = 1
    max_rollbacks: int = 1
    max_restarts: int = 1
    max_attempts: int = 2
    max_leases: int = 2
    max_dups: int = 1
    flavour: Flavour = Flavour.FIXED

    @cached_property
    def works(self) -> tuple[str, ...]:
        return tuple(w for w, _ in self.task_of)

    @cached_property
    def tasks(self) -> tuple[str, ...]:
        return tuple(sorted({t for _, t in self.task_of}))

    @property
    def legacy_stamp(self) -> int:
        return self.max_wall + 1

    def task(self, work: str) -> str:
        return dict(self.task_of)[work]


#: The dispatch transaction's steps, in order; a refusal undoes the steps taken, in reverse.
DISPATCH_STEPS = (
    "reserve_target",
    "reserve_parameter",
    "reserve_algorithm",
    "lease_work",
    "lease_state",
)


@dataclass(frozen=True)
class DispatchOutcome:
    """What one dispatch attempt did: the steps taken, the step refused, and the undo order."""

    ok: bool
    taken: tuple[str, ...]
    refused: str | None
    undone: tuple[str, ...]


def initial_state() -> State:
    """Init: an empty journal and coordinator (epoch 1), no dispatch, clocks at zero."""
    return State()


def dispatch_work(
    s: State, work: str, rank: int, b: Bounds, refuse: str | None = None
) -> tuple[DispatchOutcome, State]:
    """DispatchWork(w, r). Enabled when rank ``r`` has no active dispatch.

    One compensating transaction (F313): reserve target, parameter, algorithm; lease the work in
    the journal; lease its state task in the coordinator; send. A refusal at any step runs
    RejectDispatch, which undoes the steps already taken in reverse order; nothing is sent. The
    reservations are held by the dispatch and are not part of the explored state; ``refuse``
    lets a caller refuse one reservation step. On success the master stores (w, task) for r.
    """
    task = b.task(work)
    taken: list[str] = []
    j, c = s.journal, s.coordinator
    for step in DISPATCH_STEPS:
        if step == refuse:
            ok = False
        elif step == "lease_work":
            ok, j = jo.lease_work(j, work, rank, s.wall, s.mono, b.flavour)
        elif step == "lease_state":
            ok, c = co.lease_state(c, task, rank, s.wall, s.mono, b.flavour)
        else:
            ok = True
        if not ok:
            undone = tuple(reversed(taken))
            if "lease_work" in undone:
                _, j = jo.abandon_work(j, work, rank, b.flavour)
            return DispatchOutcome(False, tuple(taken), step, undone), s._replace(journal=j)
        taken.append(step)
    return DispatchOutcome(True, tuple(taken), None, ()), s._replace(
        journal=j,
        coordinator=c,
        active=put(s.active, rank, Dispatch(work, task)),
        net=s.net | {(rank, work)},
    )


@dataclass(frozen=True)
class ResultOutcome:
    """What the master did with one result: which task it used and what each container said."""

    stale: bool
    task: str | None
    mismatch: bool
    work_ok: bool
    state_ok: bool


def deliver_result(
    s: State, rank: int, work: str, reported: str | None, ok: bool, b: Bounds, keep: bool = False
) -> tuple[ResultOutcome, State]:
    """DeliverResult(r, w, t, ok, keep). Enabled for a result in flight from ``r`` about ``w``: it
    may be late or reordered, and may report any state ID (or none: the old protocol). With
    ``keep`` (while ``dups < max_dups``) the message stays in flight: a duplicated result.

    The source rank is the fence. A result for another work ID than the rank's active dispatch is
    stale and changes nothing. Otherwise the task is ``authoritative_state_task(active, reported)``
    (L7); success completes the work lease and then the state lease, failure abandons both; each
    container refuses a rank that does not own the lease (L2). The rank's dispatch ends.
    """
    disp = get(s.active, rank)
    net, dups = (s.net, s.dups + 1) if keep else (s.net - {(rank, work)}, s.dups)
    if disp is not None and disp.work != work:
        return ResultOutcome(True, None, False, False, False), s._replace(net=net, dups=dups)
    task = authoritative_state_task(disp.task if disp else None, reported, b.flavour)
    mismatch = disp is not None and reported is not None and reported != disp.task
    j, c = s.journal, s.coordinator
    if ok:
        work_ok, j = jo.complete_work(j, work, rank, b.flavour)
        state_ok = False
        if work_ok and task is not None:
            state_ok, c = co.complete_state(c, task, rank, flavour=b.flavour)
    else:
        work_ok, j = jo.abandon_work(j, work, rank, b.flavour)
        state_ok = False
        if work_ok and task is not None:
            state_ok, c = co.abandon_state(c, task, rank)
    active = drop(s.active, rank) if disp is not None else s.active
    outcome = ResultOutcome(False, task, mismatch, work_ok, state_ok)
    return outcome, s._replace(journal=j, coordinator=c, active=active, net=net, dups=dups)


def reclaim_expired(s: State, b: Bounds) -> tuple[tuple[str, ...], State]:
    """ReclaimExpired. The master's periodic recovery: RecoverWork and RecoverStates with the TTL,
    then it forgets every dispatch whose work or task was reclaimed. Returns the reclaimed work IDs.
    """
    works, j = jo.recover_work(s.journal, b.ttl, s.wall, s.mono, b.flavour)
    tasks, c = co.recover_states(s.coordinator, b.ttl, s.wall, s.mono, b.flavour)
    active = tuple((r, d) for r, d in s.active if d.work not in works and d.task not in tasks)
    return works, s._replace(journal=j, coordinator=c, active=active)


def restart_master(s: State, b: Bounds) -> State:
    """RestartMaster. The master is killed and started again on the same journal and snapshot.

    Its memory (active dispatches) is lost; the coordinator loads into the next epoch (L6); then
    it recovers the journal and the coordinator with the TTL. Results in flight may still arrive.
    """
    c = co.restart_coordinator(s.coordinator)
    _, j = jo.recover_work(s.journal, b.ttl, s.wall, s.mono, b.flavour)
    _, c = co.recover_states(c, b.ttl, s.wall, s.mono, b.flavour)
    return s._replace(journal=j, coordinator=c, active=())


def within_constraint(s: State, b: Bounds) -> bool:
    """The state constraint (TLC's CONSTRAINT): at most ``max_attempts`` leases of one work ID
    and ``max_leases`` in all."""
    counts = [n for _, n in s.journal.attempts]
    return all(n <= b.max_attempts for n in counts) and sum(counts) <= b.max_leases


Label = tuple[str, tuple[object, ...]]


def successors(s: State, b: Bounds) -> Iterator[tuple[Label, State]]:
    """Every enabled action from ``s`` with its label ``(name, args)``, in a fixed order."""
    for r in b.ranks:
        if get(s.active, r) is None:
            for w in b.works:
                _, t = dispatch_work(s, w, r, b)
                yield ("DispatchWork", (w, r)), t
    reports: tuple[str | None, ...] = (*b.tasks, None)
    keeps = (False, True) if s.dups < b.max_dups else (False,)
    for r, w in sorted(s.net):
        for rep in reports:
            for ok in (True, False):
                for keep in keeps:
                    _, t = deliver_result(s, r, w, rep, ok, b, keep)
                    yield ("DeliverResult", (r, w, rep, ok, keep)), t
    _, t = reclaim_expired(s, b)
    yield ("ReclaimExpired", ()), t
    if s.coordinator.epoch <= b.max_restarts:
        yield ("RestartMaster", ()), restart_master(s, b)
    if s.wall < b.max_wall and s.mono < b.max_wall:
        yield ("Tick", ()), s._replace(wall=s.wall + 1, mono=s.mono + 1)
    if s.rollbacks < b.max_rollbacks:
        for to in range(s.wall):
            yield ("RollbackClock", (to,)), s._replace(wall=to, rollbacks=s.rollbacks + 1)
    if s.reboots < b.max_reboots:
        yield ("Reboot", ()), s._replace(mono=0, reboots=s.reboots + 1)
    yield ("CompactJournal", ()), s._replace(journal=jo.compact_journal(s.journal))
    for w in b.works:
        for r in b.ranks:
            ok, j = jo.legacy_record(s.journal, w, r, b.legacy_stamp)
            if ok:
                yield ("LegacyRecord", (w, r)), s._replace(journal=j)
