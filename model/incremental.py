"""The invariants and step properties of ``model.invariants`` for a run checked state by state,
in time that does not grow with the run: the same verdicts, reading only what a step changed.

A run of 10⁵ work IDs builds maps of 10⁵ entries (attempts, completed IDs, statistics, results
in flight), and the definitions in ``model.invariants`` read every entry at every step. Here:

- ``L3_RefusalChangesNothing`` and ``L6_StatisticsSurvive`` read only the entries the step
  changed (``state.changed``): each is a condition per entry that holds wherever an entry is the
  same before and after, so this is the same property, with no assumption (L3's network part
  reads the results that changed and the dispatches the step started).
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
- ``L5_LegacyMigratable`` asks the rule of the untagged leases only (a Unix lease is not its
  business), found in a list of them carried from step to step and edited by the leases the step
  changed: a real run holds ``pipeline`` leases per rank, all tagged, and reading them all at
  every step was an eighth of the replay.
- ``L4_UnixClockDomain`` reads the leases, and only across a reboot.
- The other invariants read the leases only: at most a few per rank in a real run. They are the
  functions of ``model.invariants`` themselves.

What a step changed is found once (``Diff``) and read by every check of the step.

``tests/unit/test_incremental.py`` compares both forms on every transition of the CI graph and
on random states, and plants a violation of each invariant that both must report.

Adding an invariant or a step property to ``model.invariants`` needs nothing here: it is checked
in full at every step. Give it an incremental form (``INCREMENTAL_STATE``/``INCREMENTAL_STEP``)
only if it reads maps that grow with the run, and a planted violation in the test.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Sequence
from typing import NamedTuple

from leasefence.model import invariants as full
from leasefence.model.coordinator import active_lease
from leasefence.model.flavours import Flavour
from leasefence.model.rules import CLOCK_UNIX, CLOCKS, reclaimable
from leasefence.model.state import Dispatch, Lease, Map, State, changed, get, unshared
from leasefence.model.system import Bounds

Pair = tuple[int, Dispatch]


def _moves(a: tuple[Pair, ...], b: tuple[Pair, ...]) -> tuple[list[Pair], list[Pair]] | None:
    """The dispatches ``b`` has and ``a`` has not, and those ``a`` has and ``b`` has not; None
    when the part either does not share with the other holds a dispatch twice (then the plain
    definitions are read instead)."""
    if a is b:
        return [], []
    # What both share at the same place cancels out, a dispatch held twice included: the
    # difference is that of the rest, a set difference when neither rest repeats an item.
    ua, ub = unshared(a, b)
    if len(ua) + len(ub) < 2:  # one dispatch started or ended (most steps), or none
        return list(ub), list(ua)
    sa, sb = set(ua), set(ub)
    if len(sa) != len(ua) or len(sb) != len(ub):
        return None
    return list(sb - sa), list(sa - sb)


class ActiveIndex(NamedTuple):
    """The active dispatches by work ID, by task, and their number per rank."""

    by_work: dict[str, tuple[Pair, ...]]
    by_task: dict[str, tuple[Pair, ...]]
    per_rank: dict[int, int]


#: The index of the last few ``State.active`` values, each kept with its value so that its id
#: cannot be reused while the entry lives: the index of a step's state is made from the last
#: one's, which it replaces.
_INDEX: dict[int, tuple[tuple[Pair, ...], ActiveIndex]] = {}
_INDEX_SIZE = 16


def _indexed(
    active: tuple[Pair, ...],
    since: tuple[Pair, ...],
    mv: tuple[list[Pair], list[Pair]] | None,
) -> ActiveIndex:
    """The index of ``active``: made from ``since``'s if that is at hand (``mv``, the moves from
    ``since`` to ``active``: a step moves few dispatches), else read in full."""
    hit = _INDEX.get(id(active))
    if hit is not None and hit[0] is active:
        return hit[1]
    base = _INDEX.get(id(since))
    if base is None or base[0] is not since or mv is None:
        base = None
        by_work: dict[str, tuple[Pair, ...]] = {}
        by_task: dict[str, tuple[Pair, ...]] = {}
        per_rank: dict[int, int] = {}
        moved: list[Pair] = list(active)
        gone: list[Pair] = []
    else:
        # ``since``'s index becomes this one, edited in place (a copy would read every active
        # dispatch at every step): it leaves the cache, and is made again, in full, if asked for.
        del _INDEX[id(since)]
        by_work, by_task, per_rank = base[1]
        moved, gone = mv
    for p in gone:  # an entry left empty is removed: the index stays the size of ``active``
        r, d = p
        _unindex(by_work, d.work, p)
        _unindex(by_task, d.task, p)
        per_rank[r] -= 1
    for p in moved:
        r, d = p
        by_work[d.work] = (*by_work.get(d.work, ()), p)
        by_task[d.task] = (*by_task.get(d.task, ()), p)
        per_rank[r] = per_rank.get(r, 0) + 1
    index = ActiveIndex(by_work, by_task, per_rank)
    if len(_INDEX) >= _INDEX_SIZE:
        _INDEX.clear()
    _INDEX[id(active)] = (active, index)
    return index


def _unindex(by: dict[str, tuple[Pair, ...]], key: str, p: Pair) -> None:
    """``by[key]`` without ``p``, the entry removed once empty."""
    held = by[key]
    if len(held) == 1 and held[0] == p:  # most keys index one dispatch
        del by[key]
        return
    rest = tuple(x for x in held if x != p)
    if rest:
        by[key] = rest
    else:
        del by[key]


#: The untagged journal leases of the last few lease maps, each kept with its map (as ``_INDEX``).
_UNTAGGED: dict[int, tuple[Map[str, Lease], tuple[str, ...]]] = {}


def _untagged(
    leases: Map[str, Lease], since: Map[str, Lease], keys: Sequence[str]
) -> tuple[str, ...]:
    """The work IDs of the leases in ``leases`` without the Unix tag: made from those of
    ``since`` if at hand (``keys``: the work IDs whose lease differs between the two), else read
    in full."""
    hit = _UNTAGGED.get(id(leases))
    if hit is not None and hit[0] is leases:
        return hit[1]
    base = _UNTAGGED.get(id(since))
    if base is None or base[0] is not since:
        out = tuple(w for w, x in leases if x.clock != CLOCK_UNIX)
    else:
        kept = [w for w in base[1] if w not in keys] if base[1] else []
        for w in keys:
            x = get(leases, w)
            if x is not None and x.clock != CLOCK_UNIX:
                kept.append(w)
        out = tuple(sorted(kept)) if kept else ()
    if len(_UNTAGGED) >= _INDEX_SIZE:
        _UNTAGGED.clear()
    _UNTAGGED[id(leases)] = (leases, out)
    return out


class Diff:
    """What differs from state ``a`` to state ``b``: the keys of each map and the members of each
    set (``state.changed``), and the dispatches started and ended (``moves``: None when the part
    of ``active`` either does not share with the other holds a dispatch twice). Found once per
    step and read by every check of the step."""

    __slots__ = (
        "_index",
        "a",
        "attempts",
        "b",
        "completed",
        "epoch_same",
        "gens",
        "gnet",
        "leases",
        "moves",
        "net",
        "state_leases",
        "stats",
    )

    a: State
    b: State
    leases: Sequence[str]
    completed: Sequence[str]
    attempts: Sequence[str]
    state_leases: Sequence[str]
    stats: Sequence[str]
    net: Sequence[tuple[int, str]]
    gnet: Sequence[tuple[int, str, int]]
    gens: Sequence[int]
    moves: tuple[list[Pair], list[Pair]] | None
    epoch_same: bool

    def __init__(self, a: State, b: State) -> None:
        self.a, self.b = a, b
        ja, jb, ca, cb = a.journal, b.journal, a.coordinator, b.coordinator
        if ja is jb:
            self.leases = self.completed = self.attempts = ()
        else:
            self.leases = changed(ja.leases, jb.leases)
            self.completed = changed(ja.completed, jb.completed)
            self.attempts = changed(ja.attempts, jb.attempts)
        if ca is cb:
            self.state_leases = self.stats = ()
        else:
            self.state_leases = changed(ca.leases, cb.leases)
            self.stats = changed(ca.stats, cb.stats)
        self.epoch_same = ca.epoch == cb.epoch
        self.net = changed(a.net, b.net)
        self.gnet = changed(a.gnet, b.gnet)
        self.gens = changed(a.gens, b.gens)
        self.moves = _moves(a.active, b.active)
        self._index: ActiveIndex | None = None

    def shared_with(self, a: State) -> bool:
        """Whether ``a`` holds the same parts as this diff's ``a`` but perhaps its clocks (so the
        diff from ``a`` to ``b`` is this one: a trace step's ``before`` is the last state checked
        moved to the step's time)."""
        x = self.a
        return (
            a.journal is x.journal
            and a.coordinator is x.coordinator
            and a.active is x.active
            and a.net is x.net
            and a.gnet is x.gnet
            and a.gens is x.gens
        )

    def index(self) -> ActiveIndex:
        """The index of ``b``'s active dispatches. Read it before the next step's: that one is
        made by editing this one in place (``_indexed``)."""
        if self._index is None:
            self._index = _indexed(self.b.active, self.a.active, self.moves)
        return self._index


