"""The state-shard coordinator's actions (``StateShardCoordinator``), as pure functions.

Each docstring starts with the TLA+ action it is, then says when it succeeds and what it changes.
A lease is *active* when it was taken in the coordinator's current epoch; older ones are stale.
"""

from __future__ import annotations

from leasefence.model.flavours import Flavour
from leasefence.model.rules import CLOCK_UNIX, recovers
from leasefence.model.state import Coordinator, Map, StateLease, Stats, drop, get, put, revalued

FIXED = Flavour.FIXED


def active_lease(c: Coordinator, task: str) -> StateLease | None:
    """The lease of ``task`` if it is active (taken in the current epoch), else None."""
    lease = get(c.leases, task)
    return lease if lease is not None and lease.epoch == c.epoch else None


def add_stats(c: Coordinator, task: str, delta: Stats) -> Map[str, Stats]:
    """AddStats(c, t, ...): the statistics with ``delta`` booked for ``task``."""
    old = get(c.stats, task) or Stats()
    return put(
        c.stats,
        task,
        Stats(
            completions=old.completions + delta.completions,
            failures=old.failures + delta.failures,
            reward=old.reward + delta.reward,
            cost=old.cost + delta.cost,
        ),
    )


def lease_state(
    c: Coordinator,
    task: str,
    worker: int,
    wall: int,
    mono: int,
    flavour: Flavour = FIXED,
    gen: int = 0,
) -> tuple[bool, Coordinator]:
    """LeaseState(s, r). Enabled when ``task`` has no active lease (L1); a stale one is replaced.

    The owner token is ``(worker, gen)`` (``gen`` 0: rank only). A refused lease changes nothing
    (L3). Defect 2 overwrote the active owner; defect 3 stamped monotonic time.
    """
    if active_lease(c, task) is not None and flavour is not Flavour.UNFENCED_STATE:
        return False, c
    stamp = mono if flavour is Flavour.MONOTONIC_PERSISTED else wall
    lease = StateLease(owner=worker, updated=stamp, epoch=c.epoch, gen=gen)
    return True, c._replace(leases=put(c.leases, task, lease))


def _owned(c: Coordinator, task: str, worker: int, gen: int = 0) -> bool:
    """Whether the owner token ``(worker, gen)`` is exactly the active lease's owner."""
    return _owns(active_lease(c, task), worker, gen)


def _owns(lease: StateLease | None, worker: int, gen: int) -> bool:
    """Whether the owner token ``(worker, gen)`` is exactly ``lease``'s owner (None: no lease)."""
    return lease is not None and (lease.owner, lease.gen) == (worker, gen)


def complete_state(
    c: Coordinator,
    task: str,
    worker: int,
    reward: int = 1,
    cost: int = 1,
    flavour: Flavour = FIXED,
    gen: int = 0,
) -> tuple[bool, Coordinator]:
    """CompleteState(s, r). Enabled when ``(worker, gen)`` owns the active lease of ``task`` (L2).

    Frees the task and adds one completion, ``reward`` and ``cost`` to its statistics. Defect 2
    completed whatever active lease there was, whoever owned it.
    """
    lease = active_lease(c, task)
    if lease is None:
        return False, c
    if not _owns(lease, worker, gen) and flavour is not Flavour.UNFENCED_STATE:
        return False, c
    return True, c._replace(
        leases=drop(c.leases, task),
        stats=add_stats(c, task, Stats(completions=1, reward=reward, cost=cost)),
    )


def abandon_state(
    c: Coordinator, task: str, worker: int, cost: int = 1, gen: int = 0
) -> tuple[bool, Coordinator]:
    """AbandonState(s, r). Enabled when ``(worker, gen)`` owns the active lease of ``task`` (L2).

    Frees the task and adds one failure and ``cost`` to its statistics.
    """
    if not _owned(c, task, worker, gen):
        return False, c
    return True, c._replace(
        leases=drop(c.leases, task), stats=add_stats(c, task, Stats(failures=1, cost=cost))
    )


def discard_state(c: Coordinator, task: str, worker: int, gen: int = 0) -> tuple[bool, Coordinator]:
    """DiscardState(s, r). Enabled when ``(worker, gen)`` owns the active lease of ``task`` (L2).

    Frees the task without touching its statistics (the work was withdrawn, not tried).
    """
    if not _owned(c, task, worker, gen):
        return False, c
    return True, c._replace(leases=drop(c.leases, task))


def recover_states(
    c: Coordinator, ttl: int, wall: int, mono: int, flavour: Flavour = FIXED
) -> tuple[tuple[str, ...], Coordinator]:
    """RecoverStates (``recover_expired``). Voids every stale lease and every expired active one.

    Expiry follows the journal's rule for Unix records (``rules.recovers``). Returns the voided
    tasks in sorted order. Statistics are untouched.
    """
    gone = tuple(
        t
        for t, lease in c.leases
        if lease.epoch != c.epoch or recovers(lease.updated, CLOCK_UNIX, wall, mono, ttl, flavour)
    )
    if not gone:
        return (), c
    leases = c.leases
    for t in gone:
        leases = drop(leases, t)
    return gone, c._replace(leases=leases)


def restart_coordinator(c: Coordinator, flavour: Flavour = FIXED) -> Coordinator:
    """RestartCoordinator. Loads the snapshot into the next epoch (L6).

    Statistics survive; every lease keeps its owner for the record but its time is zeroed and its
    epoch is now older than the coordinator's, so it grants no ownership and the first
    ``recover_states`` clears it. The twin ``RESTART_KEEPS_OWNERS`` moves every lease into the
    new epoch; ``RESTART_DROPS_STATS`` loads no statistics.
    """
    keep = flavour is Flavour.RESTART_KEEPS_OWNERS
    pairs = tuple(
        (t, s._replace(updated=0, epoch=c.epoch + 1 if keep else s.epoch)) for t, s in c.leases
    )
    leases = revalued(c.leases, pairs)
    stats = () if flavour is Flavour.RESTART_DROPS_STATS else c.stats
    return c._replace(epoch=c.epoch + 1, leases=leases, stats=stats)
