"""The work journal's actions (``WorkLeaseJournal``), as pure functions ``(result, next)``.

Each docstring starts with the TLA+ action it is, then says when it succeeds and what it changes.
Timestamps are ticks: ``wall`` (Unix) and ``mono`` (monotonic, reset by a reboot).
"""

from __future__ import annotations

from leasefence.model.flavours import Flavour
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_MONO, CLOCK_UNIX, recovers
from leasefence.model.state import Journal, Lease, add, drop, get, put

FIXED = Flavour.FIXED


def _fenced(flavour: Flavour, worker: int | None) -> int | None:
    """The worker fence in force: defect 1 ignored it (complete/abandon were unconditional)."""
    return None if flavour is Flavour.DUPLICATE_OWNER else worker


def lease_work(
    j: Journal,
    work: str,
    worker: int,
    wall: int,
    mono: int,
    flavour: Flavour = FIXED,
    gen: int = 0,
) -> tuple[bool, Journal]:
    """LeaseWork(w, r). Enabled for a work ID neither completed nor actively leased (L1).

    Grants the lease to ``worker`` stamped with Unix time and tagged ``unix`` (L4), counts an
    attempt and appends one record. A refused lease changes nothing (L3). Defect 1 refused
    only completed IDs; defect 3 stamped monotonic time with no tag. ``gen`` is the owner's
    dispatch generation (0: none, the rank alone is the owner token).

    post: __return__[0] or __return__[1] == j
    post: flavour != Flavour.FIXED or not __return__[0] or (work not in j.completed and get(j.leases, work) is None)
    post: flavour != Flavour.FIXED or not __return__[0] or get(__return__[1].leases, work)[:3] == (worker, wall, CLOCK_UNIX)
    """
    if work in j.completed:
        return False, j
    if get(j.leases, work) is not None and flavour is not Flavour.DUPLICATE_OWNER:
        return False, j
    if flavour is Flavour.MONOTONIC_PERSISTED:
        lease = Lease(owner=worker, updated=mono, clock=CLOCK_MONO, gen=gen)
    else:
        lease = Lease(owner=worker, updated=wall, clock=CLOCK_UNIX, gen=gen)
    attempts = (get(j.attempts, work) or 0) + 1
    return True, j._replace(
        leases=put(j.leases, work, lease), attempts=put(j.attempts, work, attempts)
    )


def complete_work(
    j: Journal, work: str, worker: int | None, flavour: Flavour = FIXED, gen: int = 0
) -> tuple[bool, Journal]:
    """CompleteWork(w, r). With a worker fence: enabled only when the owner token ``(worker,
    gen)`` is exactly the active lease's (``gen`` 0: a rank-only owner).

    Marks the ID completed, drops its lease and appends a ``done`` record. With ``worker=None``
    (offline maintenance, F314's old behaviour) any ID not yet completed is marked completed.
    A refused call returns False and writes nothing (L2).
    """
    worker = _fenced(flavour, worker)
    if work in j.completed:
        return False, j
    lease = get(j.leases, work)
    if worker is not None and (lease is None or (lease.owner, lease.gen) != (worker, gen)):
        return False, j
    return True, j._replace(leases=drop(j.leases, work), completed=add(j.completed, work))


def abandon_work(
    j: Journal, work: str, worker: int | None, flavour: Flavour = FIXED, gen: int = 0
) -> tuple[bool, Journal]:
    """AbandonWork(w, r). Enabled when the lease exists and, with a fence, the owner token
    ``(worker, gen)`` is exactly its owner's.

    Drops the lease (the work may be leased again) and appends a ``reclaim`` record; refused
    calls write nothing (L2).
    """
    worker = _fenced(flavour, worker)
    lease = get(j.leases, work)
    if lease is None or (worker is not None and (lease.owner, lease.gen) != (worker, gen)):
        return False, j
    return True, j._replace(leases=drop(j.leases, work))


def recover_work(
    j: Journal, ttl: int, wall: int, mono: int, flavour: Flavour = FIXED
) -> tuple[tuple[str, ...], Journal]:
    """RecoverWork. Reclaims every active lease the recovery rule selects (``rules.recovers``).

    Appends one ``reclaim`` record per reclaimed ID and returns the IDs in sorted order.
    """
    gone = tuple(
        w
        for w, lease in j.leases
        if recovers(lease.updated, lease.clock, wall, mono, ttl, flavour)
        or (
            flavour is Flavour.RECLAIM_EARLY
            and lease.clock == CLOCK_UNIX
            and wall - lease.updated >= ttl - 1
        )
    )
    if not gone:
        return (), j
    leases = j.leases
    for w in gone:
        leases = drop(leases, w)
    return gone, j._replace(leases=leases)


def compact_journal(j: Journal) -> Journal:
    """CompactJournal. Rewrites the file as one record per completed ID and per active lease.

    Each active entry keeps its own timestamp and clock tag: a legacy value is never relabelled
    as Unix time (F314 §3.2). The abstract state is unchanged: only the file shrinks.
    """
    return j


def legacy_record(j: Journal, work: str, worker: int, stamp: int) -> tuple[bool, Journal]:
    """LegacyRecord(w, r). A journal written before F314 is opened: enabled only while the journal
    holds no record at all, so at most one legacy record arrives, before any F314 lease.

    It carries a monotonic timestamp from another boot and no clock tag; it counts as an attempt.
    """
    if j.attempts:
        return False, j
    attempts = (get(j.attempts, work) or 0) + 1
    return True, j._replace(
        leases=put(j.leases, work, Lease(owner=worker, updated=stamp, clock=CLOCK_LEGACY)),
        attempts=put(j.attempts, work, attempts),
    )
