"""The model checker's report: what ``leasefence model check`` prints and writes for a set of
bounds, and the model-check layer of ``leasefence verify`` (checking layer: the model stays pure)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Collection
from dataclasses import asdict, replace
from pathlib import Path

from leasefence.model.check import CheckResult, changes, explore, format_label
from leasefence.model.flavours import (
    DESCRIPTIONS,
    EXPECTED_VIOLATIONS,
    Flavour,
    expected_violations,
)
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


def layer_model(deep: bool) -> list[Row]:
    """The exhaustive model check: the fixed protocol must pass, each flavour must fail on its L."""
    rows = []
    bounds = Bounds(max_leases=3) if deep else Bounds()
    for flavour in Flavour:
        t = time.perf_counter()
        r = explore(replace(bounds, flavour=flavour))
        expected = EXPECTED_VIOLATIONS[flavour]
        if flavour is Flavour.FIXED:
            ok = r.ok
            figures = f"{r.states:,} states, {r.transitions:,} transitions, depth {r.depth}"
        else:
            ok = bool(expected & set(r.violated))
            figures = f"caught: {', '.join(sorted(expected & set(r.violated))) or 'nothing'} in {len(r.trace) - 1} steps"
        rows.append(
            Row(
                "model check",
                f"flavour {flavour.value}",
                figures,
                PASS if ok else FAIL,
                time.perf_counter() - t,
                ", ".join(r.violated),
            )
        )
    # Issue 12: two dispatches per rank (with one wall tick, as `model check --pipeline 2`):
    # fenced by the rank alone it must fail on L2, by (rank, generation) it must pass.
    for fence in ("rank", "generation"):
        t = time.perf_counter()
        r = explore(replace(bounds, pipeline=2, fence=fence, max_wall=1))
        want = expected_violations(Flavour.FIXED, 2, fence)
        ok = bool(want & set(r.violated)) if want else r.ok
        figures = (
            f"caught: {', '.join(sorted(want & set(r.violated))) or 'nothing'} in {len(r.trace) - 1} steps"
            if want
            else f"{r.states:,} states, {r.transitions:,} transitions, depth {r.depth}"
        )
        rows.append(
            Row(
                "model check",
                f"pipeline 2, {fence} fence",
                figures,
                PASS if ok else FAIL,
                time.perf_counter() - t,
                ", ".join(r.violated),
            )
        )
    return rows