def _type_ok(s: State, b: Bounds, since: State, d: Diff) -> bool:
    works, tasks, ranks = b.work_set, b.task_set, b.rank_set
    j, c = s.journal, s.coordinator
    if not (
        0 <= s.wall <= b.max_wall
        and 0 <= s.mono <= b.max_wall
        and 0 <= s.reboots <= b.max_reboots
        and 0 <= s.rollbacks <= b.max_rollbacks
        and 1 <= c.epoch <= b.max_restarts + 1
        and 0 <= s.dups <= b.max_dups
    ):
        return False
    mv = d.moves
    if mv is None:
        return full.type_ok(s, b)
    # Plain loops, not all(...): this runs at every step of a trace. Each part is read only
    # where it differs from ``since``.
    for w in d.leases:
        x = get(j.leases, w)
        if x is not None and not (
            w in works and x.owner in ranks and x.clock in CLOCKS and x.gen >= 0
        ):
            return False
    for w in d.completed:
        if w not in works and w in j.completed:
            return False
    for w in d.attempts:
        n = get(j.attempts, w)
        if n is not None and not (w in works and n >= 1):
            return False
    # A lease's epoch is bounded by the coordinator's: all are read again when that changes.
    if d.epoch_same:
        for t in d.state_leases:
            y = get(c.leases, t)
            if y is not None and not (
                t in tasks and y.owner in ranks and 1 <= y.epoch <= c.epoch and y.gen >= 0
            ):
                return False
    else:
        for t, y in c.leases:
            if not (t in tasks and y.owner in ranks and 1 <= y.epoch <= c.epoch and y.gen >= 0):
                return False
    for t in d.stats:
        z = get(c.stats, t)
        if z is not None and not (
            t in tasks and z.completions >= 0 and z.failures >= 0 and z.reward >= 0 and z.cost >= 0
        ):
            return False
    for r, p in mv[0]:
        if not (r in ranks and p.work in works and p.task == b.task(p.work) and p.gen >= 0):
            return False
    # Only a rank given a new dispatch can go beyond the pipeline.
    if mv[0] and len(s.active) > b.pipeline:
        per_rank = d.index().per_rank
        for r, _ in mv[0]:
            if per_rank[r] > b.pipeline:
                return False
    for r, w in d.net:
        if not (r in ranks and w in works) and (r, w) in s.net:
            return False
    for r, w, g in d.gnet:
        if not (r in ranks and w in works and g >= 1) and (r, w, g) in s.gnet:
            return False
    for r in d.gens:
        n = get(s.gens, r)
        if n is not None and not (r in ranks and 1 <= n < b.gen_base):
            return False
    return True


