"""The whole protocol: the master's dispatch transaction and result handling over the journal and
the coordinator, clocks with faults, and the bounds under which it is explored exhaustively.

``successors(state, bounds)`` is the next-state relation: every enabled action with its label.
The TLA+ spec (``tla/LeaseFence.tla``) is the norm and this module mirrors it; action names are
the TLA+ ones; the one table of actions across layers is
``conformance/actions.py``, rendered in ``tla/README.md``.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from operator import itemgetter
from typing import NamedTuple

from leasefence.model import coordinator as co
from leasefence.model import journal as jo
from leasefence.model.bounds import FENCE_COUNTER as FENCE_COUNTER
from leasefence.model.bounds import FENCE_GENERATION as FENCE_GENERATION
from leasefence.model.bounds import FENCE_RANK as FENCE_RANK
from leasefence.model.bounds import FENCES as FENCES
from leasefence.model.bounds import GEN_BASE as GEN_BASE
from leasefence.model.bounds import MODEL_FENCES as MODEL_FENCES
from leasefence.model.bounds import Bounds as Bounds
from leasefence.model.flavours import Flavour
from leasefence.model.rules import authoritative_state_task
from leasefence.model.state import (
    Coordinator,
    Dispatch,
    Ids,
    Journal,
    Map,
    State,
    Stats,
    add,
    as_map,
    discard,
    edited,
    get,
    put,
)

#: The dispatch transaction's steps, in order; a refusal undoes the steps taken, in reverse.
DISPATCH_STEPS = (
    "reserve_target",
    "reserve_parameter",
    "reserve_algorithm",
    "lease_work",
    "lease_state",
)


class DispatchOutcome(NamedTuple):
    """What one dispatch attempt did: the steps taken, the step refused, and the undo order."""

    ok: bool
    taken: tuple[str, ...]
    refused: str | None
    undone: tuple[str, ...]


def initial_state() -> State:
    """Init: an empty journal and coordinator (epoch 1), no dispatch, clocks at zero."""
    return State()


_second = itemgetter(1)


def _stretch(active: tuple[tuple[int, Dispatch], ...], rank: int) -> tuple[int, int]:
    """Where ``rank``'s dispatches lie in ``active`` (sorted by rank first): the slice from
    ``(rank,)`` to ``(rank + 1,)``."""
    i = bisect_left(active, (rank,))
    return i, bisect_left(active, (rank + 1,), i)


def dispatches_of(s: State, rank: int) -> tuple[Dispatch, ...]:
    """The active dispatches of ``rank`` (at most ``Bounds.pipeline``), in sorted order."""
    i, j = _stretch(s.active, rank)
    return tuple(map(_second, s.active[i:j]))


def dispatch_count(s: State, rank: int) -> int:
    """Cardinality(Slots(r)): how many dispatches ``rank`` holds (``len(dispatches_of(s, rank))``
    without building them)."""
    i, j = _stretch(s.active, rank)
    return j - i


def gen_epoch(c: Coordinator, b: Bounds) -> int:
    """GenEpoch(c): the epoch a generation carries, the coordinator's; 1 under ``"counter"``."""
    return 1 if b.fence == FENCE_COUNTER else c.epoch


def next_generation(s: State, rank: int, b: Bounds) -> int:
    """NextGen(r): the generation of ``rank``'s next dispatch, 0 under rank fencing.

    As ``Master.next_generation``: the coordinator's epoch with the rank's counter plus one,
    ``epoch * GEN_BASE + counter``. The counter advances when the journal grants a lease with
    it (``bump``), lives in the master's memory and restarts at a restart
    (``resume_generations``); the epoch, which every restart advances, keeps a token from
    repeating across restarts.
    """
    if not b.generations:
        return 0
    return gen_epoch(s.coordinator, b) * b.gen_base + (get(s.gens, rank) or 0) + 1


def bump(s: State, rank: int, b: Bounds) -> Map[int, int]:
    """Bump(r): the counters after ``rank``'s journal lease was granted with NextGen(r)."""
    if not b.generations:
        return s.gens
    return put(s.gens, rank, (get(s.gens, rank) or 0) + 1)


def resume_generations(j: Journal, epoch: int, base: int = GEN_BASE) -> Map[int, int]:
    """Resume(j, e), as ``Master._resume_generations``: a restarted master's counters, each
    rank's the largest counter of epoch ``epoch`` among its journal leases as read from disk
    (before recovery); every other rank's restarts from 0."""
    out: dict[int, int] = {}
    for _, x in j.leases:
        if x.gen and x.gen // base == epoch:
            out[x.owner] = max(out.get(x.owner, 0), x.gen % base)
    return as_map(sorted(out.items()))


