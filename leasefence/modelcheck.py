"""The model checker's report: what ``leasefence model check`` prints and writes for a set of
bounds, and the model-check layer of ``leasefence verify`` (checking layer: the model stays pure)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Collection
from dataclasses import asdict, replace
from pathlib import Path

from leasefence.model.check import CheckResult, Step, changes, explore, format_label
from leasefence.model.flavours import (
    DESCRIPTIONS,
    Flavour,
    expected_violations,
)
from leasefence.model.live import LiveBounds, expected_live_violations
from leasefence.model.livecheck import LiveResult, check_live
from leasefence.model.system import Bounds
from leasefence.report import FAIL, PASS, Row


def run_check(
    bounds: Bounds,
    quiet: bool = False,
    json_path: Path | None = None,
    only: Collection[str] | None = None,
) -> int:
    """Explore every state reachable under ``bounds``, print the figures and any shortest
    counterexample, write them as JSON to ``json_path``; 0 when every check holds, else 1.
    ``only``: check just these invariants and properties (as a TLC config names them)."""
    start = time.perf_counter()

    def progress(r: CheckResult, queued: int) -> None:
        if not quiet:
            el = time.perf_counter() - start
            print(
                f"  ... {r.states:,} states, {r.transitions:,} transitions, depth {r.depth}, "
                f"{queued:,} queued, {r.states / el:,.0f} states/s",
                file=sys.stderr,
                flush=True,
            )

    result = explore(bounds, progress, only=only)
    elapsed = time.perf_counter() - start
    rate = result.states / elapsed if elapsed > 0 else 0.0
    _print_result(bounds, result, elapsed, rate)
    if json_path:
        doc = _json_doc(bounds, result, elapsed, rate)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if result.ok else 1


def _print_result(bounds: Bounds, result: CheckResult, elapsed: float, rate: float) -> None:
    print(f"model check, flavour {bounds.flavour.value} ({DESCRIPTIONS[bounds.flavour]})")
    print(
        f"  bounds: works {dict(bounds.task_of)}, ranks {list(bounds.ranks)}, ttl {bounds.ttl}, "
        f"max_wall {bounds.max_wall}, reboots {bounds.max_reboots}, rollbacks {bounds.max_rollbacks}, "
        f"restarts {bounds.max_restarts}, attempts {bounds.max_attempts}, leases {bounds.max_leases}, "
        f"dups {bounds.max_dups}, pipeline {bounds.pipeline}, fence {bounds.fence}"
    )
    print(
        f"  {result.states:,} distinct states, {result.transitions:,} transitions, depth {result.depth}, "
        f"{elapsed:.2f} s, {rate:,.0f} states/s"
    )
    if result.ok:
        print(
            "  OK: TypeOK, L1-L7, NoStuckLease and CompletionsAccounted hold in every reachable "
            "state and transition"
        )
    else:
        print(f"  VIOLATED: {', '.join(result.violated)}")
        print(f"  shortest counterexample ({len(result.trace) - 1} steps):")
        prev = None
        for i, step in enumerate(result.trace):
            print(f"  {i:>3}. {format_label(step.label)}")
            if prev is not None:
                for line in changes(prev, step.state) or ["(no change)"]:
                    print(f"         {line}")
            prev = step.state
        print(f"  last state: {result.trace[-1].state!r}")
        expected = expected_violations(bounds.flavour, bounds.pipeline, bounds.fence)
        if expected:
            hit = sorted(expected & set(result.violated))
            what = bounds.flavour.value
            if bounds.pipeline > 1 and bounds.fence == "rank":
                what += f", pipeline {bounds.pipeline} with rank fencing"
            print(f"  expected for {what}: one of {sorted(expected)}; matched: {hit or 'NONE'}")


def _json_doc(
    bounds: Bounds, result: CheckResult, elapsed: float, rate: float
) -> dict[str, object]:
    return {
        "flavour": bounds.flavour.value,
        "bounds": {k: v for k, v in asdict(bounds).items() if k != "flavour"},
        "states": result.states,
        "transitions": result.transitions,
        "depth": result.depth,
        "seconds": round(elapsed, 3),
        "states_per_second": round(rate, 1),
        "violated": result.violated,
        "actions": result.action_counts,
        "counterexample": [
            {"action": format_label(s.label), "state": repr(s.state)} for s in result.trace
        ],
    }


def verdict(r: CheckResult, expected: Collection[str]) -> tuple[bool, str]:
    """Whether an exploration went as its constants say, and its figures: with ``expected``
    violations (``flavours.expected_violations``) it must find one of them, with none it must
    pass (the fixed protocol, and a twin whose bug these constants cannot reach)."""
    if not expected:
        return r.ok, f"{r.states:,} states, {r.transitions:,} transitions, depth {r.depth}"
    caught = sorted(set(expected) & set(r.violated))
    return bool(caught), f"caught: {', '.join(caught) or 'nothing'} in {len(r.trace) - 1} steps"


def layer_model(deep: bool) -> list[Row]:
    """The exhaustive model check: the fixed protocol must pass, each flavour must fail on its
    L (or pass, where these constants cannot reach its bug), then the pipelined fences."""
    rows = []
    bounds = Bounds(max_leases=3) if deep else Bounds()
    # Issue 12: two dispatches per rank (with one wall tick, as `model check --pipeline 2`):
    # fenced by the rank alone it must fail on L2, by (rank, generation) it must pass. Issue
    # 21: a generation without the epoch (fence "counter") repeats after a restart, and without
    # the stale test the late result of a forgotten dispatch is committed: it must fail.
    pipelined = replace(bounds, pipeline=2, max_wall=1)
    runs = [(f"flavour {flavour.value}", replace(bounds, flavour=flavour)) for flavour in Flavour]
    runs += [
        (f"pipeline 2, {fence} fence", replace(pipelined, fence=fence))
        for fence in ("rank", "generation")
    ]
    no_guard = replace(pipelined, fence="counter", flavour=Flavour.NO_STALE_GUARD)
    runs.append(("pipeline 2, counter fence, flavour no-stale-guard", no_guard))
    for name, b in runs:
        t = time.perf_counter()
        r = explore(b)
        ok, figures = verdict(r, expected_violations(b.flavour, b.pipeline, b.fence))
        rows.append(
            Row(
                "model check",
                name,
                figures,
                PASS if ok else FAIL,
                time.perf_counter() - t,
                ", ".join(r.violated),
            )
        )
    return rows


def run_live_check(
    lb: LiveBounds, json_path: Path | None = None, only: Collection[str] | None = None
) -> int:
    """``leasefence model check --live``: build the live graph, check TypeOK and the liveness
    properties under the spec's fairness, print the figures and any lasso counterexample, write
    them as JSON to ``json_path``; 0 when every property holds, else 1."""
    start = time.perf_counter()
    result = check_live(lb, only)
    elapsed = time.perf_counter() - start
    b = lb.base
    what = "LiveSpec" if lb.fair else "LiveSpecUnfair (no fairness)"
    bugs = [f"starve {sorted(lb.starve)}"] if lb.starve else []
    bugs += ["recovery halts after a rollback"] if lb.halt_after_rollback else []
    print(
        f"live check, {what}, flavour {b.flavour.value}" + (f", {', '.join(bugs)}" if bugs else "")
    )
    print(
        f"  bounds: works {dict(b.task_of)}, ranks {list(b.ranks)}, ttl {b.ttl}, "
        f"max_wall {b.max_wall}, reboots {b.max_reboots}, rollbacks {b.max_rollbacks}, "
        f"restarts {b.max_restarts}, attempts {b.max_attempts} per item, dups {b.max_dups}"
    )
    print(
        f"  {result.states:,} distinct states, {result.transitions:,} transitions, "
        f"depth {result.depth}, {elapsed:.2f} s"
    )
    if result.ok:
        print("  OK: TypeOK, EveryLeaseFreed, EveryRankIdle, EveryItemSettled hold")
    else:
        print(f"  VIOLATED: {', '.join(result.violated)} ({result.instance})")
        _print_lasso(result)
        expected = expected_live_violations(lb)
        if expected:
            hit = sorted(expected & set(result.violated))
            print(f"  expected: one of {sorted(expected)}; matched: {hit or 'NONE'}")
    if json_path:
        doc = {
            "fair": lb.fair,
            "starve": sorted(lb.starve),
            "halt_after_rollback": lb.halt_after_rollback,
            "flavour": b.flavour.value,
            "bounds": {k: v for k, v in asdict(b).items() if k != "flavour"},
            "states": result.states,
            "transitions": result.transitions,
            "depth": result.depth,
            "seconds": round(elapsed, 3),
            "violated": result.violated,
            "instance": result.instance,
            "prefix": [_step_json(s) for s in result.prefix],
            "loop": [_step_json(s) for s in result.loop],
            "loop_note": result.fair_note,
        }
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(doc, indent=2) + "\n")
    return 0 if result.ok else 1


def _step_json(step: Step) -> dict[str, str]:
    return {"action": format_label(step.label), "state": repr(step.state)}


def _print_lasso(result: LiveResult) -> None:
    """The lasso: the prefix from Init, then the loop (or the stuttering) repeated for ever."""
    print(f"  counterexample: a prefix of {len(result.prefix) - 1} steps, then {result.fair_note}")
    prev = None
    for i, step in enumerate(result.prefix):
        print(f"  {i:>3}. {format_label(step.label)}")
        if prev is not None:
            for line in changes(prev, step.state) or ["(no change)"]:
                print(f"         {line}")
        prev = step.state
    back = len(result.prefix) - 1
    for i, step in enumerate(result.loop, start=len(result.prefix)):
        print(f"  {i:>3}. {format_label(step.label)}")
        if prev is not None:
            for line in changes(prev, step.state) or ["(no change)"]:
                print(f"         {line}")
        prev = step.state
    if result.loop:
        print(f"       back to state {back}, for ever")
    else:
        print(f"       state {back} stutters for ever")
    print(f"  loop state: {result.prefix[-1].state!r}")


def layer_live(deep: bool) -> list[Row]:
    """The live check (issue 21 point 3) on the constants of tla/MCLeaseFenceLive.cfg: the
    fixed protocol must pass; each planted liveness bug must fail on its property (the same
    with ``deep``: the live bounds have one tier)."""
    b = LIVE_CI_BOUNDS
    cases = [
        ("LiveSpec, fixed", LiveBounds(b)),
        ("no fairness", LiveBounds(b, fair=False)),
        ("recovery halts after a rollback", LiveBounds(b, halt_after_rollback=True)),
        ("dispatcher starves w2", LiveBounds(b, starve=frozenset({"w2"}))),
    ]
    rows = []
    for name, lb in cases:
        t = time.perf_counter()
        r = check_live(lb)
        want = expected_live_violations(lb)
        ok = bool(want & set(r.violated)) if want else r.ok
        figures = (
            f"caught: {', '.join(r.violated)} ({r.instance}), lasso {len(r.prefix) - 1}+{len(r.loop)}"
            if want
            else f"{r.states:,} states, {r.transitions:,} transitions"
        )
        rows.append(
            Row(
                "live check",
                name,
                figures,
                PASS if ok else FAIL,
                time.perf_counter() - t,
                ", ".join(r.violated),
            )
        )
    return rows


#: The constants of tla/MCLeaseFenceLive.cfg (a test checks they are the config's).
LIVE_CI_BOUNDS = Bounds(
    task_of=(("w1", "s1"), ("w2", "s1")), max_wall=1, max_dups=0, max_reboots=0, max_attempts=2
)