# L1: A local work/state ID has at most one active worker at any moment.
def _l1_single_owner(s: State, b: Bounds, since: State, d: Diff) -> bool:
    # Only a dispatch the step started can share its work or task with another.
    mv = d.moves
    if mv is None:
        return full.l1_single_owner(s, b)
    if not mv[0]:
        return True
    by_work, by_task, _ = d.index()
    for _, x in mv[0]:  # noqa: SIM110  (a loop: all() of a generator costs more per step)
        if len(by_work[x.work]) != 1 or len(by_task[x.task]) != 1:
            return False
    return True


# L2: complete, abandon and discard change state only when the worker is the current owner.
def _l2_owner_fenced(s: State, b: Bounds, since: State, d: Diff) -> bool:
    # Only the dispatches that are new, or whose work or task lease changed, are read (all of
    # them when the epoch changed: it decides which state leases are active).
    mv = d.moves
    if not d.epoch_same or mv is None:
        return full.l2_owner_fenced(s, b)
    if not (d.leases or d.state_leases or mv[0]):
        return True
    jl, c = s.journal.leases, s.coordinator
    idx = d.index()
    read = set(mv[0])
    for w in d.leases:
        read.update(idx.by_work.get(w, ()))
    for t in d.state_leases:
        read.update(idx.by_task.get(t, ()))
    for r, x in read:
        lease = get(jl, x.work)
        state = active_lease(c, x.task)
        if lease is None or (lease.owner, lease.gen) != (r, x.gen):
            return False
        if state is None or (state.owner, state.gen) != (r, x.gen):
            return False
    return True


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def _l6_no_inherited_ownership(s: State, b: Bounds, since: State, d: Diff) -> bool:
    # Only the state leases that changed, or whose dispatch ended, are read (all when the
    # epoch changed).
    mv = d.moves
    if not d.epoch_same or mv is None:
        return full.l6_no_inherited_ownership(s, b)
    tasks: Collection[str] = d.state_leases
    if mv[1]:
        tasks = {*tasks, *(x.task for _, x in mv[1])}
    if not tasks:
        return True
    c = s.coordinator
    by_task = d.index().by_task
    for t in tasks:
        y = get(c.leases, t)
        if y is None or y.epoch != c.epoch:
            continue  # no active lease: nothing to own
        for r, x in by_task.get(t, ()):
            if r == y.owner and x.gen == y.gen:
                break
        else:
            return False
    return True


