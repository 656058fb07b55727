"""Every property named in the spec (and in the live spec) has a must-fail config that checks it
alone (with TypeOK) and that the model checker (the live checker), under the config's
constants, reports violated (issue 21)."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest

from leasefence.model import invariants
from leasefence.model.check import explore
from leasefence.model.flavours import Flavour
from leasefence.model.live import LIVE_PROPERTIES
from leasefence.model.livecheck import check_live
from leasefence.model.state import State
from leasefence.model.system import Bounds
from leasefence.tlc.agree import bounds_of_config
from leasefence.tlc.configs import TLA_DIR, all_configs, checked_properties, expectation
from leasefence.tlc.liveagree import live_bounds_of_config

#: Properties with no must-fail config, and why (none today; a new property must add its twin
#: or say here why it cannot fail).
WITHOUT_TWIN: dict[str, str] = {}


def spec_properties() -> set[str]:
    """The L* operators, NoStuckLease and CompletionsAccounted the spec defines (the ``...Step``
    actions excluded)."""
    text = (TLA_DIR / "LeaseFence.tla").read_text()
    return set(re.findall(r"^((?:L\d_\w+)|NoStuckLease\w*|CompletionsAccounted) ==", text, re.M))


def must_fail_twins(name: str) -> list[str]:
    """The must-fail configs that check ``name`` alone (with TypeOK) and expect it to fail."""
    return [
        c.name
        for c in all_configs(deep=True)
        if checked_properties(c) == {"TypeOK", name} and name in expectation(c).violations
    ]


def test_the_spec_the_ci_config_and_the_model_name_the_same_properties() -> None:
    model = set(invariants.STATE_INVARIANTS) | set(invariants.STEP_PROPERTIES)
    ci = checked_properties(TLA_DIR / "MCLeaseFence.cfg")
    assert spec_properties() | {"TypeOK"} == set(ci) == model


@pytest.mark.parametrize("name", sorted(spec_properties()))
def test_each_property_has_a_must_fail_twin_that_checks_it_alone_or_a_reason(name: str) -> None:
    twins = must_fail_twins(name)
    if name in WITHOUT_TWIN:
        assert twins == [], f"{name} has a twin now: drop it from WITHOUT_TWIN"
    else:
        assert twins, f"no must-fail config checks {name} alone"


@pytest.mark.parametrize(
    "name",
    sorted(spec_properties() - set(WITHOUT_TWIN)),
    ids=sorted(spec_properties() - set(WITHOUT_TWIN)),
)
def test_the_model_checker_reports_each_twins_property_under_its_constants(name: str) -> None:
    for cfg in must_fail_twins(name):
        result = explore(bounds_of_config(TLA_DIR / cfg), only=checked_properties(TLA_DIR / cfg))
        assert name in result.violated, (cfg, result.violated)


#: The properties about recovery steps (issue 21 point 2) and the twin flavour that breaks each;
#: checked against every other property at the twin config's bounds, the flavour passes: it
#: violates that property and only it (in particular not the rule checks L5_LegacyMigratable
#: and NoStuckLease, which cannot see a recovery that ignores the rule).
ONLY_IT = {
    "L5_LegacyMigrated": "Buggy_L5_LegacyMigrated.cfg",
    "NoStuckLeaseRecovered": "Buggy_NoStuckLeaseRecovered.cfg",
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ONLY_IT))
def test_each_new_twin_flavour_breaks_its_property_only(name: str) -> None:
    cfg = TLA_DIR / ONLY_IT[name]
    assert cfg.name in must_fail_twins(name)
    b = bounds_of_config(cfg)
    everything = set(invariants.STATE_INVARIANTS) | set(invariants.STEP_PROPERTIES)
    assert explore(b, only=everything - {name}).ok
    assert explore(b, only={name}).violated == [name]


#: The twins of L3's failures and network (issue 21 "Why" 5), each with its config.
L3_TWINS = {
    Flavour.REFUSAL_BOOKS_FAILURE: "Buggy_L3_RefusalChangesNothing_Failures.cfg",
    Flavour.REFUSAL_SENDS_WORK: "Buggy_L3_RefusalChangesNothing_Network.cfg",
}

#: Bounds small enough for the unit suite where both twins show (two work IDs of one task).
L3_SMALL = Bounds(
    task_of=(("w1", "s1"), ("w2", "s1")), max_wall=1, max_reboots=0, max_rollbacks=0, max_dups=0
)


def _l3_before_issue_21(before: State, after: State, b: Bounds) -> bool:
    """L3 as it was: its attempts and leases part alone (the spec's L3Leases)."""
    return invariants.l3_leases(before, after, b)


@pytest.mark.parametrize("flavour", list(L3_TWINS), ids=[f.value for f in L3_TWINS])
def test_each_l3_twin_breaks_l3_only_and_the_l3_of_attempts_and_leases_alone_misses_it(
    flavour: Flavour, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert L3_TWINS[flavour] in must_fail_twins("L3_RefusalChangesNothing")
    b = replace(L3_SMALL, flavour=flavour)
    name = "L3_RefusalChangesNothing"
    everything = set(invariants.STATE_INVARIANTS) | set(invariants.STEP_PROPERTIES)
    assert explore(b, only=everything - {name}).ok
    found = explore(b, only={"TypeOK", name})
    assert found.violated == [name]
    assert [step.label for step in found.trace[1:]] == [
        ("DispatchWork", ("w1", 1)),
        ("DispatchWork", ("w2", 2)),
    ]
    monkeypatch.setitem(invariants.STEP_PROPERTIES, name, _l3_before_issue_21)
    assert explore(b, only={"TypeOK", name}).ok


@pytest.mark.slow
@pytest.mark.parametrize("flavour", list(L3_TWINS), ids=[f.value for f in L3_TWINS])
def test_at_its_configs_bounds_each_l3_twin_passes_everything_but_l3(flavour: Flavour) -> None:
    b = bounds_of_config(TLA_DIR / L3_TWINS[flavour])
    assert b.flavour is flavour
    everything = set(invariants.STATE_INVARIANTS) | set(invariants.STEP_PROPERTIES)
    assert explore(b, only=everything - {"L3_RefusalChangesNothing"}).ok


# Liveness (issue 21 point 3): the properties of tla/LeaseFenceLive.tla, each with a must-fail
# config (BuggyLive_<property>.cfg) that checks it alone and that the live checker reports.


def live_spec_properties() -> set[str]:
    """The liveness properties LeaseFenceLive.tla defines."""
    text = (TLA_DIR / "LeaseFenceLive.tla").read_text()
    return set(re.findall(r"^(Every\w+) ==", text, re.MULTILINE))


def test_the_live_spec_the_live_ci_config_and_the_live_model_name_the_same_properties() -> None:
    ci = checked_properties(TLA_DIR / "MCLeaseFenceLive.cfg")
    assert live_spec_properties() | {"TypeOK"} == set(ci) == set(LIVE_PROPERTIES) | {"TypeOK"}


@pytest.mark.parametrize("name", sorted(live_spec_properties()))
def test_the_live_checker_reports_each_live_property_under_its_twins_constants(name: str) -> None:
    twins = must_fail_twins(name)
    assert f"BuggyLive_{name}.cfg" in twins, twins
    for cfg in twins:
        result = check_live(live_bounds_of_config(TLA_DIR / cfg), checked_properties(TLA_DIR / cfg))
        assert result.violated == [name], (cfg, result.violated)
