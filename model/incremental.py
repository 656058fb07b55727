"""The invariants and step properties of ``model.invariants`` for a run checked state by state,
in time that does not grow with the run: the same verdicts, reading only what a step changed.

A run of 10⁵ work IDs builds maps of 10⁵ entries (attempts, completed IDs, statistics, results
in flight), and the definitions in ``model.invariants`` read every entry at every step. Here:

- ``L3_RefusalChangesNothing`` and ``L6_StatisticsSurvive`` read only the entries the step
  changed (``state.changed``): each is a condition per entry that holds wherever an entry is the
  same before and after, so this is the same property, with no assumption.
- ``TypeOK`` reads its per-entry conditions only on entries that differ from ``since``, a state
  known to satisfy ``TypeOK`` under the same bounds (the last state checked): an entry it held
  is in range still. Its other conditions, and the small maps (leases), are read in full.
- ``CompletionsAccounted`` reads only the tasks whose statistics or completed work IDs differ
  from ``since`` (as ``TypeOK``): a task where neither changed keeps ``since``'s verdict.
- ``L4_UnixClockDomain`` reads the leases, and only across a reboot.
- The other invariants read the leases and the active dispatches only: at most a few per rank
  in a real run. They are the functions of ``model.invariants`` themselves.

``tests/unit/test_incremental.py`` compares both forms on every transition of the CI graph and
on random states, and plants a violation of each invariant that both must report.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from itertools import chain

from leasefence.model import invariants as full
from leasefence.model.rules import CLOCKS
from leasefence.model.state import State, changed, get
from leasefence.model.system import Bounds


def type_ok(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.type_ok(s, b)``, given that ``since`` (if any) satisfies it under ``b``."""
    if since is None:
        return full.type_ok(s, b)
    works, tasks, ranks = b.work_set, b.task_set, b.rank_set
    j, c, j0, c0 = s.journal, s.coordinator, since.journal, since.coordinator
    return (
        0 <= s.wall <= b.max_wall
        and 0 <= s.mono <= b.max_wall
        and 0 <= s.reboots <= b.max_reboots
        and 0 <= s.rollbacks <= b.max_rollbacks
        and all(
            w in works and x.owner in ranks and x.clock in CLOCKS and x.gen >= 0
            for w, x in j.leases
        )
        and all(w in works for w in changed(j0.completed, j.completed) if w in j.completed)
        and all(
            w in works and n >= 1
            for w in changed(j0.attempts, j.attempts)
            if (n := get(j.attempts, w)) is not None
        )
        and 1 <= c.epoch <= b.max_restarts + 1
        and all(
            t in tasks and x.owner in ranks and 1 <= x.epoch <= c.epoch and x.gen >= 0
            for t, x in c.leases
        )
        and all(
            t in tasks and min(x.completions, x.failures, x.reward, x.cost) >= 0
            for t in changed(c0.stats, c.stats)
            if (x := get(c.stats, t)) is not None
        )
        and all(
            r in ranks and d.work in works and d.task == b.task(d.work) and d.gen >= 0
            for r, d in s.active
        )
        and all(sum(1 for x, _ in s.active if x == r) <= b.pipeline for r in ranks)
        and all(r in ranks and w in works for r, w in changed(since.net, s.net) if (r, w) in s.net)
        and all(
            r in ranks and w in works and g >= 1
            for r, w, g in changed(since.gnet, s.gnet)
            if (r, w, g) in s.gnet
        )
        and 0 <= s.dups <= b.max_dups
    )


# L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
def l3_refusal_changes_nothing(before: State, after: State, b: Bounds) -> bool:
    j0, j1 = before.journal, after.journal
    c0, c1 = before.coordinator, after.coordinator
    works, tasks = b.work_set, b.task_set
    touched = chain(changed(j0.attempts, j1.attempts), changed(j0.leases, j1.leases))
    return all(full.l3_work_kept(j0, j1, w) for w in {w for w in touched if w in works}) and all(
        full.l3_task_kept(c0, c1, t) for t in changed(c0.leases, c1.leases) if t in tasks
    )


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def l6_statistics_survive(before: State, after: State, b: Bounds) -> bool:
    # No step, a restart included, ever loses a statistic.
    s0, s1 = before.coordinator.stats, after.coordinator.stats
    for t in changed(s0, s1):
        x, y = get(s0, t), get(s1, t)
        if x is None:
            continue  # a new entry: nothing to lose
        if y is None or y.completions < x.completions or y.failures < x.failures:
            return False
        if y.reward < x.reward or y.cost < x.cost:
            return False
    return True


# Beyond F314: per task, the coordinator never books more completions than the journal holds completed work IDs of it.
def completions_accounted(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.completions_accounted(s, b)``, given that ``since`` (if any) satisfies it
    under ``b``: only the tasks whose statistics or completed work IDs changed are read."""
    if since is None:
        return full.completions_accounted(s, b)
    task = b.task
    done = changed(since.journal.completed, s.journal.completed)
    tasks = {task(w) for w in done if w in b.work_set}
    tasks.update(changed(since.coordinator.stats, s.coordinator.stats))
    return all(full.completions_kept(s, b, t) for t in tasks)


StateCheck = Callable[[State, Bounds, "State | None"], bool]
StepCheck = Callable[[State, State, Bounds], bool]


def _plain(check: full.StateCheck) -> StateCheck:
    """A state invariant that reads only small parts of the state, checked in full."""
    return lambda s, b, since: check(s, b)


#: ``invariants.STATE_INVARIANTS``, same names and order, each taking ``since`` too.
STATE_INVARIANTS: dict[str, StateCheck] = {
    name: {"TypeOK": type_ok, "CompletionsAccounted": completions_accounted}.get(
        name, _plain(check)
    )
    for name, check in full.STATE_INVARIANTS.items()
}

#: ``invariants.STEP_PROPERTIES``, same names and order.
STEP_PROPERTIES: dict[str, StepCheck] = {
    "L1_NoOrphanLease": full.l1_no_orphan_lease,
    "L2_RemovalFenced": full.l2_removal_fenced,
    "L3_RefusalChangesNothing": l3_refusal_changes_nothing,
    "L4_UnixClockDomain": full.l4_unix_clock_domain,
    "L6_StatisticsSurvive": l6_statistics_survive,
    "L7_AuthoritativeStateId": full.l7_authoritative_state_id,
}


def violated(
    before: State,
    after: State,
    b: Bounds,
    since: State | None = None,
    skip: Collection[str] = (),
) -> list[str]:
    """``invariants.violated(before, after, b)`` without the names in ``skip``, given that
    ``since`` (if any) satisfies every state invariant under ``b``: pass the last state checked
    (None for the first, and whenever the bounds change)."""
    bad = [
        name
        for name, check in STATE_INVARIANTS.items()
        if name not in skip and not check(after, b, since)
    ]
    return bad + [
        name
        for name, step in STEP_PROPERTIES.items()
        if name not in skip and not step(before, after, b)
    ]