# L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
def _l5_legacy_migratable(s: State, b: Bounds, since: State, d: Diff) -> bool:
    # Only the untagged leases are read: the property asks nothing of the others.
    leases = s.journal.leases
    for w in _untagged(leases, since.journal.leases, d.leases):
        x = get(leases, w)
        assert x is not None
        if not reclaimable(x.updated, x.clock, s.wall, s.mono, b.ttl, b.flavour):
            return False
    return True


# Beyond F314: per task, the coordinator never books more completions than the journal holds completed work IDs of it.
def _completions_accounted(s: State, b: Bounds, since: State, d: Diff) -> bool:
    # Only the tasks whose statistics or completed work IDs changed are read.
    if not (d.completed or d.stats):
        return True
    task, works = b.task, b.work_set
    tasks = set(d.stats)
    for w in d.completed:
        if w in works:
            tasks.add(task(w))
    for t in tasks:  # noqa: SIM110  (a loop: all() of a generator costs more per step)
        if not full.completions_kept(s, b, t):
            return False
    return True


# L7: A state ID in a result never overrides the authoritative ID the master stored at dispatch.
def _l7_authoritative_state_id(before: State, after: State, b: Bounds, d: Diff) -> bool:
    # The dispatches that ended, found once.
    if not d.epoch_same:
        return True
    if d.moves is None:
        return full.l7_authoritative_state_id(before, after, b)
    for r, x in d.moves[1]:
        lease = active_lease(after.coordinator, x.task)
        if lease is not None and (lease.owner, lease.gen) == (r, x.gen):
            return False
    return True


