"""The bounds of one exploration or replay (the TLA+ model's CONSTANTS) and the owner tokens a
lease may carry; ``model/system.py`` re-exports them.

A module of its own so that it stays interpreted when the trace validator's modules are
compiled (``leasefence trace compile``): mypyc turns ``cached_property`` into a plain property,
computed again at every read, and the replay reads ``works_of`` and ``task_set`` at every step.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from leasefence.model.flavours import Flavour


@dataclass(frozen=True)
class Bounds:
    """The constants of one exploration (the TLA+ model's CONSTANTS), each a CLI flag.

    ``task_of`` maps every work ID to its state task; the default maps two work IDs to one task
    (different exact-work payloads, same state) plus one more. ``legacy_stamp`` is the monotonic
    value in legacy records: an uptime from an earlier boot, larger than any reachable one.
    ``max_attempts`` (per work ID) and ``max_leases`` (in all) bound the leases granted; they are
    a state constraint (TLC's CONSTRAINT): states beyond them are checked but not explored.

    ``pipeline`` is how many dispatches one rank may hold at once (1: F314's one active
    transaction per rank). ``fence`` is the owner token of every lease: ``"rank"`` (F314: the
    MPI rank alone; results carry no generation) or ``"generation"`` (``(rank,
    dispatch_generation)``: each dispatch gets the implementation's generation ``(epoch,
    counter)``, carried by the WORK and its RESULT and recorded in both leases), or
    ``"counter"`` (the same with the epoch always 1, ``Master._epoch()``'s fallback: a must-fail
    fence whose tokens repeat after a restart). With ``pipeline=1`` and ``fence="rank"`` no
    generation is ever tracked, so the state graph is exactly F314's.

    ``legacy`` (the spec's ``LegacyRecords``): whether a journal written before F314 may be
    opened (LegacyRecord); off, a property must fail on another scenario than a legacy record's.
    """

    task_of: tuple[tuple[str, str], ...] = (("w1", "s1"), ("w2", "s1"), ("w3", "s2"))
    ranks: tuple[int, ...] = (1, 2)
    ttl: int = 1
    max_wall: int = 2
    max_reboots: int = 1
    max_rollbacks: int = 1
    max_restarts: int = 1
    max_attempts: int = 2
    max_leases: int = 2
    max_dups: int = 1
    flavour: Flavour = Flavour.FIXED
    pipeline: int = 1
    fence: str = "rank"
    legacy: bool = True
    gen_base: int = 100  # GEN_BASE; a trace replay's is larger than any rank's counter

    @cached_property
    def works(self) -> tuple[str, ...]:
        return tuple(w for w, _ in self.task_of)

    @cached_property
    def tasks(self) -> tuple[str, ...]:
        return tuple(sorted({t for _, t in self.task_of}))

    @cached_property
    def work_set(self) -> frozenset[str]:
        return frozenset(self.works)

    @cached_property
    def task_set(self) -> frozenset[str]:
        return frozenset(self.tasks)

    @cached_property
    def rank_set(self) -> frozenset[int]:
        return frozenset(self.ranks)

    @cached_property
    def _task_map(self) -> dict[str, str]:
        return dict(self.task_of)

    @cached_property
    def works_of(self) -> dict[str, tuple[str, ...]]:
        """The work IDs of each state task."""
        out: dict[str, list[str]] = {}
        for w, t in self.task_of:
            out.setdefault(t, []).append(w)
        return {t: tuple(ws) for t, ws in out.items()}

    @property
    def legacy_stamp(self) -> int:
        return self.max_wall + 1

    def task(self, work: str) -> str:
        return self._task_map[work]

    @cached_property
    def generations(self) -> bool:
        """Whether dispatches carry a generation (``fence`` is not ``"rank"``)."""
        return self.fence != FENCE_RANK


#: The owner token of a lease: the MPI rank alone (F314), or (rank, dispatch generation).
FENCE_RANK = "rank"
FENCE_GENERATION = "generation"
FENCES = (FENCE_RANK, FENCE_GENERATION)
#: Beyond the implementation's fences: the generation without the epoch (always 1, as
#: ``Master._epoch()`` falls back to for a coordinator without one): tokens repeat after a
#: restart, and only the stale test tells a late result from a new dispatch (issue 21).
FENCE_COUNTER = "counter"
MODEL_FENCES = (*FENCES, FENCE_COUNTER)

#: A generation ``(epoch, counter)`` is the one integer ``epoch * GEN_BASE + counter`` (the spec's
#: GenBase; 0: none); a rank's counter counts leases granted, fewer than ``GEN_BASE``. This is
#: the model checker's (``Bounds.gen_base``): its bounds grant far fewer leases. A trace replay's
#: bounds give a base no run reaches (``tracecheck.bounds_from_header``).
GEN_BASE = 100
