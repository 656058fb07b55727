"""The Hypothesis strategies and the small worlds every conformance machine and test shares.

The worlds are deliberately tiny so that collisions (two candidates for one work ID or one state
task, a result from the wrong rank, a lease that expires and is taken again) are frequent.
"""

from __future__ import annotations

from hypothesis import strategies as st

from leasefence.impl.wire import StateTaskId, WorkId
from leasefence.impl.workload import WorkItem
from leasefence.model.system import FENCE_GENERATION, FENCE_RANK, Bounds

#: Three work IDs as the journal requires them (64 hexadecimal characters).
A, B, C = "a" * 64, "b" * 64, "0123456789abcdef" * 4
JOURNAL_WORKS = (A, B, C)

#: Three state tasks for the coordinator on its own.
TASKS = ("s1", "s2", "s3")

#: Worker ranks: three, so that a third party can always be the wrong worker.
RANKS = (1, 2, 3)

#: The wall and monotonic clocks' reading when a machine starts (above 0 so that the first
#: rollback can already date leases in the future).
START = 10

#: The lease TTL the master machines run with, and the invariants' TTL, in seconds (= ticks).
TTL = 2

#: The master's catalogue: W1 and W2 are two exact payloads of one state task (F314's case for
#: defect 2); W1, W3 and W4 share a target, whose pool admits two dispatches at once, so a third
#: is refused at ``reserve_target`` while a duplicate of one work still reaches ``lease_work``.
W1, W2, W3, W4 = (WorkId(c * 64) for c in "abcd")
S1, S2, S3 = StateTaskId("s1"), StateTaskId("s2"), StateTaskId("s3")
CATALOGUE = (
    WorkItem(W1, S1, "t1", "bound=16", "smt"),
    WorkItem(W2, S1, "t2", "bound=256", "qf-nia"),
    WorkItem(W3, S2, "t1", "bound=16", "smt"),
    WorkItem(W4, S3, "t1", "bound=64", "smt"),
)
TARGET_LIMIT = 2
RESERVATION_LIMITS: dict[str, int | None] = {"target": TARGET_LIMIT}
#: A state task no dispatch stores: what a confused worker may report (a wrong ID).
WRONG_TASK = "s-wrong"

_BIG = 10**12


def bounds(
    works: tuple[tuple[str, str], ...],
    ranks: tuple[int, ...] = RANKS,
    ttl: int = TTL,
    *,
    pipeline: int = 1,
    fence: str = FENCE_RANK,
) -> Bounds:
    """Bounds for checking invariants along unbounded runs: the world's IDs and TTL, no limits;
    F314's one dispatch per rank fenced by the rank alone unless ``pipeline``/``fence`` say
    otherwise."""
    return Bounds(
        task_of=works,
        ranks=ranks,
        ttl=ttl,
        max_wall=_BIG,
        max_reboots=_BIG,
        max_rollbacks=_BIG,
        max_restarts=_BIG,
        max_attempts=_BIG,
        max_leases=_BIG,
        max_dups=_BIG,
        pipeline=pipeline,
        fence=fence,
    )


#: Bounds of the journal machine (each work ID its own task: the journal knows no tasks).
JOURNAL_BOUNDS = bounds(tuple((w, f"task-of-{w[:4]}") for w in JOURNAL_WORKS))
#: Bounds of the coordinator machine (no work IDs).
COORDINATOR_BOUNDS = bounds(tuple((f"work-of-{t}", t) for t in TASKS))
#: Bounds of the master and system machines.
MASTER_BOUNDS = bounds(tuple((str(i.work_id), str(i.state_task_id)) for i in CATALOGUE))
#: Bounds of their pipelined variants (issue 12): two dispatches per rank at once, each with a
#: generation that fences its leases and travels with its WORK and RESULT.
PIPELINED_BOUNDS = bounds(MASTER_BOUNDS.task_of, pipeline=2, fence=FENCE_GENERATION)

