"""A dispatch generation ``(epoch, counter)`` (issue 12): with the rank, the owner token of a
lease. Part of the wire protocol (``wire``, which re-exports it), the journal's and the
coordinator's records and the traces, kept in a module of its own so that what reads only
generations (``trace check``, the journal's records) does not import the wire's message classes.
"""

from __future__ import annotations

from typing import Final, TypeGuard

#: A dispatch generation ``(epoch, counter)``: with the rank, the owner token of a lease.
Generation = tuple[int, int]
#: The largest epoch or counter a generation may carry (it must fit a signed 64-bit integer).
MAX_GENERATION_PART: Final = 2**63 - 1
#: Below this, a part is in range at a glance (``_in_range``).
_SMALL: Final = 2**60


def valid_generation(value: object) -> bool:
    """Whether ``value`` is a generation: two whole numbers ``(epoch, counter)`` in
    ``0..MAX_GENERATION_PART`` (a JSON array of two integers on the wire)."""
    if not isinstance(value, (tuple, list)) or len(value) != 2:
        return False
    epoch, counter = value[0], value[1]
    if type(epoch) is int and type(counter) is int:  # the common case, without ``whole``
        return _in_range(epoch, counter)
    return whole(epoch, MAX_GENERATION_PART) and whole(counter, MAX_GENERATION_PART)


def plain_generation(value: object) -> TypeGuard[Generation | None]:
    """Whether ``value`` is None or a generation as the master makes one: a ``tuple`` of exactly
    two ``int`` in range. The fast checks' test (the journal's, the coordinator's and the
    record writers'): where it says no, ``valid_generation`` and the named checks decide."""
    if value is None:
        return True
    if type(value) is not tuple or len(value) != 2:
        return False
    epoch, counter = value[0], value[1]
    return type(epoch) is int and type(counter) is int and _in_range(epoch, counter)


def _in_range(epoch: int, counter: int) -> bool:
    """Whether both parts are in ``0..MAX_GENERATION_PART``: compiled, a part under ``_SMALL``
    is compared as a machine word (``MAX_GENERATION_PART`` is not one, and a comparison with it
    goes through Python's objects: a thousand instructions a generation)."""
    if 0 <= epoch < _SMALL and 0 <= counter < _SMALL:
        return True
    return 0 <= epoch <= MAX_GENERATION_PART and 0 <= counter <= MAX_GENERATION_PART


def whole(value: object, maximum: int) -> bool:
    """Whether ``value`` is a whole number (an ``int``, not a ``bool``) in ``0..maximum``."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= maximum
