"""A work lease journal kept only in memory: the benchmark-only setting that isolates the master's logic.

It implements ``leasefence.impl.master.Journal`` with the same admission and owner-fencing
answers as ``WorkLeaseJournal`` (L1, L2, L3; the owner token is ``(worker, generation)``, the
generation None for F314's rank-only leases) but writes nothing, so a dispatch benchmark run on
it measures the master's decisions and the MPI loop without any disk cost. It is never a flag
of the real journal, and nothing outside the dispatch benchmark (``mpi_job``) uses it. The
compiled build holds it (``harness.compiled.BENCH``): the compiled dispatch contender is the
master compiled whole, this journal included.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

#: A dispatch generation ``(epoch, counter)`` (``leasefence.impl.wire.Generation``).
Generation = tuple[int, int]


class MemoryJournal:
    """``lease``/``complete``/``abandon``/``recover`` as the journal answers them, in dicts."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        #: work ID -> (owner token (worker, generation), lease time)
        self._leases: dict[str, tuple[tuple[int, Generation | None], float]] = {}
        self._completed: set[str] = set()

    @property
    def completed(self) -> frozenset[str]:
        return frozenset(self._completed)

    @property
    def leases(self) -> Mapping[str, object]:
        return dict(self._leases)

    def lease(self, work_id: str, worker: int, generation: Generation | None = None) -> bool:
        if work_id in self._completed or work_id in self._leases:
            return False
        self._leases[work_id] = ((worker, generation), self._clock())
        return True

    def complete(
        self, work_id: str, worker: int | None = None, generation: Generation | None = None
    ) -> bool:
        if work_id in self._completed:
            return False
        held = self._leases.get(work_id)
        if worker is not None and (held is None or held[0] != (worker, generation)):
            return False
        if held is not None:  # (``del``: ``pop`` with a default is a generic method call)
            del self._leases[work_id]
        self._completed.add(work_id)
        return True

    def abandon(
        self, work_id: str, worker: int | None = None, generation: Generation | None = None
    ) -> bool:
        held = self._leases.get(work_id)
        if held is None or (worker is not None and held[0] != (worker, generation)):
            return False
        del self._leases[work_id]
        return True

    def recover(self, lease_ttl: float) -> list[str]:
        now = self._clock()
        gone = sorted(w for w, (_, t) in self._leases.items() if now - t >= lease_ttl)
        for w in gone:
            del self._leases[w]
        return gone

    def close(self) -> None:
        pass
