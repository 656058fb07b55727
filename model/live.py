"""The live system (``tla/LeaseFenceLive.tla``): the protocol of ``system.successors`` with a clock
that keeps moving and the lease bounds as guards, its fairness, and its liveness properties.

The spec is the norm and this module mirrors it: ``live_successors`` is its ``Next``,
``FAIRNESS`` its ``Fairness`` (why each assumption is realistic is said there, in F314's
terms), ``LIVE_PROPERTIES`` its three properties. ``model.livecheck`` checks them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from leasefence.model.flavours import EXPECTED_VIOLATIONS, Flavour
from leasefence.model.rules import CLOCK_MONO, CLOCK_UNIX
from leasefence.model.state import State, get, revalued
from leasefence.model.system import Bounds, Label, dispatches_of, successors


@dataclass(frozen=True)
class LiveBounds:
    """The constants of one live exploration: the protocol's ``Bounds`` plus the live spec's
    choices. ``fair``: ``LiveSpec`` (True) or ``LiveSpecUnfair`` (no fairness, a must-fail
    twin). ``starve``: the spec's ``Starve``, work IDs the dispatcher never offers (planted
    bug). ``halt_after_rollback``: the spec's ``RecoveryHaltsAfterRollback`` (planted bug: the
    periodic recovery stops for good once the wall clock has stepped back)."""

    base: Bounds
    fair: bool = True
    starve: frozenset[str] = frozenset()
    halt_after_rollback: bool = False

    def __post_init__(self) -> None:
        if self.base.max_wall < self.base.ttl:
            raise ValueError(
                f"a live check needs max_wall >= ttl (got {self.base.max_wall} < {self.base.ttl})"
            )
        if not self.starve <= self.base.work_set:
            raise ValueError(f"starve names unknown work IDs: {sorted(self.starve)}")


def attempts(s: State, work: str) -> int:
    return get(s.journal.attempts, work) or 0


def budget(s: State, work: str, b: Bounds) -> bool:
    """Budget(w): one more lease of ``work`` stays within ``max_attempts`` (LeaseFence's state
    constraint, here a guard, per item only: ``max_leases`` is not used, see the spec)."""
    return attempts(s, work) < b.max_attempts


def given_up(s: State, work: str, b: Bounds) -> bool:
    """GivenUp(w): neither completed nor leased, and its budget spent."""
    return (
        work not in s.journal.completed
        and get(s.journal.leases, work) is None
        and not budget(s, work, b)
    )


def settled(s: State, work: str, b: Bounds) -> bool:
    """Settled(w): completed or given up."""
    return work in s.journal.completed or given_up(s, work, b)


def _older(u: int) -> int:
    return u - 1 if u > 0 else 0


def tick(s: State, b: Bounds) -> State:
    """Tick (the sliding clock): always enabled. A clock below ``max_wall`` advances one tick;
    for a clock at ``max_wall`` every stamp of its domain gets one tick older (down to 0);
    legacy stamps never move."""
    wall_cap, mono_cap = s.wall >= b.max_wall, s.mono >= b.max_wall
    j, c = s.journal, s.coordinator
    if wall_cap or mono_cap:
        if j.leases:
            j = j._replace(
                leases=revalued(
                    j.leases,
                    tuple(
                        (w, x._replace(updated=_older(x.updated)))
                        if (x.clock == CLOCK_UNIX and wall_cap)
                        or (x.clock == CLOCK_MONO and mono_cap)
                        else (w, x)
                        for w, x in j.leases
                    ),
                )
            )
        state_cap = mono_cap if b.flavour is Flavour.MONOTONIC_PERSISTED else wall_cap
        if state_cap and c.leases:
            c = c._replace(
                leases=revalued(
                    c.leases,
                    tuple((t, x._replace(updated=_older(x.updated))) for t, x in c.leases),
                )
            )
    return s._replace(
        wall=s.wall if wall_cap else s.wall + 1,
        mono=s.mono if mono_cap else s.mono + 1,
        journal=j,
        coordinator=c,
    )


def live_successors(s: State, lb: LiveBounds) -> Iterator[tuple[Label, State]]:
    """Next of LeaseFenceLive: ``system.successors`` with the sliding ``tick``, DispatchWork and
    LegacyRecord within ``budget`` (DispatchWork never of a starved ID), ReclaimExpired off
    after a rollback under ``halt_after_rollback``."""
    b = lb.base
    for label, t in successors(s, b):
        name, args = label
        if name == "Tick" or name.startswith("Crash"):
            continue  # Tick slides here; a crash mid-step is a fault, not in LeaseFenceLive's Next
        if name in ("DispatchWork", "LegacyRecord"):
            work = str(args[0])
            if not budget(s, work, b) or work in lb.starve:
                continue
        elif name == "ReclaimExpired" and lb.halt_after_rollback and s.rollbacks > 0:
            continue
        yield label, t
    yield ("Tick", ()), tick(s, b)


#: A fairness class: a name and the labels whose steps it covers. Weak fairness of a class
#: (``WF_vars``): a behaviour may not keep one of its steps enabled for ever without taking one.
FairnessClass = tuple[str, Callable[[Label], bool]]


def fairness(lb: LiveBounds) -> list[FairnessClass]:
    """The spec's ``Fairness`` (empty for ``LiveSpecUnfair``): weak fairness of Tick (time
    passes), of ReclaimExpired (the master's periodic recovery) and, per work item, of
    DispatchWork (the master offers every pending item to every free rank). Not of
    DeliverResult: a worker may never answer."""
    if not lb.fair:
        return []
    classes: list[FairnessClass] = [
        ("Tick", _named("Tick")),
        ("ReclaimExpired", _named("ReclaimExpired")),
    ]
    classes += [(f"DispatchWork({w!r}, _)", _dispatch_of(w)) for w in lb.base.works]
    return classes


def _named(name: str) -> Callable[[Label], bool]:
    return lambda label: label[0] == name


def _dispatch_of(work: str) -> Callable[[Label], bool]:
    return lambda label: label[0] == "DispatchWork" and label[1][0] == work


#: A state predicate (P or Q of a leads-to).
Predicate = Callable[[State], bool]


@dataclass(frozen=True)
class LeadsTo:
    """``P ~> Q`` for one work ID, task or rank; ``p is None``: ``<>Q`` (P holds at Init)."""

    prop: str
    instance: str
    p: Predicate | None
    q: Predicate


def _work_lease(work: str) -> tuple[Predicate, Predicate]:
    return (
        lambda s: get(s.journal.leases, work) is not None,
        lambda s: get(s.journal.leases, work) is None,
    )


def _state_lease(task: str) -> tuple[Predicate, Predicate]:
    return (
        lambda s: get(s.coordinator.leases, task) is not None,
        lambda s: get(s.coordinator.leases, task) is None,
    )


def _busy(rank: int) -> tuple[Predicate, Predicate]:
    return (lambda s: bool(dispatches_of(s, rank)), lambda s: not dispatches_of(s, rank))


def _settled(work: str, b: Bounds) -> Predicate:
    return lambda s: settled(s, work, b)


def _every_lease_freed(lb: LiveBounds) -> list[LeadsTo]:
    works = [LeadsTo("EveryLeaseFreed", f"work lease {w}", *_work_lease(w)) for w in lb.base.works]
    tasks = [
        LeadsTo("EveryLeaseFreed", f"state lease {t}", *_state_lease(t)) for t in lb.base.tasks
    ]
    return works + tasks


def _every_rank_idle(lb: LiveBounds) -> list[LeadsTo]:
    return [LeadsTo("EveryRankIdle", f"rank {r}", *_busy(r)) for r in lb.base.ranks]


def _every_item_settled(lb: LiveBounds) -> list[LeadsTo]:
    return [
        LeadsTo("EveryItemSettled", f"item {w}", None, _settled(w, lb.base)) for w in lb.base.works
    ]


#: The liveness properties by their TLA+ name, each as its instances (one per work ID, task or
#: rank), in the order they are checked and reported.
LIVE_PROPERTIES: dict[str, Callable[[LiveBounds], list[LeadsTo]]] = {
    # Every lease is eventually freed: each work lease and each state lease, whatever epoch.
    "EveryLeaseFreed": _every_lease_freed,
    # Every rank is eventually idle: a rank holding a dispatch eventually holds none.
    "EveryRankIdle": _every_rank_idle,
    # Every item is eventually completed or given up.
    "EveryItemSettled": _every_item_settled,
}


def expected_live_violations(lb: LiveBounds) -> frozenset[str]:
    """What a live exploration with these constants must violate (empty: it must pass)."""
    return live_expectation(lb.base.flavour, lb.fair, bool(lb.starve), lb.halt_after_rollback)


def live_expectation(flavour: Flavour, fair: bool, starve: bool, halt: bool) -> frozenset[str]:
    """Every property without fairness; EveryLeaseFreed and EveryRankIdle when recovery halts
    after a rollback; EveryItemSettled when an item is starved; the flavour's own violations."""
    out = set(EXPECTED_VIOLATIONS[flavour])
    if not fair:
        out |= set(LIVE_PROPERTIES)
    if halt:
        out |= {"EveryLeaseFreed", "EveryRankIdle"}
    if starve:
        out.add("EveryItemSettled")
    return frozenset(out)