Active = tuple[tuple[int, Dispatch], ...]


def _add(active: Active, rank: int, d: Dispatch) -> Active:
    """``active`` with ``(rank, d)`` in its sorted place (unchanged if there already)."""
    p = (rank, d)
    i = bisect_left(active, p)
    if i < len(active) and active[i] == p:
        return active
    return edited((*active[:i], p, *active[i:]), active, i, 0, 1)


def _remove(active: Active, rank: int, d: Dispatch) -> Active:
    """``active`` without ``(rank, d)``."""
    p = (rank, d)
    i = bisect_left(active, p)
    j = i
    while j < len(active) and active[j] == p:
        j += 1
    return active if i == j else edited(active[:i] + active[j:], active, i, j - i, 0)


def dispatch_work(
    s: State, work: str, rank: int, b: Bounds, refuse: str | None = None
) -> tuple[DispatchOutcome, State]:
    """DispatchWork(w, r). Enabled when rank ``r`` holds fewer than ``b.pipeline`` dispatches
    (at depth 1: none).

    One compensating transaction (F313): reserve target, parameter, algorithm; lease the work in
    the journal; lease its state task in the coordinator; send. A refusal at any step runs
    RejectDispatch, which undoes the steps already taken in reverse order; nothing is sent. The
    reservations are held by the dispatch and are not part of the explored state; ``refuse``
    lets a caller refuse one reservation step. On success the master stores (w, task, gen) for
    r. Under generation fencing both leases are taken by the token ``(r, gen)`` with ``gen =
    next_generation(s, r)`` and the payload carries ``gen``; under rank fencing ``gen`` is 0.
    Whenever the journal grants the lease, the rank's generation counter advances (``bump``).
    """
    task = b.task(work)
    gen = next_generation(s, rank, b)
    taken: list[str] = []
    j, c = s.journal, s.coordinator
    for step in DISPATCH_STEPS:
        if step == refuse:
            ok = False
        elif step == "lease_work":
            ok, j = jo.lease_work(j, work, rank, s.wall, s.mono, b.flavour, gen)
        elif step == "lease_state":
            ok, c = co.lease_state(c, task, rank, s.wall, s.mono, b.flavour, gen)
        else:
            ok = True
        if not ok:
            undone = tuple(reversed(taken))
            if "lease_work" in undone and b.flavour is not Flavour.KEEP_REFUSED_LEASE:
                _, j = jo.abandon_work(j, work, rank, b.flavour, gen)
            gens = bump(s, rank, b) if "lease_work" in taken else s.gens
            out = s._replace(journal=j, gens=gens)
            if step == "lease_state" and b.flavour in _REFUSAL_TWINS:
                out = _refusal_twin(out, work, task, rank, gen, b)
            return DispatchOutcome(False, tuple(taken), step, undone), out
        taken.append(step)
    net, gnet = _send(s, work, rank, gen, b)
    return DispatchOutcome(True, tuple(taken), None, ()), s._replace(
        journal=j,
        coordinator=c,
        active=_add(s.active, rank, Dispatch(work, task, gen)),
        net=net,
        gnet=gnet,
        gens=bump(s, rank, b),
    )


def _send(
    s: State, work: str, rank: int, gen: int, b: Bounds
) -> tuple[Ids[tuple[int, str]], Ids[tuple[int, str, int]]]:
    """Send(r, w, g): ``(net, gnet)`` once the WORK payload of ``work`` to ``rank`` (generation
    ``gen``) has left: its result is in flight, in ``gnet`` with its generation under generation
    fencing, else in ``net``."""
    if b.generations:
        return s.net, add(s.gnet, (rank, work, gen))
    return add(s.net, (rank, work)), s.gnet


_REFUSAL_TWINS = (Flavour.REFUSAL_BOOKS_FAILURE, Flavour.REFUSAL_SENDS_WORK)


def _refusal_twin(s: State, work: str, task: str, rank: int, gen: int, b: Bounds) -> State:
    """The must-fail twins of L3 on a dispatch the coordinator refused (RejectDispatch):
    ``REFUSAL_BOOKS_FAILURE`` books a failure (and its cost) for the task,
    ``REFUSAL_SENDS_WORK`` sends the WORK message all the same."""
    if b.flavour is Flavour.REFUSAL_BOOKS_FAILURE:  # AddStats(c, t, 0, 1, 0, 1)
        c = s.coordinator
        booked = co.add_stats(c, task, Stats(failures=1, cost=1))
        return s._replace(coordinator=c._replace(stats=booked))
    net, gnet = _send(s, work, rank, gen, b)
    return s._replace(net=net, gnet=gnet)


