"""The crash harness's oracle: the model's history of a workload (which states the files may hold
after each acknowledgement) and the check of a recovered directory against it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasefence.conformance.refinement import coordinator_state, journal_state
from leasefence.harness.crash.workloads import (
    AFTER_RANK,
    BASE,
    JOURNAL_NAME,
    LEGACY_WORKER,
    RANKS,
    SNAPSHOT_NAME,
    Workload,
    after_id,
    coordinator_step,
    initial_journal,
    journal_step,
)
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal, scan_file
from leasefence.model import coordinator as mco
from leasefence.model import journal as mjo
from leasefence.model.invariants import (
    l3_refusal_changes_nothing,
    l6_statistics_survive,
    violated,
)
from leasefence.model.state import Coordinator, Journal, State
from leasefence.model.system import Bounds

#: The Unix time of tick 0, for ``conformance.refinement``'s mapping of the files' timestamps.
ORIGIN = int(BASE)


# -- the model's history of a workload ----------------------------------------------------------


@dataclass
class History:
    """What the files may hold: ``units[k]`` is the k-th durable unit (journal: state after k
    records; coordinator: k-th persisted snapshot, None for "no file yet"). For step i,
    ``durable[i]`` is the last unit durable once step i returned and ``written[i]`` the last unit
    step i may have written. ``results[i]`` is the model's return value of step i."""

    units: list[Any]
    durable: list[int]
    written: list[int]
    results: list[object]
    last_tick: int

    def window(self, acked: int) -> tuple[int, int]:
        """The units a crash may leave after the acknowledgement of step ``acked`` (-1: none)."""
        low = self.durable[acked] if acked >= 0 else 0
        nxt = min(acked + 1, len(self.written) - 1)
        return low, self.written[nxt]


def history(w: Workload) -> History:
    """The model's history of ``w`` (see ``History``)."""
    results: list[object] = []
    durable: list[int] = []
    written: list[int] = []
    if w.kind == "journal":
        j = initial_journal(w.names, w.legacy)
        units: list[Any] = [j]
        synced = 0
        for op in w.ops:
            result, j, states = journal_step(j, op)
            units.extend(states)
            if w.mode == "always" or op.name in ("compact", "commit", "reopen", "open"):
                synced = len(units) - 1
            results.append(result)
            durable.append(synced)
            written.append(len(units) - 1)
        return History(units, durable, written, results, w.ops[-1].tick)
    c = Coordinator()
    saved: list[Coordinator | None] = [None]
    for op in w.ops:
        result, c, changed = coordinator_step(c, op, saved)
        if op.name in ("save", "commit") or (w.mode == "autosave" and changed):
            saved.append(c)
        results.append(result)
        durable.append(len(saved) - 1)
        written.append(len(saved) - 1)
    return History(saved, durable, written, results, w.ops[-1].tick)


def describe(w: Workload) -> str:
    """The workload's steps, one per line, with the model's result of each."""
    h = history(w)
    return "\n".join(f"step {i}: {op.describe()} -> {h.results[i]!r}" for i, op in enumerate(w.ops))


# -- checking a recovered directory --------------------------------------------------------------


@dataclass
class Outcome:
    """What checking one crash point found."""

    acked_checked: int = 0
    lost: int = 0
    problems: list[str] = field(default_factory=list)


def _bounds(w: Workload, h: History) -> Bounds:
    if w.kind == "journal":
        task_of = tuple((x, "s") for x in (*w.names, after_id(w)))
        restarts = 0
    else:
        task_of = tuple((f"w-{t}", t) for t in w.names)
        restarts = sum(op.name == "restart" for op in w.ops) + 2
    return Bounds(
        task_of=task_of,
        ranks=(*RANKS, LEGACY_WORKER, AFTER_RANK),
        ttl=2,
        max_wall=h.last_tick + 1,
        max_reboots=0,
        max_rollbacks=0,
        max_restarts=restarts,
    )


def _describe_steps(w: Workload, h: History, lo: int, hi: int) -> str:
    """The steps whose units lie in (lo, hi]."""
    steps = [
        f"step {i} {w.ops[i].describe()}"
        for i in range(len(w.ops))
        if lo < h.written[i] <= hi and (i == 0 or h.written[i - 1] < h.written[i])
    ]
    return "; ".join(steps[:4]) + (f" and {len(steps) - 4} more" if len(steps) > 4 else "")


def check_directory(w: Workload, h: History, directory: Path, acked: int) -> Outcome:
    """Reopen the files in ``directory`` after a crash that followed the acknowledgement of step
    ``acked`` (-1: none) and check them against the model's history."""
    out = Outcome()
    low, _ = h.window(acked)
    out.acked_checked = sum(1 for i in range(1, acked + 1) if h.written[i] <= low)
    try:
        if w.kind == "journal":
            _check_journal(out, w, h, directory / JOURNAL_NAME, acked)
        else:
            _check_coordinator(out, w, h, directory / SNAPSHOT_NAME, acked)
    except AssertionError as exc:  # e.g. refinement: a time or amount that is no model value
        out.problems.append(f"the recovered state could not be checked (AssertionError: {exc})")
    return out


