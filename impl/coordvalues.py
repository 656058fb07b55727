"""The coordinator's values: a state task's lease and its statistics (impl/coordinator.py).

Made on every decision (a lease on every dispatch, statistics on every result) and kept for
every state task, they are compiled with the dispatcher, in the form impl/frozen.py describes
(a native class under the build), with slots (interpreted: 104 bytes each, not 208 with a
``__dict__``); impl/coordfile.py writes and reads them.
"""

from __future__ import annotations

from dataclasses import dataclass

from leasefence.impl.frozen import fast_init
from leasefence.impl.generation import Generation


@dataclass(frozen=True, init=False, slots=True)
class StateLease:
    """A state-task lease: owner rank, Unix time it was taken, coordinator epoch it was taken in.

    Active only while ``epoch`` is the coordinator's current epoch; older ones are stale (L6).
    """

    owner: int
    updated: float
    epoch: int
    #: The owner's dispatch generation (issue 12); None: a rank-only owner (F314).
    generation: Generation | None = None

    def __init__(
        self, owner: int, updated: float, epoch: int, generation: Generation | None = None
    ) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.owner = owner  # type: ignore[misc]
        self.updated = updated  # type: ignore[misc]
        self.epoch = epoch  # type: ignore[misc]
        self.generation = generation  # type: ignore[misc]


fast_init(StateLease)


@dataclass(frozen=True, init=False, slots=True)
class Stats:
    """Cumulative statistics of one state task (or of all: ``totals()``); see the module doc."""

    completions: int = 0
    failures: int = 0
    reward: float = 0.0
    cost: float = 0.0

    def __init__(
        self, completions: int = 0, failures: int = 0, reward: float = 0.0, cost: float = 0.0
    ) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.completions = completions  # type: ignore[misc]
        self.failures = failures  # type: ignore[misc]
        self.reward = reward  # type: ignore[misc]
        self.cost = cost  # type: ignore[misc]

    def plus(self, other: Stats) -> Stats:
        """The field-by-field sum of two statistics."""
        return self.booked(other.completions, other.failures, other.reward, other.cost)

    def booked(self, completions: int, failures: int, reward: float, cost: float) -> Stats:
        """These statistics with the amounts given added (a release books them: no ``Stats``
        is made for the amounts alone)."""
        return Stats(
            self.completions + completions,
            self.failures + failures,
            self.reward + reward,
            self.cost + cost,
        )


fast_init(Stats)