# L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
def _l3_refusal_changes_nothing(before: State, after: State, b: Bounds, d: Diff) -> bool:
    # Attempts and leases: the work IDs and tasks whose entries changed; failures: the tasks
    # whose statistics changed; network: the results that changed, against the dispatches the
    # step started.
    j0, j1 = before.journal, after.journal
    c0, c1 = before.coordinator, after.coordinator
    works, tasks = b.work_set, b.task_set
    if d.attempts or d.leases:
        touched = [*d.attempts, *d.leases]
        for w in set(touched) if len(touched) > 1 else touched:
            if w in works and not full.l3_work_kept(j0, j1, w):
                return False
    for t in d.state_leases:
        if t in tasks and not full.l3_task_kept(c0, c1, t):
            return False
    if d.stats and d.epoch_same:
        for t in d.stats:
            if t in tasks and not full.l3_stats_kept(c0, c1, t):
                return False
    if not (d.net or d.gnet):
        return True
    mv = d.moves
    if mv is None:
        return full.l3_network(before, after)
    # Started: in ``after.active`` and not in ``before.active`` (a set difference, as the spec's
    # active' \ active; ``moves`` may name a dispatch ``before`` holds once and ``after`` twice).
    started = [p for p in mv[0] if not _holds(before.active, p)]
    if d.net:
        sent = {(r, x.work) for r, x in started}
        for m in d.net:
            if m in after.net and m not in sent:
                return False
    if d.gnet:
        gsent = {(r, x.work, x.gen) for r, x in started}
        for g in d.gnet:
            if g in after.gnet and g not in gsent:
                return False
    return True


def _holds(active: tuple[Pair, ...], p: Pair) -> bool:
    """Whether the sorted ``active`` holds ``p`` (a bisection)."""
    i = bisect_left(active, p)
    return i < len(active) and active[i] == p


# L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
def _l6_statistics_survive(before: State, after: State, b: Bounds, d: Diff) -> bool:
    # No step, a restart included, ever loses a statistic.
    s0, s1 = before.coordinator.stats, after.coordinator.stats
    for t in d.stats:
        x, y = get(s0, t), get(s1, t)
        if x is None:
            continue  # a new entry: nothing to lose
        if y is None or y.completions < x.completions or y.failures < x.failures:
            return False
        if y.reward < x.reward or y.cost < x.cost:
            return False
    return True


DiffCheck = Callable[[State, Bounds, State, Diff], bool]
DiffStep = Callable[[State, State, Bounds, Diff], bool]


def _state_form(name: str, check: DiffCheck) -> Callable[..., bool]:
    plain = full.STATE_INVARIANTS[name]

    def form(s: State, b: Bounds, since: State | None = None) -> bool:
        return plain(s, b) if since is None else check(s, b, since, Diff(since, s))

    form.__name__ = form.__qualname__ = check.__name__.lstrip("_")
    form.__doc__ = (
        f"``invariants.{form.__name__}(s, b)``, given that ``since`` (if any) satisfies it "
        "under ``b``: reads only what differs from ``since``."
    )
    return form


def _step_form(check: DiffStep) -> Callable[..., bool]:
    def form(before: State, after: State, b: Bounds) -> bool:
        return check(before, after, b, Diff(before, after))

    form.__name__ = form.__qualname__ = check.__name__.lstrip("_")
    form.__doc__ = f"``invariants.{form.__name__}``, reading only what the step changed."
    return form


