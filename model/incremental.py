"""The invariants and step properties of ``model.invariants`` for a run checked state by state,
in time that does not grow with the run: the same verdicts, reading only what a step changed.

A run of 10⁵ work IDs builds maps of 10⁵ entries (attempts, completed IDs, statistics, results
in flight), and the definitions in ``model.invariants`` read every entry at every step. Here:

- ``L3_RefusalChangesNothing`` and ``L6_StatisticsSurvive`` read only the entries the step
  changed (``state.changed``): each is a condition per entry that holds wherever an entry is the
  same before and after, so this is the same property, with no assumption.
- ``TypeOK`` reads its per-entry conditions only on entries that differ from ``since``, a state
  known to satisfy ``TypeOK`` under the same bounds (the last state checked): an entry it held
  is in range still; the leases and active dispatches too (all the coordinator's leases when its
  epoch changed: it bounds theirs). Its other conditions are read in full.
- ``CompletionsAccounted`` reads only the tasks whose statistics or completed work IDs differ
  from ``since`` (as ``TypeOK``): a task where neither changed keeps ``since``'s verdict.
- ``L1_SingleOwner``, ``L2_OwnerFenced``, ``L6_NoInheritedOwnership`` and
  ``L7_AuthoritativeStateId`` read only the dispatches a step started or ended and those whose
  work or task lease changed (found in an index of the active dispatches by work and by task,
  itself carried from step to step): a real run holds up to ``pipeline`` dispatches per rank,
  and reading them all at every step was most of the replay. Each reads everything when the
  epoch changed, or when a dispatch is held twice.
- ``NoStuckLease`` holds in every state under every flavour but ``MONOTONIC_PERSISTED`` (it is
  a property of the rule, see ``no_stuck_lease``); under that one it reads the leases.
- ``L4_UnixClockDomain`` reads the leases, and only across a reboot.
- The other invariants read the leases only: at most a few per rank in a real run. They are the
  functions of ``model.invariants`` themselves.

What a step changed is found once per step and shared (``delta``, ``_moves``: the checks of one
step ask the same pairs of values).

``tests/unit/test_incremental.py`` compares both forms on every transition of the CI graph and
on random states, and plants a violation of each invariant that both must report.

Adding an invariant or a step property to ``model.invariants`` needs nothing here: it is checked
in full at every step. Give it an incremental form (``INCREMENTAL_STATE``/``INCREMENTAL_STEP``)
only if it reads maps that grow with the run, and a planted violation in the test.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, NamedTuple

from leasefence.model import invariants as full
from leasefence.model.coordinator import active_lease
from leasefence.model.flavours import Flavour
from leasefence.model.rules import CLOCKS
from leasefence.model.state import Dispatch, State, changed, get, unshared
from leasefence.model.system import Bounds

#: ``changed`` results of the last few pairs of values asked (a step's checks ask the same pairs:
#: the journal's leases, the coordinator's, the active dispatches), each kept with its two
#: values so that their ids cannot be reused while the entry lives.
_MEMO: dict[tuple[int, int], tuple[Any, Any, Sequence[Any]]] = {}
_MEMO_SIZE = 16


def delta(a: Any, b: Any) -> Sequence[Any]:
    """``changed(a, b)`` (keys of maps, members of sets), remembered for the last few pairs:
    treat the result as read-only."""
    if a is b:
        return ()
    key = (id(a), id(b))
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is a and hit[1] is b:
        return hit[2]
    if len(_MEMO) >= _MEMO_SIZE:
        _MEMO.clear()
    out = changed(a, b)
    _MEMO[key] = (a, b, out)
    return out


Pair = tuple[int, Dispatch]


def _moves(a: tuple[Pair, ...], b: tuple[Pair, ...]) -> tuple[list[Pair], list[Pair]] | None:
    """The dispatches ``b`` has and ``a`` has not, and those ``a`` has and ``b`` has not; None
    when the part either does not share with the other holds a dispatch twice (then the plain
    definitions are read instead)."""
    if a is b:
        return [], []
    key = (id(a), id(b))
    hit = _MOVES.get(key)
    if hit is not None and hit[0] is a and hit[1] is b:
        return hit[2]
    # What both share at the same place cancels out, a dispatch held twice included: the
    # difference is that of the rest, a set difference when neither rest repeats an item.
    ua, ub = unshared(a, b)
    sa, sb = set(ua), set(ub)
    twice = len(sa) != len(ua) or len(sb) != len(ub)
    out = None if twice else (list(sb - sa), list(sa - sb))
    if len(_MOVES) >= _MEMO_SIZE:
        _MOVES.clear()
    _MOVES[key] = (a, b, out)
    return out


_MOVES: dict[tuple[int, int], tuple[Any, Any, tuple[list[Pair], list[Pair]] | None]] = {}


class ActiveIndex(NamedTuple):
    """The active dispatches by work ID, by task, and their number per rank."""

    by_work: dict[str, tuple[Pair, ...]]
    by_task: dict[str, tuple[Pair, ...]]
    per_rank: dict[int, int]


#: The index of the last few ``State.active`` values, each kept with its value (see ``_MEMO``).
_INDEX: dict[int, tuple[tuple[Pair, ...], ActiveIndex]] = {}


def _indexed(active: tuple[Pair, ...], since: tuple[Pair, ...]) -> ActiveIndex:
    """The index of ``active``: made from ``since``'s if that is at hand (a step moves few
    dispatches), else read in full."""
    hit = _INDEX.get(id(active))
    if hit is not None and hit[0] is active:
        return hit[1]
    base = _INDEX.get(id(since))
    mv = _moves(since, active) if base is not None and base[0] is since else None
    if base is None or mv is None:
        by_work: dict[str, tuple[Pair, ...]] = {}
        by_task: dict[str, tuple[Pair, ...]] = {}
        per_rank: dict[int, int] = {}
        moved: list[Pair] = list(active)
        gone: list[Pair] = []
    else:
        old = base[1]
        by_work, by_task, per_rank = dict(old.by_work), dict(old.by_task), dict(old.per_rank)
        moved, gone = mv
    for p in gone:  # an entry left empty is removed: the index stays the size of ``active``
        r, d = p
        for by, key in ((by_work, d.work), (by_task, d.task)):
            rest = tuple(x for x in by[key] if x != p)
            if rest:
                by[key] = rest
            else:
                del by[key]
        per_rank[r] -= 1
    for p in moved:
        r, d = p
        by_work[d.work] = (*by_work.get(d.work, ()), p)
        by_task[d.task] = (*by_task.get(d.task, ()), p)
        per_rank[r] = per_rank.get(r, 0) + 1
    index = ActiveIndex(by_work, by_task, per_rank)
    if len(_INDEX) >= _MEMO_SIZE:
        _INDEX.clear()
        if base is not None:
            _INDEX[id(since)] = base
    _INDEX[id(active)] = (active, index)
    return index


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
    # Plain loops, not all(...): this runs at every step of a trace. Each map is read only where
    # it differs from ``since`` (``delta`` is empty for the same object: most steps leave most
    # maps as they were).
    for w in delta(j0.leases, j.leases):
        x = get(j.leases, w)
        if x is not None and not (
            w in works and x.owner in ranks and x.clock in CLOCKS and x.gen >= 0
        ):
            return False
    for w in delta(j0.completed, j.completed):
        if w not in works and w in j.completed:
            return False
    for w in delta(j0.attempts, j.attempts):
        n = get(j.attempts, w)
        if n is not None and not (w in works and n >= 1):
            return False
    # A lease's epoch is bounded by the coordinator's: all are read again when that changes.
    reread = (
        c.leases
        if c.epoch != c0.epoch
        else ((t, get(c.leases, t)) for t in delta(c0.leases, c.leases))
    )
    for t, y in reread:
        if y is not None and not (
            t in tasks and y.owner in ranks and 1 <= y.epoch <= c.epoch and y.gen >= 0
        ):
            return False
    for t in delta(c0.stats, c.stats):
        z = get(c.stats, t)
        if z is not None and not (
            t in tasks and min(z.completions, z.failures, z.reward, z.cost) >= 0
        ):
            return False
    mv = _moves(since.active, s.active)
    if mv is None:
        return full.type_ok(s, b)
    for r, d in mv[0]:
        if not (r in ranks and d.work in works and d.task == b.task(d.work) and d.gen >= 0):
            return False
    # Only a rank given a new dispatch can go beyond the pipeline.
    if mv[0] and len(s.active) > b.pipeline:
        per_rank = _indexed(s.active, since.active).per_rank
        if any(per_rank[r] > b.pipeline for r, _ in mv[0]):
            return False
    for r, w in delta(since.net, s.net):
        if not (r in ranks and w in works) and (r, w) in s.net:
            return False
    for r, w, g in delta(since.gnet, s.gnet):
        if not (r in ranks and w in works and g >= 1) and (r, w, g) in s.gnet:
            return False
    for r in delta(since.gens, s.gens):
        n = get(s.gens, r)
        if n is not None and not (r in ranks and 1 <= n < b.gen_base):
            return False
    return True


# L1: A local work/state ID has at most one active worker at any moment.
def l1_single_owner(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.l1_single_owner(s, b)``, given that ``since`` (if any) satisfies it: only a
    dispatch the step started can share its work or task with another."""
    mv = None if since is None else _moves(since.active, s.active)
    if mv is None:
        return full.l1_single_owner(s, b)
    if not mv[0]:
        return True
    idx = _indexed(s.active, since.active)  # type: ignore[union-attr]
    return all(len(idx.by_work[d.work]) == 1 == len(idx.by_task[d.task]) for _, d in mv[0])


