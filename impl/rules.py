"""The implementation's decision rules for recovery and result identity (twins of the model's).

They are deliberately written apart from ``leasefence.model.rules``: CrossHair's diffbehavior and
the conformance tests compare the two, which would prove nothing if one imported the other.
"""

from __future__ import annotations

import math

from leasefence.impl.errors import InvalidTtl

#: The clock tag F314 writes on every new record (``"clock": "unix"``).
UNIX = "unix"


def check_ttl(ttl: float) -> float:
    """``ttl`` as a float, or ``InvalidTtl`` when it is negative, NaN or infinite."""
    value = float(ttl)
    if math.isnan(value) or math.isinf(value) or value < 0:
        raise InvalidTtl(f"lease_ttl must be a finite number >= 0 seconds, got {ttl!r}")
    return value


def reclaimable(updated: float, clock: str | None, now: float, ttl: float) -> bool:
    """Whether recovery reclaims a lease stamped ``updated`` (Unix seconds) in domain ``clock``.

    F314 §3.2 in order: (1) ``ttl == 0`` reclaims everything; (2) a record without
    ``clock == "unix"`` is a legacy record from another epoch and is reclaimed; (3) a Unix record
    is reclaimed when ``now - updated >= ttl``. Beyond F314: a Unix record dated more than
    ``ttl`` in the future (the wall clock was stepped back) is reclaimed as well, so every lease
    is reclaimable within twice the TTL of real time whatever the wall clock did. Fencing keeps
    this safe: the old owner's late completion is refused.
    """
    if ttl == 0:
        return True
    if clock != UNIX:
        return True
    if updated - now > ttl:
        return True
    return now - updated >= ttl


def authoritative_state_task(active: str | None, reported: str | None) -> str | None:
    """The state task a result commits (F314 §3.4, L7): the master's stored ID always wins.

    The worker's report only detects a mismatch; it is used only when the master holds no
    active ID for that rank (a worker of the old protocol).
    """
    return active if active is not None else reported
