"""Pipelined dispatch (issue 12): rank fencing is not enough beyond one dispatch per rank, the
generation token ``(rank, dispatch_generation)`` is; in the model and in the implementation."""

from __future__ import annotations

from dataclasses import replace

import pytest

from leasefence.cli import main
from leasefence.model.check import explore, format_label
from leasefence.model.flavours import Flavour, expected_violations
from leasefence.model.system import Bounds

# The CI constants (MCLeaseFence.cfg) at depth 2.
PIPELINED = Bounds(max_wall=1, max_dups=0, pipeline=2)


def test_depth_one_rank_fencing_explores_exactly_f314s_graph() -> None:
    result = explore(Bounds(max_wall=1, max_dups=0))
    assert result.ok
    assert result.states == 9176  # as MCLeaseFence.cfg, before pipelining existed


def test_rank_fencing_at_depth_two_lets_a_forgotten_result_take_a_newer_dispatchs_state() -> None:
    result = explore(replace(PIPELINED, fence="rank"))
    assert result.violated == ["L2_OwnerFenced"]
    assert [format_label(s.label) for s in result.trace] == [
        "Init",
        "DispatchWork('w1', 1)",
        "RestartMaster()",
        "DispatchWork('w2', 1)",
        "DeliverResult(1, 'w1', 's1', True, False)",
    ]
    assert expected_violations(Flavour.FIXED, 2, "rank") == {"L2_OwnerFenced"}


def test_generation_fencing_at_depth_two_holds_every_invariant() -> None:
    result = explore(replace(PIPELINED, fence="generation", max_reboots=0, max_rollbacks=0))
    assert result.ok, result.violated
    assert result.action_counts["DeliverResult"] > 0
    assert expected_violations(Flavour.FIXED, 2, "generation") == frozenset()


def test_generation_fencing_at_depth_one_holds_too() -> None:
    result = explore(replace(PIPELINED, pipeline=1, fence="generation"))
    assert result.ok, result.violated


@pytest.mark.parametrize(("fence", "status"), [("rank", 1), ("generation", 0)])
def test_model_check_command_pipeline_flags(
    fence: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["model", "check", "--quiet", "--pipeline", "2", "--fence", fence]
    args += ["--dups", "0", "--reboots", "0", "--rollbacks", "0"]
    assert main(args) == status
    out = capsys.readouterr().out
    assert "pipeline 2, fence " + fence in out
    if status:
        assert "VIOLATED: L2_OwnerFenced" in out
        assert "matched: ['L2_OwnerFenced']" in out
        assert "RestartMaster()" in out
    else:
        assert "OK: TypeOK, L1-L7" in out


def test_pipeline_zero_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["model", "check", "--pipeline", "0"])