# L2: complete, abandon and discard change state only when the worker is the current owner.
def l2_owner_fenced(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.l2_owner_fenced(s, b)``, given that ``since`` (if any) satisfies it: only
    the dispatches that are new, or whose work or task lease changed, are read (all of them when
    the epoch changed: it decides which state leases are active)."""
    if since is None or since.coordinator.epoch != s.coordinator.epoch:
        return full.l2_owner_fenced(s, b)
    mv = _moves(since.active, s.active)
    if mv is None:
        return full.l2_owner_fenced(s, b)
    jl, c = s.journal.leases, s.coordinator
    works = delta(since.journal.leases, jl)
    tasks = delta(since.coordinator.leases, c.leases)
    if not (works or tasks or mv[0]):
        return True
    idx = _indexed(s.active, since.active)
    read = set(mv[0])
    for w in works:
        read.update(idx.by_work.get(w, ()))
    for t in tasks:
        read.update(idx.by_task.get(t, ()))
    for r, d in read:
        lease = get(jl, d.work)
        state = active_lease(c, d.task)
        if lease is None or (lease.owner, lease.gen) != (r, d.gen):
            return False
        if state is None or (state.owner, state.gen) != (r, d.gen):
            return False
    return True


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def l6_no_inherited_ownership(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.l6_no_inherited_ownership(s, b)``, given that ``since`` (if any) satisfies
    it: only the state leases that changed, or whose dispatch ended, are read (all when the
    epoch changed)."""
    if since is None or since.coordinator.epoch != s.coordinator.epoch:
        return full.l6_no_inherited_ownership(s, b)
    mv = _moves(since.active, s.active)
    if mv is None:
        return full.l6_no_inherited_ownership(s, b)
    c = s.coordinator
    tasks: Collection[str] = delta(since.coordinator.leases, c.leases)
    if mv[1]:
        tasks = {*tasks, *(d.task for _, d in mv[1])}
    if not tasks:
        return True
    by_task = _indexed(s.active, since.active).by_task
    for t in tasks:
        x = get(c.leases, t)
        if x is None or x.epoch != c.epoch:
            continue  # no active lease: nothing to own
        if not any(r == x.owner and d.gen == x.gen for r, d in by_task.get(t, ())):
            return False
    return True


# L7: A state ID in a result never overrides the authoritative ID the master stored at dispatch.
def l7_authoritative_state_id(before: State, after: State, b: Bounds) -> bool:
    """``invariants.l7_authoritative_state_id``: the dispatches that ended, found once."""
    if after.coordinator.epoch != before.coordinator.epoch:
        return True
    mv = _moves(before.active, after.active)
    if mv is None:
        return full.l7_authoritative_state_id(before, after, b)
    for r, d in mv[1]:
        lease = active_lease(after.coordinator, d.task)
        if lease is not None and (lease.owner, lease.gen) == (r, d.gen):
            return False
    return True


# L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
def l3_refusal_changes_nothing(before: State, after: State, b: Bounds) -> bool:
    j0, j1 = before.journal, after.journal
    c0, c1 = before.coordinator, after.coordinator
    works, tasks = b.work_set, b.task_set
    if j0.attempts is not j1.attempts or j0.leases is not j1.leases:
        touched = [*delta(j0.attempts, j1.attempts), *delta(j0.leases, j1.leases)]
        for w in set(touched) if len(touched) > 1 else touched:
            if w in works and not full.l3_work_kept(j0, j1, w):
                return False
    for t in delta(c0.leases, c1.leases):
        if t in tasks and not full.l3_task_kept(c0, c1, t):
            return False
    return True


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def l6_statistics_survive(before: State, after: State, b: Bounds) -> bool:
    # No step, a restart included, ever loses a statistic.
    s0, s1 = before.coordinator.stats, after.coordinator.stats
    if s0 is s1:
        return True
    for t in delta(s0, s1):
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
    done = delta(since.journal.completed, s.journal.completed)
    tasks = {task(w) for w in done if w in b.work_set}
    tasks.update(delta(since.coordinator.stats, s.coordinator.stats))
    return all(full.completions_kept(s, b, t) for t in tasks)


# Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
def no_stuck_lease(s: State, b: Bounds, since: State | None = None) -> bool:
    """``invariants.no_stuck_lease(s, b)`` without reading the leases where the answer does not
    depend on them: under every flavour but ``MONOTONIC_PERSISTED`` a lease is reclaimable within
    ``2 * TTL`` whatever its stamp and the clocks (``rules.reclaimable_within``: with TTL 0 or
    no Unix tag at once, else a stamp more than TTL ahead at once and any other by ``wall +
    TTL``), so the property holds in every state. It is a property of the rule
    (``test_incremental`` checks this form against the full one under every flavour)."""
    if b.flavour is not Flavour.MONOTONIC_PERSISTED:
        return True
    return full.no_stuck_lease(s, b)


StateCheck = Callable[[State, Bounds, "State | None"], bool]
StepCheck = Callable[[State, State, Bounds], bool]

#: The incremental form of each state invariant that has one (it takes ``since`` too). Any other
#: invariant of ``invariants.STATE_INVARIANTS`` is checked in full at every state: a new one is
#: checked with nothing added here, and gets an entry only if it reads whole maps.
INCREMENTAL_STATE: dict[str, StateCheck] = {
    "TypeOK": type_ok,
    "L1_SingleOwner": l1_single_owner,
    "L2_OwnerFenced": l2_owner_fenced,
    "L6_NoInheritedOwnership": l6_no_inherited_ownership,
    "CompletionsAccounted": completions_accounted,
    "NoStuckLease": no_stuck_lease,
}
#: The incremental form of each step property that has one; the others are checked in full.
INCREMENTAL_STEP: dict[str, StepCheck] = {
    "L3_RefusalChangesNothing": l3_refusal_changes_nothing,
    "L7_AuthoritativeStateId": l7_authoritative_state_id,
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
