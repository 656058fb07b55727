"""TLC and the Python checker give the same verdict on every liveness config (issue 21 point 3):
the same property violated on each must-fail twin, and on the must-pass config no violation
and the same number of states. Marked ``tlc``; the must-pass config (TLC's liveness check is
single-threaded: about a minute of CPU) also ``slow``."""

from __future__ import annotations

from pathlib import Path

import pytest

from leasefence.tlc.configs import expectation
from leasefence.tlc.jar import Tools
from leasefence.tlc.liveagree import live_agree, live_configs
from leasefence.tlc.runner import parse_tool_output

pytestmark = pytest.mark.tlc

TWINS = [c for c in live_configs() if expectation(c).must_fail]


def test_there_is_a_must_pass_live_config_and_a_twin_per_kind_of_planted_bug() -> None:
    names = {c.stem for c in live_configs()}
    assert "MCLeaseFenceLive" in names
    assert {
        "BuggyLive_EveryLeaseFreed",
        "BuggyLive_EveryRankIdle",
        "BuggyLive_EveryItemSettled",
        "BuggyLive_Unfair",
    } <= names


@pytest.mark.parametrize("cfg", TWINS, ids=[c.stem for c in TWINS])
def test_tlc_and_the_live_checker_report_the_same_violated_property(
    cfg: Path, tools: Tools
) -> None:
    ag = live_agree(cfg, tools)
    assert ag.ok, ag.report()
    assert ag.tlc.violated in expectation(cfg).violations
    assert ag.tlc.violation_kind == "temporal property"
    assert ag.tlc.lasso is not None  # a lasso: stuttering, or back to a state
    assert ag.tlc.counterexample[0].action == "Init"


@pytest.mark.slow
def test_tlc_and_the_live_checker_pass_the_ci_live_config_with_one_state_count(
    tools: Tools,
) -> None:
    (cfg,) = [c for c in live_configs() if c.stem == "MCLeaseFenceLive"]
    ag = live_agree(cfg, tools)
    assert ag.ok, ag.report()
    assert ag.tlc.distinct_states == ag.model.states == 11578


def test_the_runner_reads_a_temporal_violation_and_its_lasso() -> None:
    def msg(code: int, body: str) -> str:
        return f"@!@!@STARTMSG {code}:1 @!@!@\n{body}\n@!@!@ENDMSG {code} @!@!@\n"

    text = (
        msg(2116, "Temporal properties were violated.")
        + msg(2217, "1: <Initial predicate>\n/\\ wall = 0")
        + msg(
            2217, "2: <Tick line 1, col 1 to line 2, col 2 of module LeaseFenceLive>\n/\\ wall = 1"
        )
        + msg(2217, "3: <LF!ReclaimExpired line 9, col 1 of module LeaseFence>\n/\\ wall = 1")
        + msg(2122, "2: Back to state 1")
    )
    r = parse_tool_output("X.cfg", 13, text)
    assert r.violation_kind == "temporal property"
    assert [s.action for s in r.counterexample] == ["Init", "Tick", "ReclaimExpired"]
    assert r.lasso is not None
    assert r.lasso.startswith("back to state")
    assert parse_tool_output("X.cfg", 13, msg(2116, "x") + msg(2218, "3: Stuttering")).lasso == (
        "stuttering"
    )


def test_tlc_agree_on_a_live_config_compares_verdicts_and_writes_them(
    tools: Tools, tmp_path: Path
) -> None:
    import json

    from leasefence.tlc.commands import EXIT_OK, run

    out = tmp_path / "agree.json"
    assert run(["agree", "BuggyLive_EveryRankIdle"], False, 1, out) == EXIT_OK
    (row,) = json.loads(out.read_text())
    assert row["ok"] is True
    assert row["tlc"] == row["model"] == "EveryRankIdle"
