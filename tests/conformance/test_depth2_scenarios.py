"""Depth-2 scenarios replayed on the pipelined system machine: every step compared between
model and implementation, every invariant checked, and the outcome each step must have."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines import SAVE_ENV, ConformanceFailure, PipelinedSystemMachine
from leasefence.conformance.scenarios import load, replay
from leasefence.impl.master import Master
from leasefence.impl.wire import Rank, Result

pytestmark = pytest.mark.conformance


def _scenario(steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "depth 2", "machine": "system-pipelined", "legacy": None, "steps": steps}


def test_the_forgotten_result_that_breaks_rank_fencing_cannot_take_the_newer_dispatchs_task() -> (
    None
):
    # The README's counterexample to rank fencing at depth 2, under generation fencing: W1's
    # result (generation 101: epoch 1, counter 1) arrives after a restart and W2's dispatch
    # (generation 201: epoch 2, the counter restarted) of the same state task s1 to the same
    # rank. It completes W1's own lease, still its owner's, but the state task now belongs to
    # generation 201 and is refused.
    replay(
        _scenario(
            [
                {"action": "DispatchWork", "args": ["w1", 1], "expect": {"ok": True}},
                {"action": "RestartMaster"},
                {"action": "DispatchWork", "args": ["w2", 1], "expect": {"ok": True}},
                {
                    "action": "DeliverResult",
                    "args": [1, "w1", "s1", True, False, 101, 101],
                    "expect": {"stale": False, "work_ok": True, "state_ok": False},
                },
            ]
        )
    )


def test_a_duplicated_result_of_an_older_generation_is_refused_after_the_work_is_redispatched() -> (
    None
):
    replay(
        _scenario(
            [
                {"action": "DispatchWork", "args": ["w1", 1]},
                # A failure report, duplicated: the work is given back, a copy stays in flight.
                {
                    "action": "DeliverResult",
                    "args": [1, "w1", "s1", False, True, 101, 101],
                    "expect": {"work_ok": True, "state_ok": True},
                },
                {"action": "DispatchWork", "args": ["w1", 1], "expect": {"ok": True}},
                {
                    "action": "DeliverResult",
                    "args": [1, "w1", "s1", True, False, 101, 101],
                    "expect": {"stale": False, "work_ok": False, "state_ok": False},
                },
                # The new generation's own result still completes the work.
                {
                    "action": "DeliverResult",
                    "args": [1, "w1", "s1", True, False, 102, 102],
                    "expect": {"work_ok": True, "state_ok": True},
                },
            ]
        )
    )


def test_a_scenario_names_a_system_machine() -> None:
    with pytest.raises(ValueError, match="system machine"):
        replay({"machine": "journal", "steps": []})


@pytest.mark.interpreted(
    "plants its bug by replacing Master.handle_result, which the compiled loop calls natively: the patch is never seen"
)
def test_a_failure_a_pipelined_machine_saves_replays_as_a_depth_two_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A planted bug (results looked up by work ID, the presented generation ignored) makes a
    # step disagree; the machine saves the steps; the file replays at depth 2: it fails while
    # the bug is in, and passes, with the step refused, once it is out.
    handle_result = Master.handle_result

    def ignoring_the_generation(self: Master, rank: Rank, result: Result) -> object:
        return handle_result(self, rank, dataclasses.replace(result, generation=None))

    monkeypatch.setenv(SAVE_ENV, str(tmp_path))
    monkeypatch.setattr(Master, "handle_result", ignoring_the_generation)
    m = PipelinedSystemMachine()
    try:
        m.do_open(None)
        m.do_dispatch_work(gen.W1, 1)
        m.do_deliver_result(1, gen.W1, gen.S1, False, True, 101, 101)
        m.do_dispatch_work(gen.W1, 1)
        with pytest.raises(ConformanceFailure, match="the implementation returned"):
            m.do_deliver_result(1, gen.W1, gen.S1, True, False, 101, 101)
    finally:
        m.close_impl()  # closes the trace too: it ends in the disagreement, not validated
        m.teardown()
    doc = load(tmp_path / "system-pipelined-failure.json")
    assert [s["action"] for s in doc["steps"]] == [
        "DispatchWork",
        "DeliverResult",
        "DispatchWork",
        "DeliverResult",
    ]
    with pytest.raises(ConformanceFailure):
        replay(doc)
    monkeypatch.undo()
    assert replay(doc)[-1] == {
        "stale": False,
        "task": "s1",
        "mismatch": False,
        "work_ok": False,
        "state_ok": False,
    }
