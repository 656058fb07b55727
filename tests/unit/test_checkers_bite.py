"""The two checkers bite: trace validation refuses a wrong decision in a step of every kind
(an empty one included), and the model checker checks the step properties on a transition into a
state it has already seen."""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines import SystemMachine
from leasefence.conformance.tracecheck import TraceFormatError, validate
from leasefence.model import invariants as inv
from leasefence.model.check import explore, reachable
from leasefence.model.state import State
from leasefence.model.system import Bounds, initial_state

W1, W2, W3, W4 = (str(i.work_id) for i in gen.CATALOGUE)

#: The decisions each kind of trace step records, and a wrong value for each.
DECISIONS = {
    "DispatchWork": ("ok", "refused"),
    "DeliverResult": ("stale", "task", "work_ok", "state_ok"),
    "ReclaimExpired": ("reclaimed",),
    "RestartMaster": ("reclaimed",),
}


def _wrong(key: str, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if key == "refused":
        return "lease_work" if value is None else None
    if key == "task":
        return "s2" if value == "s1" else "s1"
    return [] if value else [W2]


def _run_trace() -> list[str]:
    """The trace of a short run with a step of every kind, each decision taken both ways where
    the run allows: granted and refused dispatches, a completed and a failed result, a stale
    one, reclaims and restarts that reclaim something and that reclaim nothing."""
    logging.disable(logging.WARNING)
    m = SystemMachine(start=10)
    try:
        m.do_open(None)
        m.do_dispatch_work(W1, 1)
        m.do_dispatch_work(W2, 2)  # refused: its state task is leased
        m.do_dispatch_work(W1, 2)  # refused: W1 is leased
        m.do_dispatch_work(W3, 2)
        m.do_reclaim_expired()  # reclaims nothing
        m.do_deliver_result(1, W1, "s1", True, False)
        m.do_tick(3)
        m.do_reclaim_expired()  # reclaims W3
        m.do_dispatch_work(W3, 2)
        m.do_deliver_result(2, W3, "s2", False, False)  # a failed result
        m.do_dispatch_work(W3, 1)
        m.do_dispatch_work(W2, 2)
        m.do_deliver_result(2, W2, "s1", True, True)
        m.do_dispatch_work(W4, 2)
        m.do_deliver_result(2, W2, "s1", True, False)  # its duplicate: stale
        m.do_tick(3)
        m.do_restart_master()  # reclaims W3
        m.do_restart_master()  # reclaims nothing
        assert m.trace is not None
        m.trace.close()
        m.trace = None
        return m.trace_path.read_text().splitlines()
    finally:
        m.teardown()
        logging.disable(logging.NOTSET)


def _known_hole(event: dict[str, Any], key: str) -> bool:
    """The one wrong decision trace validation accepts today: a granted dispatch naming a
    refused step (``test_..._names_a_refused_step`` below expects it to fail)."""
    return event["event"] == "DispatchWork" and key == "refused" and event["ok"]


def _tampered(lines: list[str], holes: bool = False) -> Iterator[tuple[str, list[str]]]:
    """Every trace with one decision of one step made wrong (``holes``: only the known hole's)."""
    for i, line in enumerate(lines):
        event = json.loads(line)
        for key in DECISIONS.get(event["event"], ()):
            if key not in event or _known_hole(event, key) != holes:
                continue
            bad = copy.deepcopy(event)
            bad[key] = _wrong(key, event[key])
            empty = "an empty " if event[key] in ([], None, False) else ""
            what = (
                f"line {i + 1}: {empty}{event['event']} with {key} {event[key]!r} -> {bad[key]!r}"
            )
            yield what, [*lines[:i], json.dumps(bad, separators=(",", ":")), *lines[i + 1 :]]


def test_the_run_trace_validates_and_holds_a_step_of_every_kind_both_ways() -> None:
    lines = _run_trace()
    assert validate(lines).ok
    events = [json.loads(x) for x in lines]
    kinds = {e["event"] for e in events}
    assert set(DECISIONS) <= kinds
    for kind in ("ReclaimExpired", "RestartMaster"):
        sizes = {bool(e.get("reclaimed")) for e in events if e["event"] == kind}
        assert sizes == {True, False}, kind
    assert {e["ok"] for e in events if e["event"] == "DispatchWork"} == {True, False}
    assert {e["stale"] for e in events if e["event"] == "DeliverResult"} == {True, False}


def test_trace_validation_refuses_a_wrong_decision_in_every_step_empty_ones_included() -> None:
    accepted = []
    checked = 0
    for what, lines in _tampered(_run_trace()):
        checked += 1
        try:
            ok = validate(lines).ok
        except TraceFormatError:
            ok = False
        if ok:
            accepted.append(what)
    assert checked >= 20
    assert not accepted, "trace validation accepted:\n" + "\n".join(accepted)


def test_trace_validation_refuses_a_granted_dispatch_that_names_a_refused_step() -> None:
    tampered = list(_tampered(_run_trace(), holes=True))
    assert tampered
    for what, lines in tampered:
        assert not validate(lines).ok, what


CI = Bounds(max_wall=1, max_dups=0)


def _edge_into_a_seen_state(b: Bounds) -> tuple[State, State]:
    """A transition whose target the breadth-first search had already reached from another
    state: the model checker meets the pair only as a step into an old state."""
    found_from: dict[State, State | None] = {initial_state(): None}
    for s, _, t in reachable(b):
        if t not in found_from:
            found_from[t] = s
        elif found_from[t] not in (s, None) and s != t:
            return s, t
    raise AssertionError("no transition into a seen state")


def test_the_model_checker_checks_step_properties_on_a_transition_into_a_seen_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    source, target = _edge_into_a_seen_state(CI)

    def planted(before: State, after: State, b: Bounds) -> bool:
        return (before, after) != (source, target)

    monkeypatch.setitem(inv.STEP_PROPERTIES, "Planted_OnlyOnAnOldState", planted)
    result = explore(CI)
    assert result.violated == ["Planted_OnlyOnAnOldState"]
    assert result.trace[-2].state == source
    assert result.trace[-1].state == target