class ResultOutcome(NamedTuple):
    """What the master did with one result: which task it used and what each container said."""

    stale: bool
    task: str | None
    mismatch: bool
    work_ok: bool
    state_ok: bool


def deliver_result(
    s: State,
    rank: int,
    work: str,
    reported: str | None,
    ok: bool,
    b: Bounds,
    keep: bool = False,
    gen: int = 0,
    presented: int | None = None,
) -> tuple[ResultOutcome, State]:
    """DeliverResult(r, w, reported, ok, keep, withgen). Enabled for a result in flight from
    ``r`` about ``w`` (``gen`` 0: in ``net``; else in ``gnet`` with its generation): it may be
    late or reordered, may report any state ID (or none: the old protocol) and, under generation
    fencing, present its generation ``p = gen`` (the spec's ``withgen``) or none (``p = 0``: an
    old-protocol worker).
    With ``keep`` (while ``dups < max_dups``) the message stays in flight: a duplicated result.

    The message is consumed (``consume_result``); the master looks up the dispatch the result
    is for (``found_dispatches``); a stale result changes nothing else (``is_stale``); any other
    is committed to the journal and the coordinator (``commit_result``). The same four parts as
    the spec's ConsumeResult, Found, IsStale and CommitResult.
    """
    p = gen if presented is None else presented
    s = consume_result(s, rank, work, gen, keep)
    found = found_dispatches(s, rank, work, p)
    if is_stale(s, rank, work, found, b):
        return ResultOutcome(True, None, False, False, False), s
    return commit_result(s, rank, work, p, found, reported, ok, b)


def consume_result(s: State, rank: int, work: str, gen: int, keep: bool) -> State:
    """ConsumeResult(r, w, g, keep): the result of generation ``gen`` (0: ``(r, w)`` in ``net``;
    else ``(r, w, gen)`` in ``gnet``) leaves the network, or stays in flight with ``keep`` (a
    duplicated result, counted in ``dups``)."""
    if keep:
        return s._replace(dups=s.dups + 1)
    if gen:
        return s._replace(gnet=discard(s.gnet, (rank, work, gen)))
    return s._replace(net=discard(s.net, (rank, work)))


def found_dispatches(s: State, rank: int, work: str, presented: int) -> list[Dispatch]:
    """Found(r, w, p): the dispatches of ``rank`` the result is for, by generation when one is
    presented, else by work ID (at most one)."""
    i, j = _stretch(s.active, rank)  # read in place, no tuple of ``dispatches_of`` built
    if presented:
        return [d for _, d in s.active[i:j] if d.gen == presented]
    return [d for _, d in s.active[i:j] if d.work == work]


def is_stale(s: State, rank: int, work: str, found: list[Dispatch], b: Bounds) -> bool:
    """IsStale(r, w, p): the dispatch found is for another work ID, or none is found while every
    slot of ``rank`` holds another dispatch; the master drops such a result unread."""
    if found:
        return found[0].work != work and b.flavour is not Flavour.NO_STALE_GUARD
    return dispatch_count(s, rank) >= b.pipeline


def commit_result(
    s: State,
    rank: int,
    work: str,
    presented: int,
    found: list[Dispatch],
    reported: str | None,
    ok: bool,
    b: Bounds,
) -> tuple[ResultOutcome, State]:
    """CommitResult(r, w, p, reported, ok): a result that is not stale, committed. The owner
    token is ``(rank, stored gen)`` if a dispatch is found, else ``(rank, presented)``; the task
    is ``authoritative_state_task(stored, reported)`` (L7); success completes the work lease and
    then the state lease, failure abandons both (the state step only when the work step
    succeeded and there is a task); each container refuses a token that is not exactly the
    owner's (L2). The dispatch found ends."""
    disp = found[0] if found else None
    token = result_token(found, presented)
    task = result_task(found, reported, b)
    mismatch = disp is not None and reported is not None and reported != disp.task
    work_ok, j = work_part(s, rank, work, token, ok, b)
    state_ok, c = False, s.coordinator
    if work_ok and task is not None:
        state_ok, c = state_part(s, rank, task, token, ok, b)
    active = _remove(s.active, rank, disp) if disp is not None else s.active
    outcome = ResultOutcome(False, task, mismatch, work_ok, state_ok)
    return outcome, s._replace(journal=j, coordinator=c, active=active)


