"""L1–L7 of F314 and ``type_ok``, each one condition, worded as in F314's table.

State invariants take a state; two-state properties (L1's orphans, L2's removals, L3, L4's
reboot, L5's and NoStuckLease's recovery steps, L6's statistics, L7) take
``(before, after)``. The same names, and the same one-line comments, appear in the TLA+ spec
(``L1_SingleOwner`` ...) and in the conformance machines.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from leasefence.model.coordinator import active_lease
from leasefence.model.rules import (
    CLOCK_LEGACY,
    CLOCK_UNIX,
    CLOCKS,
    reclaimable,
    reclaimable_within,
)
from leasefence.model.state import Coordinator, Journal, State, get
from leasefence.model.system import Bounds, reclaim_expired


def type_ok(s: State, b: Bounds) -> bool:
    """Every variable holds a value of its type and range."""
    works, tasks, ranks = b.work_set, b.task_set, b.rank_set
    j, c = s.journal, s.coordinator
    return (
        0 <= s.wall <= b.max_wall
        and 0 <= s.mono <= b.max_wall
        and 0 <= s.reboots <= b.max_reboots
        and 0 <= s.rollbacks <= b.max_rollbacks
        and all(
            w in works and x.owner in ranks and x.clock in CLOCKS and x.gen >= 0
            for w, x in j.leases
        )
        and j.completed <= works
        and all(w in works and n >= 1 for w, n in j.attempts)
        and 1 <= c.epoch <= b.max_restarts + 1
        and all(
            t in tasks and x.owner in ranks and 1 <= x.epoch <= c.epoch and x.gen >= 0
            for t, x in c.leases
        )
        and all(
            t in tasks and min(x.completions, x.failures, x.reward, x.cost) >= 0 for t, x in c.stats
        )
        and all(
            r in ranks and d.work in works and d.task == b.task(d.work) and d.gen >= 0
            for r, d in s.active
        )
        and all(sum(1 for x, _ in s.active if x == r) <= b.pipeline for r in ranks)
        and all(r in ranks and w in works for r, w in s.net)
        and all(r in ranks and w in works and g >= 1 for r, w, g in s.gnet)
        and 0 <= s.dups <= b.max_dups
        and all(r in ranks and 1 <= n < b.gen_base for r, n in s.gens)
    )


# L1: A local work/state ID has at most one active worker at any moment.
def l1_single_owner(s: State, b: Bounds) -> bool:
    works = [d.work for _, d in s.active]
    tasks = [d.task for _, d in s.active]
    return len(works) == len(set(works)) and len(tasks) == len(set(tasks))


# L2: complete, abandon and discard change state only when the worker is the current owner.
def l2_owner_fenced(s: State, b: Bounds) -> bool:
    # Stated over what it protects: no other worker's call ever takes a live dispatch's leases,
    # so every active dispatch still owns its work lease and its active state lease. The owner
    # is the whole token (rank, generation); under rank fencing the generation is always 0.
    for r, d in s.active:
        lease = get(s.journal.leases, d.work)
        state = active_lease(s.coordinator, d.task)
        if lease is None or (lease.owner, lease.gen) != (r, d.gen):
            return False
        if state is None or (state.owner, state.gen) != (r, d.gen):
            return False
    return True


# L1: A work lease is held only for a dispatch the master holds: none is left behind by a refusal or a forgotten dispatch.
def l1_no_orphan_lease(before: State, after: State, b: Bounds) -> bool:
    # But across a restart (a crash mid-step leaves its lease to expire), every journal lease a
    # step grants (but a legacy record) belongs to a dispatch that step starts, and every dispatch
    # a step ends holds no work lease after it.
    j0, j1 = before.journal, after.journal
    if j0.leases is j1.leases and before.active is after.active:
        return True
    if after.coordinator.epoch != before.coordinator.epoch:
        return True
    started = set(after.active) - set(before.active)
    for w, x in j1.leases:
        old = get(j0.leases, w)
        if old == x or x.clock == CLOCK_LEGACY:
            continue
        if not any(r == x.owner and d.work == w and d.gen == x.gen for r, d in started):
            return False
    for r, d in set(before.active) - set(after.active):
        lease = get(j1.leases, d.work)
        if lease is not None and (lease.owner, lease.gen) == (r, d.gen):
            return False
    return True


# L2: complete, abandon and discard change state only when the worker is the current owner.
def l2_removal_fenced(before: State, after: State, b: Bounds) -> bool:
    # Every lease a step removes or replaces, in the journal or the coordinator, goes by a
    # result its owner's rank delivered in that step, by recovery of an expired (or stale)
    # lease, or by a restart's voiding.
    j0, j1, c0, c1 = before.journal, after.journal, before.coordinator, after.coordinator
    if j0.leases is j1.leases and c0.leases is c1.leases:
        return True
    dup = after.dups != before.dups
    sent = [m[0] for m in before.net if dup or m not in after.net]
    sent += [m[0] for m in before.gnet if dup or m not in after.gnet]

    def expired(updated: int, clock: str) -> bool:
        return reclaimable(updated, clock, before.wall, before.mono, b.ttl)

    for w, x in j0.leases:
        if get(j1.leases, w) != x and x.owner not in sent and not expired(x.updated, x.clock):
            return False
    voided = c1.epoch != c0.epoch
    for t, y in c0.leases:
        if get(c1.leases, t) == y or voided or y.epoch != c0.epoch or y.owner in sent:
            continue
        if not expired(y.updated, CLOCK_UNIX):
            return False
    return True


# L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
def l3_refusal_changes_nothing(before: State, after: State, b: Bounds) -> bool:
    # A frame condition on every step, in three parts, one per thing a refusal could change:
    # attempts and leases (``l3_leases``), failures (``l3_failures``: statistics change only
    # where an active lease is freed) and the network (``l3_network``: a result in flight only
    # for a dispatch the step starts). Persisted events: the journal and the coordinator are the
    # replay of their records, each kind with its footprint in these parts (the spec's comment).
    return (
        l3_leases(before, after, b) and l3_failures(before, after, b) and l3_network(before, after)
    )


def l3_leases(before: State, after: State, b: Bounds) -> bool:
    """L3Leases: a work ID held or completed before the step keeps its attempts and is not
    leased again; an active state lease is not replaced within one epoch."""
    j0, j1 = before.journal, after.journal
    c0, c1 = before.coordinator, after.coordinator
    # Parts a step left as they were (the same object) cannot break the property: skipped.
    same_journal = j0.leases is j1.leases and j0.attempts is j1.attempts
    works = () if same_journal else b.works
    tasks = () if c0.leases is c1.leases else b.tasks
    return all(l3_work_kept(j0, j1, w) for w in works) and all(
        l3_task_kept(c0, c1, t) for t in tasks
    )


def l3_failures(before: State, after: State, b: Bounds) -> bool:
    """L3Failures: within one epoch, a task's statistics change only in a step that frees its
    active lease."""
    c0, c1 = before.coordinator, after.coordinator
    if c0.stats is c1.stats or c0.epoch != c1.epoch:
        return True
    return all(l3_stats_kept(c0, c1, t) for t in b.tasks)


def l3_network(before: State, after: State) -> bool:
    """L3Network: every result the step puts in flight belongs to a dispatch the step starts."""
    if before.net is after.net and before.gnet is after.gnet:
        return True
    started = set(after.active).difference(before.active)
    sent = {(r, d.work) for r, d in started}
    gsent = {(r, d.work, d.gen) for r, d in started}
    return set(after.net).difference(before.net) <= sent and (
        set(after.gnet).difference(before.gnet) <= gsent
    )


def l3_work_kept(j0: Journal, j1: Journal, w: str) -> bool:
    """L3 for one work ID: one that was held or completed keeps its attempts and its lease."""
    held = get(j0.leases, w)
    if held is None and w not in j0.completed:
        return True  # a free ID may be leased
    if get(j1.attempts, w) != get(j0.attempts, w):
        return False
    now = get(j1.leases, w)
    return held is None or now is None or now == held


def l3_task_kept(c0: Coordinator, c1: Coordinator, t: str) -> bool:
    """L3 for one state task: an active lease is not replaced within one coordinator epoch."""
    held = active_lease(c0, t)
    now = get(c1.leases, t)
    replaced = held is not None and now is not None and now != held
    return not (replaced and c1.epoch == c0.epoch)


def l3_stats_kept(c0: Coordinator, c1: Coordinator, t: str) -> bool:
    """L3's failures for one state task, within one epoch: its statistics are as they were, or
    the step frees its active lease (complete or abandon by the owner, L2)."""
    if get(c0.stats, t) == get(c1.stats, t):
        return True
    return active_lease(c0, t) is not None and get(c1.leases, t) is None


# L4: Persisted expiry uses a Unix clock, comparable across reboots, and records its clock domain.
def l4_unix_clock_domain(before: State, after: State, b: Bounds) -> bool:
    # Stated over what it protects: a reboot (the monotonic origin reset) changes no lease's
    # recovery verdict, journal or coordinator, so none becomes a permanent future lease across
    # it (F314's scenario: "not even lease_ttl=0 reclaims it").
    if after.reboots == before.reboots:
        return True

    def same(updated: int, clock: str) -> bool:
        old = reclaimable(updated, clock, before.wall, before.mono, b.ttl, b.flavour)
        return old == reclaimable(updated, clock, after.wall, after.mono, b.ttl, b.flavour)

    return all(same(x.updated, x.clock) for _, x in before.journal.leases) and all(
        same(x.updated, CLOCK_UNIX) for _, x in before.coordinator.leases
    )


# L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
def l5_legacy_migratable(s: State, b: Bounds) -> bool:
    return all(
        reclaimable(x.updated, x.clock, s.wall, s.mono, b.ttl, b.flavour)
        for _, x in s.journal.leases
        if x.clock != CLOCK_UNIX
    )


# Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
def no_stuck_lease(s: State, b: Bounds) -> bool:
    # Reclaimable at some instant of the next 2 * TTL ticks (``reclaimable_within``: the spec's
    # \E d \in 0..2*TTL, in closed form).
    def frees(updated: int, clock: str) -> bool:
        return reclaimable_within(updated, clock, s.wall, s.mono, b.ttl, 2 * b.ttl, b.flavour)

    return all(frees(x.updated, x.clock) for _, x in s.journal.leases) and all(
        frees(x.updated, CLOCK_UNIX)
        for _, x in s.coordinator.leases
        if x.epoch == s.coordinator.epoch
    )


# L5 and NoStuckLease above are about the rule ``reclaimable`` (which has the clock tag and the
# future date as disjuncts): they cannot fail unless that function does. The two below are about
# the state machine: what a recovery step leaves. A recovery is ReclaimExpired or a restart's
# (RestartMaster and every Crash action recover the files; the epoch changes only there).
def is_recovery(before: State, after: State, b: Bounds) -> bool:
    """Recovery: the step ``before -> after`` is ReclaimExpired or a restart."""
    if after.coordinator.epoch != before.coordinator.epoch:
        return True
    return reclaim_expired(before, b)[1] == after


# L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
def l5_legacy_migrated(before: State, after: State, b: Bounds) -> bool:
    # Stated about the state machine: no journal record without the Unix tag outlives a recovery.
    if all(x.clock == CLOCK_UNIX for _, x in after.journal.leases):
        return True
    return not is_recovery(before, after, b)


# Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
def no_stuck_lease_recovered(before: State, after: State, b: Bounds) -> bool:
    # Stated about the state machine: every Unix journal lease and every active state lease a
    # recovery keeps is dated within [now - TTL, now + TTL] (TTL = 0: none is kept), so it
    # expires within 2*TTL ticks of the wall clock, whatever rollbacks and reboots came before.
    now, ttl, c = after.wall, b.ttl, after.coordinator

    def fresh(updated: int) -> bool:
        return -ttl <= now - updated < ttl

    if all(fresh(x.updated) for _, x in after.journal.leases if x.clock == CLOCK_UNIX) and all(
        fresh(x.updated) for _, x in c.leases if x.epoch == c.epoch
    ):
        return True
    return not is_recovery(before, after, b)


# Beyond F314: per task, the coordinator never books more completions than the journal holds completed work IDs of it.
def completions_accounted(s: State, b: Bounds) -> bool:
    return all(completions_kept(s, b, t) for t, _ in s.coordinator.stats)


def completions_kept(s: State, b: Bounds, t: str) -> bool:
    """CompletionsAccounted for one task: its booked completions are at most its work IDs the
    journal completed (a crash between the two writes may lose a booking, never add one)."""
    x = get(s.coordinator.stats, t)
    done = s.journal.completed
    return x is None or x.completions <= sum(1 for w in b.works_of.get(t, ()) if w in done)


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def l6_no_inherited_ownership(s: State, b: Bounds) -> bool:
    # Every active state lease belongs to a live dispatch of its owner (token) in this epoch.
    c = s.coordinator
    live = {(r, d.task, d.gen) for r, d in s.active}
    return all((x.owner, t, x.gen) in live for t, x in c.leases if x.epoch == c.epoch)


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def l6_statistics_survive(before: State, after: State, b: Bounds) -> bool:
    # No step, a restart included, ever loses a statistic.
    if before.coordinator.stats is after.coordinator.stats:
        return True
    for t, x in before.coordinator.stats:
        y = get(after.coordinator.stats, t)
        if y is None or y.completions < x.completions or y.failures < x.failures:
            return False
        if y.reward < x.reward or y.cost < x.cost:
            return False
    return True


# L7: A state ID in a result never overrides the authoritative ID the master stored at dispatch.
def l7_authoritative_state_id(before: State, after: State, b: Bounds) -> bool:
    # When a rank's dispatch ends within one epoch, the task the master stored for it is the one
    # released in that step: the dispatch's owner token holds no active lease of it afterwards.
    if after.coordinator.epoch != before.coordinator.epoch or before.active is after.active:
        return True
    for r, d in set(before.active).difference(after.active):
        lease = active_lease(after.coordinator, d.task)
        if lease is not None and (lease.owner, lease.gen) == (r, d.gen):
            return False
    return True


StateCheck = Callable[[State, Bounds], bool]
StepCheck = Callable[[State, State, Bounds], bool]

#: State invariants by their TLA+ name, in the order they are checked and reported.
STATE_INVARIANTS: dict[str, StateCheck] = {
    "TypeOK": type_ok,
    "L1_SingleOwner": l1_single_owner,
    "L2_OwnerFenced": l2_owner_fenced,
    "L5_LegacyMigratable": l5_legacy_migratable,
    "L6_NoInheritedOwnership": l6_no_inherited_ownership,
    "NoStuckLease": no_stuck_lease,
    "CompletionsAccounted": completions_accounted,
}

#: Two-state properties by their TLA+ name (checked on every transition, under PROPERTIES in TLA+).
STEP_PROPERTIES: dict[str, StepCheck] = {
    "L1_NoOrphanLease": l1_no_orphan_lease,
    "L2_RemovalFenced": l2_removal_fenced,
    "L3_RefusalChangesNothing": l3_refusal_changes_nothing,
    "L4_UnixClockDomain": l4_unix_clock_domain,
    "L5_LegacyMigrated": l5_legacy_migrated,
    "NoStuckLeaseRecovered": no_stuck_lease_recovered,
    "L6_StatisticsSurvive": l6_statistics_survive,
    "L7_AuthoritativeStateId": l7_authoritative_state_id,
}

#: Step properties stated over the whole system step (the master's dispatches and the results in
#: flight): checked on the spec's actions by both model checkers, not on one container's calls
#: (the conformance machines) nor on an implementation trace's compound steps.
SYSTEM_STEP_PROPERTIES: frozenset[str] = frozenset(
    {"L1_NoOrphanLease", "L2_RemovalFenced", "L5_LegacyMigrated", "NoStuckLeaseRecovered"}
)


def violated(
    before: State | None, after: State, b: Bounds, only: Collection[str] | None = None
) -> list[str]:
    """Names of the invariants ``after`` breaks and the properties the step ``before -> after``
    breaks; with ``only``, of those names alone (what a TLC config's INVARIANTS and PROPERTIES
    name)."""
    states = STATE_INVARIANTS.items()
    steps = STEP_PROPERTIES.items() if before is not None else ()
    if only is not None:
        states = [(n, c) for n, c in states if n in only]  # type: ignore[assignment]
        steps = [(n, c) for n, c in steps if n in only]  # type: ignore[assignment]
    bad = [name for name, check in states if not check(after, b)]
    if before is not None:
        bad += [name for name, step in steps if not step(before, after, b)]
    return bad
