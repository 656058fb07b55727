"""Pure decision rules shared by the journal and the coordinator: recovery and result identity.

These are the model's twins of the implementation's decision functions; CrossHair compares them.
"""

from __future__ import annotations

from leasefence.model.flavours import Flavour

#: Clock domain of a persisted timestamp. ``unix``: tagged Unix time (F314). ``legacy``: an
#: untagged monotonic value from a journal written before F314. ``mono``: an untagged monotonic
#: value written by pre-fix code (defect 3); on disk it looks exactly like ``legacy``.
CLOCK_UNIX = "unix"
CLOCK_LEGACY = "legacy"
CLOCK_MONO = "mono"
CLOCKS = (CLOCK_UNIX, CLOCK_LEGACY, CLOCK_MONO)


def reclaimable(
    updated: int, clock: str, wall: int, mono: int, ttl: int, flavour: Flavour = Flavour.FIXED
) -> bool:
    """Whether ``recover(ttl)`` reclaims a lease stamped ``updated`` in domain ``clock``.

    F314 §3.2, in order: (1) ``ttl == 0`` reclaims every active record; (2) a record without
    the Unix tag is a legacy record from another epoch and is reclaimed; (3) otherwise reclaim
    when ``wall - updated >= ttl``. Beyond F314: a Unix record dated more than ``ttl`` in the
    future (the wall clock was stepped back) is reclaimed too, so no lease stays stuck for more
    than twice the TTL of real time whatever the wall clock did.

    Pre-fix (defect 3) recovery compared monotonic values only: ``mono - updated >= ttl``, which
    is negative after a reboot, so not even ``ttl == 0`` reclaimed such a lease.

    Contracts (checked by CrossHair, see ``leasefence verify``):

    pre: ttl >= 0
    post: flavour != Flavour.FIXED or ttl != 0 or __return__
    post: flavour != Flavour.FIXED or clock == CLOCK_UNIX or __return__
    post: flavour != Flavour.FIXED or not (wall - updated >= ttl) or __return__
    post: flavour != Flavour.FIXED or any(reclaimable(updated, clock, wall + d, mono + d, ttl) for d in range(2 * ttl + 1))
    """
    if flavour is Flavour.MONOTONIC_PERSISTED:
        return mono - updated >= ttl
    if ttl == 0:
        return True
    if clock != CLOCK_UNIX:
        return True
    if updated - wall > ttl:
        return True
    return wall - updated >= ttl


def reclaimable_within(
    updated: int,
    clock: str,
    wall: int,
    mono: int,
    ttl: int,
    horizon: int,
    flavour: Flavour = Flavour.FIXED,
) -> bool:
    """``any(reclaimable(updated, clock, wall + d, mono + d, ttl, flavour) for d in
    range(horizon + 1))``: whether the lease is reclaimable at some instant of the next
    ``horizon`` ticks, in closed form (no scan of the horizon: a trace replay asks it of every
    lease at every step). Each test of ``reclaimable`` is monotone in ``d``: the elapsed time
    grows with it (best at ``d = horizon``), the future date shrinks (best at ``d = 0``)."""
    if horizon < 0:
        return False
    if flavour is Flavour.MONOTONIC_PERSISTED:
        return mono + horizon - updated >= ttl
    if ttl == 0 or clock != CLOCK_UNIX:
        return True
    return updated - wall > ttl or wall + horizon - updated >= ttl


def recovers(
    updated: int, clock: str, wall: int, mono: int, ttl: int, flavour: Flavour = Flavour.FIXED
) -> bool:
    """Recovers(updated, clock): the verdict recovery (``recover_work``, ``recover_states``)
    gives a lease: ``reclaimable``, but under two must-fail twins. ``LEGACY_NOT_MIGRATED``
    ignores the clock tag (an untagged record is compared as Unix time);
    ``KEEP_FUTURE_LEASES`` drops the future-dated disjunct."""
    if flavour is Flavour.LEGACY_NOT_MIGRATED:
        return reclaimable(updated, CLOCK_UNIX, wall, mono, ttl, flavour)
    if flavour is Flavour.KEEP_FUTURE_LEASES and clock == CLOCK_UNIX:
        return ttl == 0 or wall - updated >= ttl
    return reclaimable(updated, clock, wall, mono, ttl, flavour)


def authoritative_state_task(
    active: str | None, reported: str | None, flavour: Flavour = Flavour.FIXED
) -> str | None:
    """The state task a result commits: the master's stored ID wins (F314 §3.4, L7).

    The worker's report is used only when the master holds no active ID (old protocol).
    Pre-fix (defect 4) preferred the report whenever there was one.

    post: flavour != Flavour.FIXED or active is None or __return__ == active
    post: active is not None or __return__ == reported
    """
    if flavour is Flavour.REPORTED_ID_WINS and reported is not None:
        return reported
    return active if active is not None else reported
