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

Adding an invariant or a step property to ``model.invariants`` needs nothing here: it is checked
in full at every step. Give it an incremental form (``INCREMENTAL_STATE``/``INCREMENTAL_STEP``)
only if it reads maps that grow with the run, and a planted violation in the test.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from leasefence.model import invariants as full
from leasefence.model.rules import CLOCKS
from leasefence.model.state import State, changed, get
from leasefence.model.system import GEN_BASE, Bounds


def type_ok(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.type_ok(s, b)``, given that ``since`` (if any) satisfies it under ``b``."""
    if since is None:
        return full.type_ok(s, b)
    works, tasks, ranks = b.work_set, b.task_set, b.rank_set
    j, c, j0, c0 = s.journal, s.coordinator, since.journal, since.coordinator
    if not (
        0 <= s.wall <= b.max_wall
        and 0 <= s.mono <= b.max_wall
        and 0 <= s.reboots <= b.max_reboots
        and 0 <= s.rollbacks <= b.max_rollbacks
        and 1 <= c.epoch <= b.max_restarts + 1
        and 0 <= s.dups <= b.max_dups
    ):
        return False
    # Plain loops, not all(...): this runs at every step of a trace.
    for w, x in j.leases:
        if not (w in works and x.owner in ranks and x.clock in CLOCKS and x.gen >= 0):
            return False
    # Each changed(...) is guarded by an identity test: most steps leave most maps as they were.
    if j0.completed is not j.completed:
        for w in changed(j0.completed, j.completed):
            if w not in works and w in j.completed:
                return False
    if j0.attempts is not j.attempts:
        for w in changed(j0.attempts, j.attempts):
            n = get(j.attempts, w)
            if n is not None and not (w in works and n >= 1):
                return False
    for t, y in c.leases:
        if not (t in tasks and y.owner in ranks and 1 <= y.epoch <= c.epoch and y.gen >= 0):
            return False
    if c0.stats is not c.stats:
        for t in changed(c0.stats, c.stats):
            z = get(c.stats, t)
            if z is not None and not (
                t in tasks and min(z.completions, z.failures, z.reward, z.cost) >= 0
            ):
                return False
    for r, d in s.active:
        if not (r in ranks and d.work in works and d.task == b.task(d.work) and d.gen >= 0):
            return False
    if len(s.active) > b.pipeline and not all(
        sum(1 for x, _ in s.active if x == r) <= b.pipeline for r in ranks
    ):
        return False
    if since.net is not s.net:
        for r, w in changed(since.net, s.net):
            if not (r in ranks and w in works) and (r, w) in s.net:
                return False
    if since.gnet is not s.gnet:
        for r, w, g in changed(since.gnet, s.gnet):
            if not (r in ranks and w in works and g >= 1) and (r, w, g) in s.gnet:
                return False
    if since.gens is not s.gens:
        for r, n in s.gens:
            if not (r in ranks and 1 <= n < GEN_BASE):
                return False
    return True


# L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
def l3_refusal_changes_nothing(before: State, after: State, b: Bounds) -> bool:
    j0, j1 = before.journal, after.journal
    c0, c1 = before.coordinator, after.coordinator
    works, tasks = b.work_set, b.task_set
    if j0.attempts is not j1.attempts or j0.leases is not j1.leases:
        touched = changed(j0.attempts, j1.attempts) + changed(j0.leases, j1.leases)
        for w in set(touched) if len(touched) > 1 else touched:
            if w in works and not full.l3_work_kept(j0, j1, w):
                return False
    if c0.leases is not c1.leases:
        for t in changed(c0.leases, c1.leases):
            if t in tasks and not full.l3_task_kept(c0, c1, t):
                return False
    return True


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def l6_statistics_survive(before: State, after: State, b: Bounds) -> bool:
    # No step, a restart included, ever loses a statistic.
    s0, s1 = before.coordinator.stats, after.coordinator.stats
    if s0 is s1:
        return True
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

#: The incremental form of each state invariant that has one (it takes ``since`` too). Any other
#: invariant of ``invariants.STATE_INVARIANTS`` is checked in full at every state: a new one is
#: checked with nothing added here, and gets an entry only if it reads whole maps.
INCREMENTAL_STATE: dict[str, StateCheck] = {
    "TypeOK": type_ok,
    "CompletionsAccounted": completions_accounted,
}
#: The incremental form of each step property that has one; the others are checked in full.
INCREMENTAL_STEP: dict[str, StepCheck] = {
    "L3_RefusalChangesNothing": l3_refusal_changes_nothing,
    "L6_StatisticsSurvive": l6_statistics_survive,
}


def _plain(check: full.StateCheck) -> StateCheck:
    """A state invariant that reads only small parts of the state, checked in full."""
    return lambda s, b, since: check(s, b)


#: ``invariants.STATE_INVARIANTS``, same names and order, each taking ``since`` too.
STATE_INVARIANTS: dict[str, StateCheck] = {
    name: INCREMENTAL_STATE.get(name) or _plain(check)
    for name, check in full.STATE_INVARIANTS.items()
}

#: ``invariants.STEP_PROPERTIES``, same names and order.
STEP_PROPERTIES: dict[str, StepCheck] = {
    name: INCREMENTAL_STEP.get(name, step) for name, step in full.STEP_PROPERTIES.items()
}


class Checker:
    """``violated`` without the names in ``skip``, its list of checks made once: the form a
    trace replay calls at every step (``Checker(skip)(before, after, b, since)``)."""

    __slots__ = ("_plain", "_since", "_steps")

    def __init__(self, skip: Collection[str] = ()) -> None:
        # (position, name, check) of each kind, so verdicts come in the order of ``violated``.
        order = {name: n for n, name in enumerate(STATE_INVARIANTS)}
        self._since = [
            (order[name], name, check)
            for name, check in INCREMENTAL_STATE.items()
            if name in order and name not in skip
        ]
        self._plain = [
            (order[name], name, check)
            for name, check in full.STATE_INVARIANTS.items()
            if name not in INCREMENTAL_STATE and name not in skip
        ]
        self._steps = [(name, step) for name, step in STEP_PROPERTIES.items() if name not in skip]

    def __call__(
        self, before: State, after: State, b: Bounds, since: State | None = None
    ) -> list[str]:
        bad = [(n, name) for n, name, check in self._since if not check(after, b, since)]
        bad += [(n, name) for n, name, plain in self._plain if not plain(after, b)]
        names = [name for _, name in sorted(bad)] if len(bad) > 1 else [name for _, name in bad]
        return names + [name for name, step in self._steps if not step(before, after, b)]


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
