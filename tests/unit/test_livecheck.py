"""The liveness checker (issue 21 point 3): strongly connected components, weak fairness, the
lasso it prints, and the live system of tla/LeaseFenceLive.tla on its CI constants."""

from __future__ import annotations

import pytest

from leasefence.model.check import format_label
from leasefence.model.live import (
    LIVE_PROPERTIES,
    LeadsTo,
    LiveBounds,
    budget,
    expected_live_violations,
    live_successors,
    tick,
)
from leasefence.model.livecheck import LiveGraph, build_graph, check_leads_to, check_live, sccs
from leasefence.model.state import Journal, Lease, State
from leasefence.model.system import Bounds, Label
from leasefence.modelcheck import LIVE_CI_BOUNDS
from leasefence.tlc.configs import TLA_DIR, _section_lines, all_configs, is_live
from leasefence.tlc.liveagree import live_bounds_of_config

CI = LiveBounds(LIVE_CI_BOUNDS)
UNFAIR = LiveBounds(LIVE_CI_BOUNDS, fair=False)


@pytest.fixture(scope="module")
def ci_graph() -> LiveGraph:
    return build_graph(CI)


HALT = LiveBounds(LIVE_CI_BOUNDS, halt_after_rollback=True)


@pytest.fixture(scope="module")
def halt_graph() -> LiveGraph:
    return build_graph(HALT)


@pytest.fixture(scope="module")
def unfair_graph() -> LiveGraph:
    return build_graph(UNFAIR)


def _graph(n: int, edges: list[tuple[int, int, int]], classes: int = 1) -> LiveGraph:
    """A hand-made graph of states ``State(wall=i)``: edges ``(from, to, class bits)``; a class
    is enabled where one of its edges leaves."""
    g = LiveGraph([f"A{k}" for k in range(classes)])
    g.states = [State(wall=i) for i in range(n)]
    g.parent = [-1] + [0] * (n - 1)
    g.via = [None] * n
    g.edges = [[] for _ in range(n)]
    g.enabled = [0] * n
    for a, b, bits in edges:
        label: Label = (f"A{bits}", (a, b))
        g.edges[a].append((b, bits, label))
        g.enabled[a] |= bits
    return g


def _never_wall(k: int) -> LeadsTo:
    """``Init ~> wall = k``: fails on a fair behaviour that never reaches state k."""
    return LeadsTo("P", f"reach {k}", None, lambda s: s.wall == k)


def test_tarjan_finds_the_components_of_a_graph_with_two_cycles_and_a_bridge() -> None:
    succ = [[1], [2], [0, 3], [4], [3], []]
    comp = sccs(6, succ, [True] * 6)
    assert comp[0] == comp[1] == comp[2]
    assert comp[3] == comp[4] != comp[0]
    assert comp[5] not in (comp[0], comp[3])
    inside = [True, True, False, True, True, True]  # cut the first cycle at 2
    cut = sccs(6, succ, inside)
    assert cut[0] != cut[1]
    assert cut[2] == -1


def test_a_cycle_that_keeps_a_fair_action_enabled_without_taking_it_is_not_fair() -> None:
    # 0 <-> 1 by class-0-free steps (bits 0 means no fairness class), and from both the fair
    # class A0 leads to 2, the goal: weak fairness forces the step, so the property holds.
    g = _graph(3, [(0, 1, 0), (1, 0, 0), (0, 2, 1), (1, 2, 1)])
    assert check_leads_to(g, _never_wall(2)) is None


def test_a_cycle_that_passes_a_state_where_the_fair_action_is_disabled_is_fair() -> None:
    # As above, but from 1 the fair class is disabled: going round 0 -> 1 -> 0 for ever is fair.
    g = _graph(3, [(0, 1, 0), (1, 0, 0), (0, 2, 1)])
    found = check_leads_to(g, _never_wall(2))
    assert found is not None
    start, path, loop, note = found
    assert start == 0
    assert path == []
    assert [v for v, _ in loop] == [1, 0]
    assert "A0 disabled on the way" in note


def test_a_state_with_every_fair_action_disabled_stutters_for_ever() -> None:
    g = _graph(3, [(0, 1, 1), (0, 2, 0)])  # 1 has no successor at all
    found = check_leads_to(g, _never_wall(2))
    assert found is not None
    _, path, loop, note = found
    assert [v for v, _ in path] == [1]
    assert loop == []
    assert note.startswith("stutters for ever")


def test_without_fairness_every_state_may_stutter_for_ever() -> None:
    g = _graph(2, [(0, 1, 1)], classes=0)
    g.edges[0] = [(1, 0, ("A", ()))]
    g.enabled[0] = 0
    found = check_leads_to(g, _never_wall(1))
    assert found is not None
    assert found[0] == 0
    assert found[2] == []