journal_works = st.sampled_from(JOURNAL_WORKS)
tasks = st.sampled_from(TASKS)
master_works = st.sampled_from(tuple(str(i.work_id) for i in CATALOGUE))
ranks = st.sampled_from(RANKS)
#: A worker fence, or none (offline maintenance).
fences = st.none() | ranks
#: TTLs for direct recovery calls: zero (reclaim all) is frequent, as is the machines' TTL.
ttls = st.sampled_from((0, 1, TTL, TTL + 1, 5))
#: Forward clock steps, in seconds: often past the TTL so that leases expire.
advances = st.sampled_from((TTL, 1, TTL + 1, 2 * TTL + 1, 0))
#: How far the wall clock is stepped back, in seconds: often beyond the TTL (future leases).
rollbacks = st.one_of(st.just(3 * TTL + 2), st.integers(1, 3 * TTL + 2))
#: Whole-number rewards and costs (the model's amounts).
amounts = st.integers(0, 3)


def reports_for(right: str) -> st.SearchStrategy[str | None]:
    """What a worker reports as its state task: the right one, nothing (the old protocol), an
    unknown one, or any real task (often another one: a wrong ID)."""
    return st.one_of(st.just(right), st.none(), st.just(WRONG_TASK), st.sampled_from(TASKS))


def presented_for(generation: int) -> st.SearchStrategy[int]:
    """The generation a RESULT presents under generation fencing: mostly its own (the worker
    echoes its WORK's), sometimes none (``0``: a worker of the old protocol)."""
    return st.sampled_from((generation, generation, 0))


def candidates(past_owners: set[int]) -> st.SearchStrategy[int]:
    """A rank asking for a lease: often one that never held it (a re-lease by someone else after
    a lease ended is what makes a later call of the old owner late), else any rank."""
    fresh = [r for r in RANKS if r not in past_owners]
    if not fresh:
        return ranks
    return st.sampled_from(("fresh", "any")).flatmap(
        lambda mode: st.just(fresh[0]) if mode == "fresh" else ranks
    )


def fences_for(
    owner: int | None, past_owners: set[int], *, maintenance: bool = True
) -> st.SearchStrategy[int | None]:
    """The worker fence of a complete/abandon call: the owner, a wrong worker (a former owner
    when there is one: a late call after reclaim and re-lease), any rank, or none (maintenance).
    The mode is drawn first, so that each is frequent whatever values Hypothesis favours."""
    former = sorted(past_owners - {owner}) if owner is not None else sorted(past_owners)
    other = former[0] if former else (1 if owner is None else owner % len(RANKS) + 1)
    modes = ["owner", "wrong", "any"] + (["none"] if maintenance else [])

    def pick(mode: str) -> st.SearchStrategy[int | None]:
        if mode == "owner" and owner is not None:
            return st.just(owner)
        if mode == "wrong":
            return st.just(other)
        if mode == "none":
            return st.none()
        return ranks

    return st.sampled_from(modes).flatmap(pick)


#: Where a crash cuts the would-be record: a fraction of its length (mapped to a byte offset).
cut_fractions = st.floats(0.0, 1.0, allow_nan=False)
#: A monotonic stamp from a previous boot: small, or larger than any uptime reached here.
legacy_stamps = st.sampled_from((0, 3, 50)) | st.integers(0, 10**7)


def maybe_legacy(works: st.SearchStrategy[str]) -> st.SearchStrategy[tuple[str, int, int] | None]:
    """Mostly a fresh start; sometimes one legacy record (work, rank, monotonic stamp) at start."""
    return st.one_of(st.none(), st.none(), st.tuples(works, ranks, legacy_stamps))


def cut_offset(record_length: int, fraction: float) -> int:
    """A byte offset strictly inside a record's JSON (1 .. length - 2 of a line with its newline):
    never empty and never the whole record, which would be a good record without its newline."""
    inner = max(record_length - 2, 1)
    return 1 + min(int(fraction * inner), inner - 1)
