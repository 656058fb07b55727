"""Every item is eventually completed or given up (issue 21 point 3, EveryItemSettled of
tla/LeaseFenceLive.tla) in the implementation: the master loop ends on a starved item instead of
spinning for ever, names it, and a plain run leaves none behind. In-process runs with a manual
clock: nothing waits for real time."""

from __future__ import annotations

from pathlib import Path

from leasefence.impl.master import Master
from leasefence.impl.transport import InProcessTransport, ManualClock, master_dispatch
from leasefence.impl.wire import WorkId
from leasefence.impl.workload import generate, trivial_worker

TTL = 10.0


def _master(tmp_path: Path, n: int, clock: ManualClock, **kw: object) -> Master:
    return Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", generate(n, 0), ttl=TTL, clock=clock, **kw
    )  # type: ignore[arg-type]


def test_an_in_process_run_completes_every_item_and_nothing_is_left_starved(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    m = master_dispatch(
        _master(tmp_path, 12, clock), InProcessTransport(trivial_worker, (1, 2), clock=clock)
    )
    assert m.finished
    assert m.unfinished() == []
    assert m.starved() == []
    assert m.journal.completed == set(m.catalogue)
    m.close()


def test_a_candidate_policy_that_leaves_an_item_out_ends_the_loop_naming_that_item(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    items = generate(6, 0)
    left_out = items[-1].work_id

    def skip_last(pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
        return [w for w in pending if w != left_out]

    m = _master(tmp_path, 6, clock, candidates=skip_last)
    m = master_dispatch(m, InProcessTransport(trivial_worker, (1, 2), clock=clock))
    assert not m.finished  # the loop ended on the starved item, it did not spin
    assert m.starved() == [left_out]
    assert m.journal.completed == set(m.catalogue) - {left_out}
    m.close()


def test_an_item_whose_lease_can_still_expire_is_not_called_starved(tmp_path: Path) -> None:
    clock = ManualClock()
    m = _master(tmp_path, 1, clock)
    (work,) = m.catalogue
    assert m.dispatch_pending([1]) != []  # rank 1 runs it; its result is never delivered
    assert m.starved() == []  # a dispatch is active
    m = m.restart_master()  # the dispatch is forgotten, its work lease is not (not expired)
    assert m.dispatch_pending([1, 2]) == []  # refused: the lease is still held
    assert m.starved() == []  # it will expire: not starved
    clock.advance(TTL)
    assert m.reclaim_expired() == [work]
    assert m.starved() == []  # something changed: another round is due
    assert m.dispatch_pending([1, 2]) != []
    m.close()
