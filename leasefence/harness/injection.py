"""Which faults a run injects (``leasefence run --inject``): the kinds and ``Injection``, apart from
the faults themselves (``harness/faults.py``), so that parsing ``--inject`` imports none of the
dispatcher's modules before ``leasefence run`` chooses which of them to load (``--engine``)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

#: Faults a worker can be told to inject (``leasefence run --inject``).
WORKER_INJECTIONS = ("late", "dup", "wrong-id", "missing-id", "malformed", "reorder")
#: Faults the master injects into itself: ``restart`` (``RestartFault``).
MASTER_INJECTIONS = ("restart",)
INJECTIONS = WORKER_INJECTIONS + MASTER_INJECTIONS


@dataclass(frozen=True)
class Injection:
    """Which faults are injected, and how often: each worker fault hits a given (kind, work,
    rank, attempt) with probability ``rate``, decided by a hash of the seed, so runs are
    reproducible."""

    kinds: frozenset[str] = frozenset()
    rate: float = 0.15
    seed: int = 0

    @classmethod
    def parse(cls, text: str | None, *, rate: float = 0.15, seed: int = 0) -> Injection:
        """``late,dup,wrong-id`` → an Injection; ``ValueError`` naming an unknown kind."""
        kinds = frozenset(k.strip() for k in (text or "").split(",") if k.strip())
        if unknown := sorted(kinds - set(INJECTIONS)):
            raise ValueError(
                f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(INJECTIONS)}"
            )
        return cls(kinds, rate, seed)

    def hits(self, kind: str, work_id: str, rank: int, attempt: int) -> bool:
        if kind not in self.kinds:
            return False
        digest = hashlib.sha256(f"{self.seed}:{kind}:{work_id}:{rank}:{attempt}".encode())
        return int.from_bytes(digest.digest()[:8], "big") < self.rate * 2**64
