"""Each implementation decision function beside its model twin, with one signature, so that
``crosshair diffbehavior`` can search for an input on which the two disagree.

Clock domains map as the conformance machines map them: the implementation's ``"unix"`` tag is the
model's ``unix``; anything else (no tag at all, on disk) is the model's ``legacy``. Times are
whole seconds on both sides.
"""

from __future__ import annotations

from leasefence.impl import rules as impl_rules
from leasefence.model import rules as model_rules

#: Timestamps are Unix seconds: exact in a float up to 2**53, which bounds the compared domain.
LIMIT = 2**53


def _domain(*values: int) -> None:
    """Both twins refuse the same inputs: a negative TTL, or a value beyond exact float range."""
    if values[-1] < 0 or any(abs(v) >= LIMIT for v in values):
        raise ValueError("outside the compared domain")


def impl_reclaimable(updated: int, tagged: bool, now: int, ttl: int) -> bool:
    _domain(updated, now, ttl)
    return impl_rules.reclaimable(
        float(updated), "unix" if tagged else None, float(now), float(ttl)
    )


def model_reclaimable(updated: int, tagged: bool, now: int, ttl: int) -> bool:
    _domain(updated, now, ttl)
    clock = model_rules.CLOCK_UNIX if tagged else model_rules.CLOCK_LEGACY
    return model_rules.reclaimable(updated, clock, now, now, ttl)


def impl_authoritative(active: str | None, reported: str | None) -> str | None:
    return impl_rules.authoritative_state_task(active, reported)


def model_authoritative(active: str | None, reported: str | None) -> str | None:
    return model_rules.authoritative_state_task(active, reported)


#: (implementation, model) pairs that must behave the same, as dotted names for CrossHair.
PAIRS: tuple[tuple[str, str], ...] = (
    (
        "leasefence.conformance.twins.impl_reclaimable",
        "leasefence.conformance.twins.model_reclaimable",
    ),
    (
        "leasefence.conformance.twins.impl_authoritative",
        "leasefence.conformance.twins.model_authoritative",
    ),
)