def result_token(found: list[Dispatch], presented: int) -> int:
    """ResultToken(r, w, p): the stored generation of the dispatch found, else the presented
    one."""
    return found[0].gen if found else presented


def result_task(found: list[Dispatch], reported: str | None, b: Bounds) -> str | None:
    """ResultTask(r, w, p, reported): ``authoritative_state_task`` of the stored task (none when
    no dispatch is found) and the reported one (L7)."""
    return authoritative_state_task(found[0].task if found else None, reported, b.flavour)


def work_part(
    s: State, rank: int, work: str, token: int, ok: bool, b: Bounds
) -> tuple[bool, Journal]:
    """WorkPart(r, w, p, ok): the journal's call of a committed result (complete on success,
    abandon on failure), on the current journal."""
    if ok:
        return jo.complete_work(s.journal, work, rank, b.flavour, token)
    return jo.abandon_work(s.journal, work, rank, b.flavour, token)


def state_part(
    s: State, rank: int, task: str, token: int, ok: bool, b: Bounds
) -> tuple[bool, Coordinator]:
    """StatePart(r, w, p, reported, ok): the coordinator's call of a committed result, on the
    current coordinator."""
    if ok:
        return co.complete_state(s.coordinator, task, rank, flavour=b.flavour, gen=token)
    return co.abandon_state(s.coordinator, task, rank, gen=token)


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
    return restart_from(s, s.journal, s.coordinator, b)


def restart_from(s: State, j: Journal, c: Coordinator, b: Bounds) -> State:
    """RestartFrom(j, c): the restart on the files a crashed step left (journal ``j``,
    coordinator ``c``), or on the files as they are (RestartMaster): the next epoch, the
    generation counters resumed from the journal as read from disk, recovery with the TTL, no
    active dispatch."""
    c = co.restart_coordinator(c, b.flavour)
    gens = resume_generations(j, gen_epoch(c, b), b.gen_base) if b.generations else ()
    _, j = jo.recover_work(j, b.ttl, s.wall, s.mono, b.flavour)
    _, c = co.recover_states(c, b.ttl, s.wall, s.mono, b.flavour)
    return s._replace(journal=j, coordinator=c, active=(), gens=gens)


# Crash mid-step (issue 21 point 2): the master writes the journal before the coordinator in
# every step; a kill between the two leaves the journal's part on disk, then it restarts on those
# files at the same instant. Each is enabled while a restart is and the first part writes
# something (else it is RestartMaster). Flavour COORDINATOR_FIRST writes the coordinator first.


def can_crash(s: State, b: Bounds) -> bool:
    """Whether a restart is enabled (the coordinator's epoch is at most ``max_restarts``)."""
    return s.coordinator.epoch <= b.max_restarts


def crash_dispatch_work(s: State, work: str, rank: int, b: Bounds) -> State | None:
    """CrashDispatchWork(w, r). Enabled when DispatchWork(w, r) is and LeaseWork grants: the
    master is killed after the work lease reached disk (before the state lease; for a refused
    dispatch, before RejectDispatch gave it back), nothing was sent, and it restarts. None when
    not enabled."""
    if not can_crash(s, b) or dispatch_count(s, rank) >= b.pipeline:
        return None
    gen = next_generation(s, rank, b)
    if b.flavour is Flavour.COORDINATOR_FIRST:
        ok, c = co.lease_state(s.coordinator, b.task(work), rank, s.wall, s.mono, b.flavour, gen)
        return restart_from(s, s.journal, c, b) if ok else None
    ok, j = jo.lease_work(s.journal, work, rank, s.wall, s.mono, b.flavour, gen)
    return restart_from(s, j, s.coordinator, b) if ok else None


def crash_deliver_result(
    s: State,
    rank: int,
    work: str,
    reported: str | None,
    ok: bool,
    b: Bounds,
    gen: int = 0,
    presented: int | None = None,
) -> State | None:
    """CrashDeliverResult(r, w, reported, ok, withgen). Enabled for a result in flight that
    DeliverResult would commit (not stale) and whose journal part succeeds: the message is
    consumed, the completion (or abandon) is in the journal, the coordinator's is not, and the
    master restarts. None when not enabled."""
    if not can_crash(s, b):
        return None
    p = gen if presented is None else presented
    found = found_dispatches(s, rank, work, p)
    if is_stale(s, rank, work, found, b):
        return None
    token = result_token(found, p)
    task = result_task(found, reported, b)
    t = consume_result(s, rank, work, gen, False)
    if b.flavour is Flavour.COORDINATOR_FIRST:
        if task is None:
            return None
        state_ok, c = state_part(s, rank, task, token, ok, b)
        return restart_from(t, s.journal, c, b) if state_ok else None
    work_ok, j = work_part(s, rank, work, token, ok, b)
    return restart_from(t, j, s.coordinator, b) if work_ok else None