def _check_journal(out: Outcome, w: Workload, h: History, path: Path, acked: int) -> None:
    low, high = h.window(acked)
    tick = h.last_tick

    def clock() -> float:
        return BASE + tick

    try:
        journal = WorkLeaseJournal(path, clock=clock)
    except Exception as exc:
        out.problems.append(f"opening the journal raised {type(exc).__name__}: {exc}")
        return
    try:
        got = journal_state(journal, origin=ORIGIN)
        torn = journal.torn_tail
        _match(out, w, h, got, low, high)
        before = State(wall=tick, journal=h.units[low])
        after = State(wall=tick, journal=got)
        _invariants(out, before, after, _bounds(w, h), step_property=w.mode == "always")
        _file_l1(out, path)
        if torn:
            _check_torn_tail_cut(out, w, journal, got, torn, clock, tick)
    finally:
        journal.close()


def _check_torn_tail_cut(
    out: Outcome,
    w: Workload,
    journal: WorkLeaseJournal,
    got: Journal,
    torn: bytes,
    clock: Callable[[], float],
    tick: int,
) -> None:
    """After a torn tail, the next append must cut the tail and keep it in ``.broken``."""
    path = journal.path
    fresh = after_id(w)
    ok = journal.lease(fresh, AFTER_RANK)
    journal.close()
    expected = mjo.lease_work(got, fresh, AFTER_RANK, tick, 0)[1]
    with WorkLeaseJournal(path, clock=clock) as again:
        if not ok or journal_state(again, origin=ORIGIN) != expected or again.torn_tail:
            out.problems.append("after a torn tail, the next lease did not survive a reopen")
    broken = path.with_name(path.name + ".broken")
    if not broken.exists() or not broken.read_bytes().endswith(torn):
        out.problems.append("the torn tail was not kept in .broken")


def _check_coordinator(out: Outcome, w: Workload, h: History, snap: Path, acked: int) -> None:
    low, high = h.window(acked)
    tick = h.last_tick

    def clock() -> float:
        return BASE + tick

    try:
        coord = StateShardCoordinator(snap, clock=clock)
        reloaded = StateShardCoordinator(snap, clock=clock)
    except Exception as exc:
        out.problems.append(f"loading the snapshot raised {type(exc).__name__}: {exc}")
        return
    got = coordinator_state(coord, origin=ORIGIN)
    candidates = [Coordinator() if u is None else mco.restart_coordinator(u) for u in h.units]
    _match(out, w, h, got, low, high, candidates)
    if coordinator_state(reloaded, origin=ORIGIN) != mco.restart_coordinator(got):
        out.problems.append("a second restart did not load the first restart's snapshot")
    durable = h.units[low] if h.units[low] is not None else Coordinator()
    before = State(wall=tick, coordinator=durable)
    # The coordinator alone, with no journal: CompletionsAccounted compares the two, so it is
    # left out here (the journal's experiments and the system's check it).
    _invariants(
        out, before, State(wall=tick, coordinator=got), _bounds(w, h), skip=COORDINATOR_ALONE
    )


def _match(
    out: Outcome,
    w: Workload,
    h: History,
    got: object,
    low: int,
    high: int,
    candidates: list[Any] | None = None,
) -> None:
    units = h.units if candidates is None else candidates
    hits = [k for k, u in enumerate(units) if u == got]
    if any(low <= k <= high for k in hits):
        return
    older = [k for k in hits if k < low]
    if older:
        k = max(older)
        lost = [
            i
            for i in range(1, len(w.ops))
            if k < h.written[i] <= low and h.written[i - 1] < h.written[i]
        ]
        out.lost += len(lost)
        out.problems.append(
            f"lost acknowledged operation(s): the files hold the state after unit {k}, but unit "
            f"{low} was durable when the last acknowledgement was sent; lost: "
            f"{_describe_steps(w, h, k, low)}"
        )
    elif hits:
        out.problems.append(
            f"unacknowledged effect: the files hold unit {min(hits)}, beyond what the steps up to "
            f"the one in flight could write (unit {high}): {_describe_steps(w, h, high, min(hits))}"
        )
    else:
        out.problems.append(
            f"recovered state is no state the history allows (units {low}..{high}): got {got!r}, "
            f"expected {units[low]!r}"
        )


#: State invariants that relate the journal to the coordinator: not checked on a coordinator
#: experiment, which has no journal.
COORDINATOR_ALONE = frozenset({"CompletionsAccounted"})


def _invariants(
    out: Outcome,
    before: State,
    after: State,
    b: Bounds,
    *,
    step_property: bool = True,
    skip: frozenset[str] = frozenset(),
) -> None:
    """The model's state invariants on ``after`` (but those in ``skip``); L3 and L6's statistics
    from ``before`` (the last durable state). L3 is a one-step property: it is checked only when
    the crash window spans one call (not over a group-commit batch, where a lease may end and be
    granted again)."""
    bad = [name for name in violated(None, after, b) if name not in skip]
    if step_property and not l3_refusal_changes_nothing(before, after, b):
        bad.append("L3_RefusalChangesNothing")
    if not l6_statistics_survive(before, after, b):
        bad.append("L6_StatisticsSurvive")
    if bad:
        out.problems.append(f"invariant(s) violated by the recovered state: {', '.join(bad)}")


def _file_l1(out: Outcome, path: Path) -> None:
    """L1 on the file itself: no lease record while the same work ID is leased (by replay)."""
    if not path.exists():
        return
    held: dict[str, int | None] = {}
    for r in scan_file(path).records:
        if r.event == "lease":
            if r.work_id in held:
                out.problems.append(
                    f"L1_SingleOwner: line {r.line} leases {r.work_id[:8]}… to {r.worker} while "
                    f"{held[r.work_id]} holds it"
                )
                return
            held[r.work_id] = r.worker
        else:
            held.pop(r.work_id, None)