#: The state invariants read through a ``Diff`` from the last state checked, by TLA+ name.
DIFF_STATE: dict[str, DiffCheck] = {
    "TypeOK": _type_ok,
    "L1_SingleOwner": _l1_single_owner,
    "L2_OwnerFenced": _l2_owner_fenced,
    "L5_LegacyMigratable": _l5_legacy_migratable,
    "L6_NoInheritedOwnership": _l6_no_inherited_ownership,
    "CompletionsAccounted": _completions_accounted,
}
#: The step properties read through the step's ``Diff``.
DIFF_STEP: dict[str, DiffStep] = {
    "L3_RefusalChangesNothing": _l3_refusal_changes_nothing,
    "L7_AuthoritativeStateId": _l7_authoritative_state_id,
    "L6_StatisticsSurvive": _l6_statistics_survive,
}

type_ok = _state_form("TypeOK", _type_ok)
l1_single_owner = _state_form("L1_SingleOwner", _l1_single_owner)
l2_owner_fenced = _state_form("L2_OwnerFenced", _l2_owner_fenced)
l5_legacy_migratable = _state_form("L5_LegacyMigratable", _l5_legacy_migratable)
l6_no_inherited_ownership = _state_form("L6_NoInheritedOwnership", _l6_no_inherited_ownership)
completions_accounted = _state_form("CompletionsAccounted", _completions_accounted)
l3_refusal_changes_nothing = _step_form(_l3_refusal_changes_nothing)
l7_authoritative_state_id = _step_form(_l7_authoritative_state_id)
l6_statistics_survive = _step_form(_l6_statistics_survive)


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
    "L5_LegacyMigratable": l5_legacy_migratable,
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
    trace replay calls at every step (``Checker(skip)(before, after, b, since)``). What differs
    from ``since`` to ``after`` is found once (a ``Diff``) and read by every check; the step's
    diff is the same one when ``before`` is ``since`` moved in time, as in a replay."""

    __slots__ = ("_diff", "_plain", "_since", "_steps", "_steps_diff")

    def __init__(self, skip: Collection[str] = ()) -> None:
        # (position, name, check) of each kind, so verdicts come in the order of ``violated``.
        order = {name: n for n, name in enumerate(STATE_INVARIANTS)}
        self._diff = [
            (order[name], name, check) for name, check in DIFF_STATE.items() if name not in skip
        ]
        self._since = [
            (order[name], name, check)
            for name, check in INCREMENTAL_STATE.items()
            if name not in DIFF_STATE and name not in skip
        ]
        self._plain = [
            (order[name], name, check)
            for name, check in full.STATE_INVARIANTS.items()
            if name not in INCREMENTAL_STATE and name not in skip
        ]
        steps = [name for name in STEP_PROPERTIES if name not in skip]
        self._steps_diff = [(name, DIFF_STEP[name]) for name in steps if name in DIFF_STEP]
        self._steps = [(name, STEP_PROPERTIES[name]) for name in steps if name not in DIFF_STEP]

    def __call__(
        self, before: State, after: State, b: Bounds, since: State | None = None
    ) -> list[str]:
        # Plain loops that build nothing while every check holds (most steps of a replay).
        bad: list[tuple[int, str]] = []
        if since is None:
            d = None
            for n, name, _ in self._diff:
                if not STATE_INVARIANTS[name](after, b, None):
                    bad.append((n, name))
        else:
            d = Diff(since, after)
            for n, name, check in self._diff:
                if not check(after, b, since, d):
                    bad.append((n, name))
        for n, name, since_check in self._since:
            if not since_check(after, b, since):
                bad.append((n, name))
        for n, name, plain in self._plain:
            if not plain(after, b):
                bad.append((n, name))
        names = [name for _, name in sorted(bad)] if bad else []
        db = d if d is not None and d.b is after and d.shared_with(before) else Diff(before, after)
        failed: set[str] = set()
        for name, step in self._steps_diff:
            if not step(before, after, b, db):
                failed.add(name)
        for name, plain_step in self._steps:
            if not plain_step(before, after, b):
                failed.add(name)
        if failed:
            names += [name for name in STEP_PROPERTIES if name in failed]
        return names


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