def test_the_live_ci_constants_are_the_configs_and_pass_with_tlcs_state_count(
    ci_graph: LiveGraph,
) -> None:
    assert live_bounds_of_config(TLA_DIR / "MCLeaseFenceLive.cfg") == CI
    r = check_live(CI, graph=ci_graph)
    assert r.ok, (r.violated, r.instance)
    assert r.states == 11578  # TLC's count for MCLeaseFenceLive.cfg


def test_no_live_config_has_a_state_constraint() -> None:
    live = [c for c in all_configs(deep=True) if is_live(c)]
    assert len(live) >= 4
    for cfg in live:
        sections = {sec for sec, _ in _section_lines(cfg)}
        assert not sections & {"CONSTRAINT", "CONSTRAINTS", "ACTION_CONSTRAINT"}, cfg.name
    assert "WithinConstraint ==" not in (TLA_DIR / "LeaseFenceLive.tla").read_text()
    assert "LF!WithinConstraint" not in (TLA_DIR / "LeaseFenceLive.tla").read_text()


def test_the_clock_keeps_moving_in_every_reachable_state_until_nothing_is_left_to_age(
    ci_graph: LiveGraph,
) -> None:
    b = CI.base
    for s in ci_graph.states:
        t = tick(s, b)
        if t == s:  # stutters only with both clocks at the top and every sliding stamp at 0
            assert s.wall == s.mono == b.max_wall
            assert all(x.updated == 0 or x.clock == "legacy" for _, x in s.journal.leases)
            assert all(x.updated == 0 for _, x in s.coordinator.leases)


def test_after_a_rollback_the_sliding_clock_ages_a_lease_until_it_is_reclaimable() -> None:
    b = CI.base
    lease = Lease(owner=1, updated=1, clock="unix")
    s = State(wall=0, mono=1, rollbacks=1, journal=Journal(leases=(("w1", lease),)))
    s = tick(tick(s, b), b)  # wall 0 -> 1, then the origin slides: the stamp gets older
    assert s.wall == 1
    assert s.journal.leases[0][1].updated == 0
    labels = {label[0]: t for label, t in live_successors(s, CI)}
    assert labels["ReclaimExpired"].journal.leases == ()


def test_budget_is_a_guard_of_dispatch_and_no_successor_exceeds_it(ci_graph: LiveGraph) -> None:
    for s, edges in zip(ci_graph.states, ci_graph.edges, strict=True):
        assert all(n <= CI.base.max_attempts for _, n in s.journal.attempts)
        for _, _, label in edges:
            if label[0] == "DispatchWork":
                assert budget(s, str(label[1][0]), CI.base)


def test_halted_recovery_is_caught_on_a_lease_taken_before_the_rollback(
    halt_graph: LiveGraph,
) -> None:
    r = check_live(HALT, graph=halt_graph)
    assert r.violated == ["EveryLeaseFreed"]
    assert "EveryLeaseFreed" in expected_live_violations(HALT)
    assert r.prefix[0].label is None
    assert r.fair_note.startswith("stutters for ever")
    assert "RollbackClock" in [format_label(s.label)[:13] for s in r.prefix]
    assert r.prefix[-1].state.journal.leases  # the lease still held, for ever


def test_a_starved_item_is_caught_neither_completed_nor_given_up() -> None:
    starved = LiveBounds(LIVE_CI_BOUNDS, starve=frozenset({"w2"}))
    r = check_live(starved)
    assert r.violated == ["EveryItemSettled"]
    assert r.instance == "item w2"
    assert "EveryItemSettled" in expected_live_violations(starved)
    assert "w2" not in dict(r.prefix[-1].state.journal.attempts)  # never even tried


@pytest.mark.parametrize("name", sorted(LIVE_PROPERTIES))
def test_without_fairness_each_property_fails_alone(name: str, unfair_graph: LiveGraph) -> None:
    r = check_live(UNFAIR, only={"TypeOK", name}, graph=unfair_graph)
    assert r.violated == [name]


def test_every_rank_idle_fails_when_recovery_halts_after_a_rollback(halt_graph: LiveGraph) -> None:
    r = check_live(HALT, only={"TypeOK", "EveryRankIdle"}, graph=halt_graph)
    assert r.violated == ["EveryRankIdle"]


def test_live_bounds_refuse_a_ttl_beyond_the_clock_and_unknown_starved_items() -> None:
    with pytest.raises(ValueError, match="max_wall >= ttl"):
        LiveBounds(Bounds(ttl=2, max_wall=1))
    with pytest.raises(ValueError, match="unknown work"):
        LiveBounds(Bounds(), starve=frozenset({"w9"}))
