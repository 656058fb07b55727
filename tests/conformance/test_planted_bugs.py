"""The depth-2 machines can fail: bugs planted for one test each must be reported.

Each test plants one bug that only shows beyond one dispatch per rank, runs a pipelined machine
(derandomized, no example database, no shrinking: the same examples every time) and requires
it to report the bug as a disagreement between implementation and model or as a broken
invariant. The coverage counts of these runs are put back afterwards: they are not the runs
the coverage gate in ``test_machines`` speaks about.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test

from leasefence.conformance import strategies as gen
from leasefence.conformance.coverage import COVERAGE
from leasefence.conformance.machines import (
    ConformanceFailure,
    PipelinedMasterMachine,
    PipelinedSystemMachine,
)
from leasefence.impl import journal as impl_journal
from leasefence.impl.master import Master
from leasefence.impl.wire import Rank, Result
from leasefence.model.system import FENCE_RANK

pytestmark = pytest.mark.conformance

#: Fixed examples, stopped at the first failure (shrinking would only cost time here).
PLANTED = settings(
    max_examples=60,
    stateful_step_count=80,
    derandomize=True,
    database=None,
    deadline=None,
    phases=[Phase.explicit, Phase.generate],
    report_multiple_bugs=False,
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(autouse=True)
def _coverage_untouched() -> Iterator[None]:
    saved = copy.deepcopy((COVERAGE.counts, COVERAGE.runs))
    yield
    COVERAGE.counts, COVERAGE.runs = saved


def test_a_master_that_ignores_the_presented_generation_is_caught_at_depth_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bug: results are looked up by work ID alone, as if no worker echoed its generation,
    # so an older generation's result settles the newer dispatch of the same work on its rank.
    handle_result = Master.handle_result

    def ignoring_the_generation(self: Master, rank: Rank, result: Result) -> object:
        return handle_result(self, rank, dataclasses.replace(result, generation=None))

    monkeypatch.setattr(Master, "handle_result", ignoring_the_generation)
    with pytest.raises(ConformanceFailure, match="the implementation returned"):
        run_state_machine_as_test(PipelinedMasterMachine, settings=PLANTED)


def test_a_journal_that_fences_by_rank_alone_is_caught_at_depth_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bug: the journal's owner check compares the rank and forgets the generation, so a
    # result of an older generation completes the work leased to the rank's newer dispatch.
    monkeypatch.setattr(
        impl_journal, "_owns", lambda held, worker, generation: held.owner == worker
    )
    with pytest.raises(ConformanceFailure, match="the implementation returned"):
        run_state_machine_as_test(PipelinedMasterMachine, settings=PLANTED)


class _RankFencedPipelinedSystem(PipelinedSystemMachine):
    """Depth 2 fenced by the rank alone on both sides: model and implementation agree, and
    both are unsafe."""

    NAME = "system-pipelined-rank-fence"
    BOUNDS = dataclasses.replace(gen.PIPELINED_BOUNDS, fence=FENCE_RANK)


def test_rank_fencing_at_depth_two_breaks_l2_in_the_invariants_the_machine_checks() -> None:
    # The README's counterexample, step by step: W1 to rank 1, master restart, W2 (the same
    # state task s1) to rank 1, then W1's forgotten result completes s1 under W2's dispatch.
    # Model and implementation agree at every step; the invariant checks the machine runs
    # after each step find L2 broken, and so does the validation of the run's trace.
    m = _RankFencedPipelinedSystem()
    try:
        m.do_open(None)
        m.do_dispatch_work(gen.W1, 1)
        m.do_restart_master()
        m.do_dispatch_work(gen.W2, 1)
        m.check_invariants_now()
        m.do_deliver_result(1, gen.W1, gen.S1, True, False)
        assert m.last == (False, gen.S1, False, True, True)  # W1's result took s1
        with pytest.raises(ConformanceFailure, match="the model breaks L2_OwnerFenced"):
            m.check_invariants_now()
    finally:
        with pytest.raises(ConformanceFailure, match="L2_OwnerFenced"):
            m.teardown()
