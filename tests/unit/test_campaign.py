"""The campaign's pure parts: the fault schedule and the offline history checker on synthetic
traces (no MPI)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from leasefence.conformance.tracecheck import validate
from leasefence.harness.campaign import (
    BUILDS,
    PIPELINE_BUILDS,
    RESTART_EVERY,
    SCHEDULED,
    CampaignConfig,
    CampaignResult,
    build_args,
    check_history,
    coverage_auc,
    default_builds,
    interrupted_rejections,
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


#: The Header of a depth-2 run (trace format v2) fenced by generation, and by the rank alone.
DEPTH2 = HEADER | {"version": 2, "pipeline": 2, "fence": "generation"}
DEPTH2_RANK = HEADER | {"version": 2, "pipeline": 2, "fence": "rank"}


def dispatch(
    w: str,
    r: int,
    now: float,
    ok: bool = True,
    refused: str | None = None,
    gen: list[int] | None = None,
) -> dict[str, Any]:
    event = {"event": "DispatchWork", "w": w, "r": r, "now": now, "ok": ok, "refused": refused}
    return event | ({"gen": gen} if gen is not None else {})


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
    gen: list[int] | None = None,
) -> dict[str, Any]:
    event = {
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
    return event | ({"gen": gen} if gen is not None else {})


def reclaim(now: float, *works: str) -> dict[str, Any]:
    return {"event": "ReclaimExpired", "now": now, "reclaimed": list(works)}


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


# -- depth 2 (issue 12): owner tokens (rank, generation) ----------------------------------------


def test_an_older_generations_result_refused_after_a_redispatch_is_no_violation() -> None:
    # w1 goes to rank 1 as [1, 1], is reclaimed, and goes to rank 1 again as [1, 2]; the
    # late result of [1, 1] arrives first and is refused, then [1, 2]'s completes w1.
    events = [
        DEPTH2,
        dispatch(W1, 1, 10.0, gen=[1, 1]),
        reclaim(11.0, W1),
        dispatch(W1, 1, 11.0, gen=[1, 2]),
        deliver(1, W1, 11.2, task=S1, work_ok=False, state_ok=False, gen=[1, 1]),
        deliver(1, W1, 11.3, task=S1, gen=[1, 2]),
    ]
    h = check_history(events, [W1], journal_done={W1: 1})
    assert h.violations == 0
    assert h.exactly_once
    assert (h.pipeline, h.fence) == (2, "generation")
    assert h.cross_generation_results == h.cross_generation_refused == 1
    assert h.cross_generation_accepted == 0
    assert h.superseded_results == h.superseded_same_rank == 1
    assert h.same_rank_redispatches == 1
    assert h.late_results == 1
    assert h.reordered_results == 0  # [1, 1] was dispatched first and answered first


def test_a_commit_by_an_older_generation_of_the_same_rank_is_a_wrong_owner_commit() -> None:
    # The same history, but the implementation accepts [1, 1]'s result for [1, 2]'s leases:
    # what rank fencing does, and the rank alone cannot see.
    events = [
        DEPTH2,
        dispatch(W1, 1, 10.0, gen=[1, 1]),
        reclaim(11.0, W1),
        dispatch(W1, 1, 11.0, gen=[1, 2]),
        deliver(1, W1, 11.2, task=S1, gen=[1, 1]),
        deliver(1, W1, 11.3, task=S1, work_ok=False, state_ok=False, gen=[1, 2]),
    ]
    h = check_history(events, [W1])
    assert h.wrong_owner_commits == 2  # the work lease and the state lease of [1, 2]
    assert h.cross_generation_accepted == 1
    assert h.cross_generation_refused == 1  # [1, 2]'s own result then finds its lease gone
    assert h.exactly_once  # one completion, by the wrong generation
    assert any("gen [1, 1]" in x and "owner rank 1 gen [1, 2]" in x for x in h.examples)


def test_a_duplicated_result_of_a_completed_generation_is_refused_and_counted() -> None:
    events = [
        DEPTH2,
        dispatch(W1, 1, 10.0, gen=[1, 1]),
        dispatch(W3, 1, 10.0, gen=[1, 2]),
        deliver(1, W1, 10.1, task=S1, gen=[1, 1]),
        deliver(1, W3, 10.2, task=S2, gen=[1, 2]),
        deliver(1, W1, 10.3, task=None, work_ok=False, state_ok=False, gen=[1, 1]),
    ]
    h = check_history(events, [W1, W3], journal_done={W1: 1, W3: 1})
    assert h.violations == 0
    assert h.duplicated_results == 1
    assert h.reordered_results == 1  # [1, 1] answered again after [1, 2]
    assert h.cross_generation_results == h.cross_generation_refused == 1
    assert h.superseded_results == 0  # w1 was never dispatched again


def test_a_result_of_an_older_generation_superseded_on_another_rank_is_not_same_rank() -> None:
    events = [
        DEPTH2,
        dispatch(W1, 1, 10.0, gen=[1, 1]),
        reclaim(11.0, W1),
        dispatch(W1, 2, 11.0, gen=[1, 1]),  # rank 2's own counter: the token is (2, [1, 1])
        deliver(1, W1, 11.1, task=S1, work_ok=False, state_ok=False, gen=[1, 1]),
        deliver(2, W1, 11.2, task=S1, gen=[1, 1]),
    ]
    h = check_history(events, [W1])
    assert h.violations == 0
    assert (h.superseded_results, h.superseded_same_rank) == (1, 0)
    assert h.cross_generation_refused == 1


def test_a_forgotten_dispatchs_result_whose_lease_survived_a_restart_is_its_owner() -> None:
    # An in-process restart forgets w1's dispatch but not its journal lease, token (1, [1, 1]);
    # its result completes w1 rightly, and s1 (now w2's, epoch 2) refuses it.
    restart = {
        "event": "RestartMaster",
        "now": 10.5,
        "recovered": {
            "journal": {
                "leases": {W1: [1, 10.0, "unix", [1, 1]]},
                "completed": [],
                "attempts": {W1: 1},
            }
        },
    }
    events = [
        DEPTH2,
        dispatch(W1, 1, 10.0, gen=[1, 1]),
        restart,
        dispatch(W2, 1, 10.5, gen=[2, 1]),
        deliver(1, W1, 10.6, task=S1, state_ok=False, gen=[1, 1]),
    ]
    h = check_history(events, [W1, W2])
    assert h.wrong_owner_commits == 0
    assert h.cross_generation_results == 0
    assert h.wrong_owner_rejections == 1  # the state lease refused it
    assert (h.restart_crossing_results, h.restart_crossing_refused) == (1, 1)


def test_rank_fencing_at_depth_two_counts_the_models_counterexample_as_wrong_owner() -> None:
    # `leasefence model check --pipeline 2 --fence rank`: w1 to rank 1, restart, w2 (which
    # shares s1) to rank 1, then w1's forgotten result completes s1 under w2's dispatch.
    restart = {
        "event": "RestartMaster",
        "now": 10.5,
        "recovered": {
            "journal": {"leases": {W1: [1, 10.0, "unix", None]}, "completed": [], "attempts": {}}
        },
    }
    tail = [
        dispatch(W1, 1, 10.0),
        restart,
        dispatch(W2, 1, 10.5),
        deliver(1, W1, 10.6, task=S1),
    ]
    h = check_history([DEPTH2_RANK, *tail], [W1, W2])
    assert h.wrong_owner_commits == 1  # s1, taken by rank 1's dispatch of w2
    assert (h.restart_crossing_results, h.restart_crossing_refused) == (1, 0)
    assert any(f"for work {W1[:12]}" in x and f"for work {W2[:12]}" in x for x in h.examples)
    # At depth 1 a rank holds one dispatch, and F314's ledger names it by the rank alone.
    assert check_history([HEADER, *tail], [W1, W2]).wrong_owner_commits == 0


def test_rank_fencing_cannot_attribute_a_result_after_a_same_rank_redispatch() -> None:
    events = [
        DEPTH2_RANK,
        dispatch(W1, 1, 10.0),
        reclaim(11.0, W1),
        dispatch(W1, 1, 11.0),
        deliver(1, W1, 11.2, task=S1),  # the late one of the first, or the second's?
        deliver(1, W1, 11.3, task=S1, work_ok=False, state_ok=False),
    ]
    h = check_history(events, [W1])
    assert h.violations == 0
    assert h.same_rank_redispatches == 1
    assert h.ambiguous_commits == 1
    assert h.cross_generation_results == 0  # no generations to tell them apart


def test_a_restart_after_an_untraced_reclaim_needs_no_explanation_of_the_campaigns() -> None:
    # Rank 1's leases expire by 11.1, rank 2's at 11.5; a reclaim of rank 1's two is made
    # durable in the journal at about 11.2, the kill comes before its trace line, the restart
    # at 11.7. tracecheck tries a lost reclaim at each instant since the last traced step, and
    # the campaign's own replay (``interrupted_rejections``) must do the same.
    w4, s3 = "d" * 64, "3" * 64
    header = DEPTH2 | {"task_of": {W1: S1, W3: S2, w4: s3}}
    recovered = {
        "journal": {
            "leases": {w4: [2, 10.5, "unix", [1, 1]]},
            "completed": [],
            "attempts": {W1: 1, W3: 1, w4: 1},
        },
        "coordinator": {
            "epoch": 2,
            "leases": {
                S1: [1, 10.0, 1, [1, 1]],
                S2: [1, 10.1, 1, [1, 2]],
                s3: [2, 10.5, 1, [1, 1]],
            },
            "stats": {},
        },
    }
    trace = [
        header,
        dispatch(W1, 1, 10.0, gen=[1, 1]),
        dispatch(W3, 1, 10.1, gen=[1, 2]),
        dispatch(w4, 2, 10.5, gen=[1, 1]),
        header,
        {"event": "RestartMaster", "now": 11.7, "recovered": recovered},
    ]
    lines = [json.dumps(e) + "\n" for e in trace]
    assert validate(lines).ok
    assert interrupted_rejections(lines) == []
    # No reclaim takes w3's and w4's leases and leaves w1's, which expired first.
    recovered["journal"]["leases"] = {W1: [1, 10.0, "unix", [1, 1]]}
    lines = [json.dumps(e) + "\n" for e in trace]
    assert not validate(lines).ok
    assert interrupted_rejections(lines)[-1].startswith("UNEXPLAINED line 6")


def test_every_command_line_names_its_depth_and_the_rank_fence_build_adds_its_fence() -> None:
    assert default_builds(1) == BUILDS == ("f314", "pre-fix")
    assert default_builds(2) == PIPELINE_BUILDS == ("f314", "rank-fence")
    # depth 1 explicit: the run's default depth is 2 since issue 19
    assert build_args("f314", 1) == build_args("pre-fix", 1) == ["--pipeline", "1"]
    assert build_args("f314", 2) == ["--pipeline", "2"]
    assert build_args("rank-fence", 2) == ["--pipeline", "2", "--fence", "rank"]
    with pytest.raises(ValueError, match="unknown build"):
        build_args("post-fix", 2)


def test_depth_one_injects_what_it_did_and_depth_two_adds_the_in_job_restart() -> None:
    assert CampaignConfig().inject_args() == ["--inject", "late,dup,wrong-id"]
    depth2 = CampaignConfig(pipeline=2)
    assert depth2.inject_args() == [
        "--inject", "late,dup,wrong-id,restart", "--restart-every", str(RESTART_EVERY),
    ]  # fmt: skip
    assert CampaignConfig(pipeline=2, restart_every=0).inject_args()[1] == "late,dup,wrong-id"
    assert CampaignConfig(restart_every=4).inject_args()[-1] == "4"
    faults = schedule(0, 5, 3, 1.0)
    assert "restart" in CampaignResult(depth2, faults, {}).expected_faults()
    assert "restart" not in CampaignResult(CampaignConfig(), faults, {}).expected_faults()


def test_coverage_auc_is_the_normalised_area_under_the_step_curve() -> None:
    assert coverage_auc([(0.0, 2)], 10.0, 2) == 1.0
    assert coverage_auc([(5.0, 1)], 10.0, 1) == 0.5
    assert coverage_auc([], 10.0, 3) == 0.0


def test_percentile_is_nearest_rank() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == 4.0
    assert percentile([], 50) is None


def test_the_ledger_judges_a_reclaim_by_the_models_rule_within_a_tick_as_trace_check_does() -> None:
    # 0.9999997 s in floats (the implementation's rule would call the reclaim early), exactly
    # one second in the model's microsecond ticks: the model allows it, and so does the ledger.
    events = [HEADER, dispatch(W1, 1, 100.0000004), reclaim(101.0000001, W1)]
    assert validate([json.dumps(e) for e in events]).ok
    assert check_history(events, [W1]).premature_reclaims == 0
    assert check_history([*events[:2], reclaim(100.9, W1)], [W1]).premature_reclaims == 1


def test_the_f314_build_fails_the_campaign_when_an_item_is_left_neither_completed_nor_given_up() -> (
    None
):
    # Issue 21 point 3: the run's "end" event says how many items are unsettled; F314's verdict
    # needs none (EveryItemSettled), however clean the history is otherwise.
    from leasefence.harness.campaign.ledger import History
    from leasefence.harness.campaign.metrics import BuildRun

    config = CampaignConfig()
    faults = schedule(0, 5, 3, 1.0)
    result = CampaignResult(config, faults, {})
    h = History(exactly_once=True, trace_valid=True, segments_valid=True)
    counts = dict.fromkeys(result.expected_faults(), 1)
    result.runs["f314"] = BuildRun("f314", 1, finished=True, fault_counts=counts, history=h)
    assert result.f314_ok()
    result.runs["f314"].unsettled = 1
    assert not result.f314_ok()
