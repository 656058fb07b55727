"""The campaign's pure parts: the fault schedule and the offline history checker on synthetic
traces (no MPI)."""

from __future__ import annotations

from typing import Any

import pytest

from leasefence.campaign import (
    SCHEDULED,
    check_history,
    coverage_auc,
    percentile,
    schedule,
)

W1, W2, W3 = "a" * 64, "b" * 64, "c" * 64
S1, S2 = "1" * 64, "2" * 64
HEADER = {
    "event": "Header",
    "version": 1,
    "ttl": 1.0,
    "ranks": [1, 2],
    "task_of": {W1: S1, W2: S1, W3: S2},
}


def dispatch(
    w: str, r: int, now: float, ok: bool = True, refused: str | None = None
) -> dict[str, Any]:
    return {"event": "DispatchWork", "w": w, "r": r, "now": now, "ok": ok, "refused": refused}


def deliver(
    r: int,
    w: str,
    now: float,
    *,
    task: str | None,
    work_ok: bool = True,
    state_ok: bool = True,
    stale: bool = False,
    ok: bool = True,
    reported: str | None = None,
) -> dict[str, Any]:
    return {
        "event": "DeliverResult",
        "r": r,
        "w": w,
        "reported": reported if reported else task,
        "ok": ok,
        "now": now,
        "stale": stale,
        "task": task,
        "work_ok": work_ok,
        "state_ok": state_ok,
    }


def test_the_schedule_is_a_pure_function_of_its_arguments() -> None:
    assert schedule(7, 10, 3, 1.0) == schedule(7, 10, 3, 1.0)
    assert schedule(7, 10, 3, 1.0) != schedule(8, 10, 3, 1.0)


def test_the_schedule_has_every_kind_of_fault_once_there_are_five() -> None:
    for seed in range(20):
        faults = schedule(seed, 5, 3, 1.0)
        assert {f.kind for f in faults} == set(SCHEDULED)


def test_the_schedule_fires_in_increasing_order_within_the_run() -> None:
    faults = schedule(3, 12, 4, 2.0)
    ats = [f.at for f in faults]
    assert ats == sorted(ats)
    assert ats[0] > 0.0
    assert ats[-1] < 1.0


def test_pauses_outlast_the_ttl_and_target_a_worker_rank() -> None:
    for f in schedule(1, 20, 4, 2.0):
        if f.kind == "pause":
            assert f.seconds > 2.0
            assert f.rank in (1, 2, 3)
        if f.kind in ("kill", "reboot"):
            assert 0.0 < f.torn < 1.0


def test_clock_steps_alternate_forward_and_back() -> None:
    steps = [f.kind for f in schedule(5, 20, 3, 1.0) if f.kind.startswith("clock")]
    assert (
        steps == ["clock-forward", "clock-back"] * (len(steps) // 2) + steps[len(steps) // 2 * 2 :]
    )


def test_a_schedule_with_too_few_ranks_is_refused() -> None:
    with pytest.raises(ValueError, match="ranks >= 2"):
        schedule(0, 3, 1, 1.0)


def test_a_clean_history_passes_every_check() -> None:
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        dispatch(W2, 2, 10.0, ok=False, refused="lease_state"),
        dispatch(W3, 2, 10.0),
        deliver(1, W1, 10.1, task=S1),
        deliver(2, W3, 10.2, task=S2),
        dispatch(W2, 1, 10.3),
        deliver(1, W2, 10.4, task=S1),
    ]
    h = check_history(events, [W1, W2, W3], journal_done={W1: 1, W2: 1, W3: 1})
    assert h.violations == 0
    assert h.exactly_once
    assert h.refused_candidates == 1


def test_a_duplicate_completion_is_flagged() -> None:
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        deliver(1, W1, 10.1, task=S1),
        dispatch(W1, 2, 10.2),
        deliver(2, W1, 10.3, task=S1),
    ]
    h = check_history(events, [W1])
    assert h.duplicate_completions == 1
    assert not h.exactly_once


def test_a_duplicate_done_record_in_the_journal_is_flagged() -> None:
    events = [HEADER, dispatch(W1, 1, 10.0), deliver(1, W1, 10.1, task=S1)]
    h = check_history(events, [W1], journal_done={W1: 2})
    assert h.journal_duplicate_completions == 1