def crash_reclaim_expired(s: State, b: Bounds) -> State | None:
    """CrashReclaimExpired. Enabled when RecoverWork reclaims something: its reclaims are on
    disk, RecoverStates' are not, and the master restarts (at the same instant, so the state is
    RestartMaster's). None when not enabled."""
    if not can_crash(s, b):
        return None
    if b.flavour is Flavour.COORDINATOR_FIRST:
        tasks, c = co.recover_states(s.coordinator, b.ttl, s.wall, s.mono, b.flavour)
        return restart_from(s, s.journal, c, b) if tasks else None
    works, j = jo.recover_work(s.journal, b.ttl, s.wall, s.mono, b.flavour)
    return restart_from(s, j, s.coordinator, b) if works else None


def within_constraint(s: State, b: Bounds) -> bool:
    """The state constraint (TLC's CONSTRAINT): at most ``max_attempts`` leases of one work ID
    and ``max_leases`` in all."""
    counts = [n for _, n in s.journal.attempts]
    return all(n <= b.max_attempts for n in counts) and sum(counts) <= b.max_leases


Label = tuple[str, tuple[object, ...]]


def _crashes(s: State, b: Bounds, reports: tuple[str | None, ...]) -> Iterator[tuple[Label, State]]:
    """The enabled Crash actions from ``s`` (the spec's Next lists them after RestartMaster)."""
    for r in b.ranks:
        for w in b.works:
            t = crash_dispatch_work(s, w, r, b)
            if t is not None:
                yield ("CrashDispatchWork", (w, r)), t
    for r, w in sorted(s.net):
        for rep in reports:
            for ok in (True, False):
                t = crash_deliver_result(s, r, w, rep, ok, b)
                if t is not None:
                    yield ("CrashDeliverResult", (r, w, rep, ok)), t
    for r, w, g in sorted(s.gnet):
        for rep in reports:
            for ok in (True, False):
                for p in (g, 0):
                    t = crash_deliver_result(s, r, w, rep, ok, b, g, p)
                    if t is not None:
                        yield ("CrashDeliverResult", (r, w, rep, ok, g, p)), t
    t = crash_reclaim_expired(s, b)
    if t is not None:
        yield ("CrashReclaimExpired", ()), t


def successors(s: State, b: Bounds) -> Iterator[tuple[Label, State]]:
    """Every enabled action from ``s`` with its label ``(name, args)``, in a fixed order."""
    for r in b.ranks:
        if dispatch_count(s, r) < b.pipeline:
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
    for r, w, g in sorted(s.gnet):
        for rep in reports:
            for ok in (True, False):
                for keep in keeps:
                    for p in (g, 0):
                        _, t = deliver_result(s, r, w, rep, ok, b, keep, g, p)
                        yield ("DeliverResult", (r, w, rep, ok, keep, g, p)), t
    _, t = reclaim_expired(s, b)
    yield ("ReclaimExpired", ()), t
    if can_crash(s, b):
        yield ("RestartMaster", ()), restart_master(s, b)
        yield from _crashes(s, b, reports)
    if s.wall < b.max_wall and s.mono < b.max_wall:
        yield ("Tick", ()), s._replace(wall=s.wall + 1, mono=s.mono + 1)
    if s.rollbacks < b.max_rollbacks:
        for to in range(s.wall):
            yield ("RollbackClock", (to,)), s._replace(wall=to, rollbacks=s.rollbacks + 1)
    if s.reboots < b.max_reboots:
        yield ("Reboot", ()), s._replace(mono=0, reboots=s.reboots + 1)
    yield ("CompactJournal", ()), s._replace(journal=jo.compact_journal(s.journal))
    for w in b.works if b.legacy else ():
        for r in b.ranks:
            ok, j = jo.legacy_record(s.journal, w, r, b.legacy_stamp)
            if ok:
                yield ("LegacyRecord", (w, r)), s._replace(journal=j)