def test_an_item_never_completed_is_flagged() -> None:
    h = check_history([HEADER, dispatch(W1, 1, 10.0)], [W1, W2])
    assert h.missing_items == 2
    assert not h.exactly_once


def test_a_second_grant_of_a_live_state_lease_and_its_commit_are_flagged() -> None:
    # F314 defect 2: rank 2 takes S1 while rank 1 holds it; its commit is a wrong-owner commit.
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        dispatch(W2, 2, 10.0),
        deliver(2, W2, 10.1, task=S1),
        deliver(1, W1, 10.2, task=S1, state_ok=False),
    ]
    h = check_history(events, [W1, W2])
    assert h.double_grants_state == 1
    assert h.wrong_owner_commits == 1
    assert h.concurrent_state_dispatches == 1
    assert h.damage


def test_a_second_grant_of_live_work_is_a_duplicate_dispatch_and_a_double_grant() -> None:
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        dispatch(W1, 2, 10.0),
        deliver(1, W1, 10.1, task=S1, work_ok=False, state_ok=False),
        deliver(2, W1, 10.2, task=S1),
    ]
    h = check_history(events, [W1])
    assert h.double_grants_work == 1
    assert h.duplicate_dispatches == 1
    assert h.wrong_owner_commits >= 1
    assert h.wrong_owner_rejections == 1


def test_a_reclaim_before_the_ttl_is_premature_but_one_after_it_is_not() -> None:
    early = [
        HEADER,
        dispatch(W1, 1, 10.0),
        {"event": "ReclaimExpired", "now": 10.2, "reclaimed": [W1]},
    ]
    late = [
        HEADER,
        dispatch(W1, 1, 10.0),
        {"event": "ReclaimExpired", "now": 11.0, "reclaimed": [W1]},
    ]
    assert check_history(early, [W1]).premature_reclaims == 1
    assert check_history(late, [W1]).premature_reclaims == 0


def test_a_late_result_after_reclaim_and_redispatch_is_refused_without_violation() -> None:
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        {"event": "ReclaimExpired", "now": 11.0, "reclaimed": [W1]},
        dispatch(W1, 2, 11.0),
        dispatch(W3, 1, 11.0),
        deliver(1, W3, 11.1, task=S2),
        deliver(1, W1, 11.2, task=None, work_ok=False, state_ok=False, stale=False),
        deliver(2, W1, 11.3, task=S1),
    ]
    h = check_history(events, [W1, W3])
    assert h.violations == 0
    assert h.duplicate_dispatches == 1
    assert h.late_results == 1
    assert h.reordered_results == 1
    assert h.recovered_items == 1


def test_a_result_committed_to_the_reported_task_instead_of_the_stored_one_is_flagged() -> None:
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        deliver(1, W1, 10.1, task="9" * 64, state_ok=False, reported="9" * 64),
    ]
    h = check_history(events, [W1])
    assert h.misattributed_results == 1
    assert h.wrong_id_reports == 1


def test_a_completion_made_durable_but_not_traced_before_a_kill_counts_once() -> None:
    events = [
        HEADER,
        dispatch(W1, 1, 10.0),
        HEADER,
        {
            "event": "RestartMaster",
            "now": 10.5,
            "recovered": {"journal": {"leases": {}, "completed": [W1], "attempts": {W1: 1}}},
        },
    ]
    h = check_history(events, [W1])
    assert h.exactly_once
    assert h.restarts == 1


def test_a_lease_recovered_at_restart_still_fences_until_it_expires() -> None:
    restart = {
        "event": "RestartMaster",
        "now": 10.5,
        "recovered": {
            "journal": {"leases": {W1: [1, 10.0, "unix"]}, "completed": [], "attempts": {W1: 1}}
        },
    }
    events = [HEADER, dispatch(W1, 1, 10.0), HEADER, restart, dispatch(W1, 2, 10.6)]
    assert check_history(events, [W1]).double_grants_work == 1


def test_coverage_auc_is_the_normalised_area_under_the_step_curve() -> None:
    assert coverage_auc([(0.0, 2)], 10.0, 2) == 1.0
    assert coverage_auc([(5.0, 1)], 10.0, 1) == 0.5
    assert coverage_auc([], 10.0, 3) == 0.0


def test_percentile_is_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == 4.0
    assert percentile([], 50) is None
