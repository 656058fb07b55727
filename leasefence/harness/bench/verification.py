"""The ``verification`` benchmark: the model checker's states per second against TLC's, and conformance steps per second."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import Sizes, fmt, interleave, median


def _tlc_tools() -> tuple[Any, str]:
    """TLC's jar and java, or None and the reason none can be had (never a download here)."""
    from leasefence import tlc

    try:
        return tlc.find_tools(download=False), ""
    except tlc.TlcUnavailable as exc:
        return None, str(exc)


def bench_model_vs_tlc(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from leasefence import tlc
    from leasefence.model.check import explore
    from leasefence.model.system import Bounds
    from leasefence.tlc.agree import agreement_files, bounds_of_config

    cfg = tlc.TLA_DIR / "MCLeaseFence.cfg"
    bounds = bounds_of_config(cfg)
    if sizes.name == "tiny":  # a few hundred states: the same checks, seconds instead of tens
        bounds = Bounds(
            task_of=(("w1", "s1"), ("w2", "s1")),
            max_wall=1,
            max_reboots=0,
            max_rollbacks=0,
            max_restarts=0,
            max_dups=0,
        )
        module, constants = agreement_files(bounds)
        checks = cfg.read_text().split("INVARIANTS", 1)[1]
        cfg = where / "MCAgree.cfg"
        cfg.write_text(constants + "INVARIANTS" + checks)
        (where / "MCAgree.tla").write_text(module)
    tools, reason = _tlc_tools()
    states: dict[str, int] = {}

    def model(rep: int) -> float:
        start = time.perf_counter()
        r = explore(bounds)
        seconds = time.perf_counter() - start
        states["model"] = r.states
        say(f"    model checker  {r.states:,} states in {seconds:.1f} s")
        return r.states / seconds

    def run_tlc(rep: int) -> float:
        assert tools is not None
        r = tlc.run_tlc(cfg, tools, workers=1, timeout=600)
        if r.errors or not r.distinct_states:
            raise RuntimeError(f"TLC on {cfg.name}: {(r.errors or ['no statistics'])[0]}")
        states["tlc"] = r.distinct_states
        say(
            f"    TLC            {r.distinct_states:,} states in {r.seconds:.1f} s "
            f"(TLC's own clock {r.tlc_seconds} s)"
        )
        return r.distinct_states / r.seconds

    contenders: dict[str, Callable[[int], float]] = {"model": model}
    if tools is not None:
        contenders["tlc"] = run_tlc
    runs = interleave(contenders, sizes.tlc_repeats)
    med = {k: median(v) for k, v in runs.items()}
    out: dict[str, Any] = {
        "config": cfg.name,
        "states": states,
        "runs": runs,
        "median_states_per_s": med,
    }
    if tools is None:
        out["tlc_skipped"] = reason
        out["model_over_tlc"] = None
        say(f"  TLC skipped: {reason}")
    else:
        out["tlc_jar"] = tools.jar.describe()
        out["model_over_tlc"] = med["model"] / med["tlc"]
        say(
            f"  model {fmt(med['model'])} states/s, TLC {fmt(med['tlc'])} states/s "
            f"(wall clock, JVM start included); jar {tools.jar.describe()}"
        )
    return out


def bench_liveness(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Issue 21 point 6: the Python checker's liveness check (tla/MCLeaseFenceLive.cfg's
    constants: graph, SCCs, every property) beside its safety check on the CI bounds
    (tla/MCLeaseFence.cfg's: every invariant and step property), and TLC's liveness check of
    the same live config beside both; interleaved runs, medians of wall-clock seconds."""
    from leasefence import tlc
    from leasefence.model.check import explore
    from leasefence.model.livecheck import check_live
    from leasefence.tlc.agree import bounds_of_config
    from leasefence.tlc.liveagree import live_bounds_of_config

    safety_cfg, live_cfg = tlc.TLA_DIR / "MCLeaseFence.cfg", tlc.TLA_DIR / "MCLeaseFenceLive.cfg"
    safety, live = bounds_of_config(safety_cfg), live_bounds_of_config(live_cfg)
    if sizes.name == "tiny":  # one lease per item, no restart and no rollback: seconds
        text = live_cfg.read_text()
        for old, new in (("MaxAttempts = 2", "MaxAttempts = 1"), ("MaxRestarts = 1", "MaxRestarts = 0"), ("MaxRollbacks = 1", "MaxRollbacks = 0")):  # fmt: skip
            text = text.replace(old, new)
        live_cfg = where / "MCLeaseFenceLiveTiny.cfg"
        live_cfg.write_text(text)
        live = live_bounds_of_config(live_cfg)
        safety = live.base
    tools, reason = _tlc_tools()
    states: dict[str, int] = {}

    def safety_check(rep: int) -> float:
        start = time.perf_counter()
        r = explore(safety)
        seconds = time.perf_counter() - start
        states["safety"] = r.states
        say(f"    safety check (model)    {r.states:,} states in {seconds:.1f} s")
        return seconds

    def live_check(rep: int) -> float:
        start = time.perf_counter()
        r = check_live(live)
        seconds = time.perf_counter() - start
        if not r.ok:
            raise RuntimeError(f"the live check fails on {live_cfg.name}: {r.violated}")
        states["live"] = r.states
        say(f"    liveness check (model)  {r.states:,} states in {seconds:.1f} s")
        return seconds

    def tlc_live(rep: int) -> float:
        assert tools is not None
        r = tlc.run_tlc(live_cfg, tools, workers=1, timeout=1200)
        if r.errors or r.violated or not r.distinct_states:
            raise RuntimeError(f"TLC on {live_cfg.name}: {(r.errors or [str(r.violated)])[0]}")
        states["tlc_live"] = r.distinct_states
        say(f"    liveness check (TLC)    {r.distinct_states:,} states in {r.seconds:.1f} s")
        return r.seconds

    contenders: dict[str, Callable[[int], float]] = {"safety": safety_check, "live": live_check}
    if tools is not None:
        contenders["tlc_live"] = tlc_live
    runs = interleave(contenders, sizes.tlc_repeats)
    med = {k: median(v) for k, v in runs.items()}
    out: dict[str, Any] = {
        "safety_config": safety_cfg.name if sizes.name != "tiny" else live_cfg.name,
        "live_config": live_cfg.name,
        "states": states,
        "runs_seconds": runs,
        "median_seconds": med,
        "live_over_safety": med["live"] / med["safety"],
    }
    say(
        f"  liveness / safety check (model): {fmt(out['live_over_safety'])}x "
        f"({med['live']:.1f} s / {med['safety']:.1f} s; goal <= 2x)"
    )
    if tools is None:
        out["tlc_skipped"] = reason
        out["tlc_over_model_live"] = None
        say(f"  TLC skipped: {reason}")
    else:
        out["tlc_over_model_live"] = med["tlc_live"] / med["live"]
        say(
            f"  TLC / model, liveness check: {fmt(out['tlc_over_model_live'])}x "
            f"({med['tlc_live']:.1f} s / {med['live']:.1f} s, JVM start included)"
        )
    return out


def bench_conformance(sizes: Sizes, say: Callable[[str], None]) -> dict[str, Any]:
    """Steps per second of each Hypothesis state machine (fixed seed, no database)."""
    try:
        from hypothesis import HealthCheck, settings
        from hypothesis.stateful import run_state_machine_as_test

        from leasefence.conformance import machines
        from leasefence.conformance.coverage import COVERAGE
    except Exception as exc:  # the machines are being written: skip, saying why
        say(f"  conformance skipped: {type(exc).__name__}: {exc}")
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    rows = {}
    for name, cls in machines.MACHINES.items():
        before = COVERAGE.steps(name)
        cfg = settings(
            max_examples=sizes.conformance_examples,
            stateful_step_count=30,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        quiet = logging.getLogger("leasefence")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # the machines inject faults the master logs
        try:
            start = time.perf_counter()
            run_state_machine_as_test(cls, settings=cfg)
            seconds = time.perf_counter() - start
        finally:
            quiet.setLevel(level)
        steps = COVERAGE.steps(name) - before
        rows[cls.__name__] = {"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}
        say(
            f"    {cls.__name__:<24} {steps:>6,} steps in {seconds:5.1f} s: {fmt(steps / seconds)} steps/s"
        )
    return {"machines": rows}


def bench_verification(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Both parts run even when one fails; a failure is listed under ``errors`` (and reported
    as an error of the run)."""
    out: dict[str, Any] = {"errors": []}
    parts: dict[str, Callable[[], dict[str, Any]]] = {
        "model_vs_tlc": lambda: bench_model_vs_tlc(sizes, where, say),
        "liveness": lambda: bench_liveness(sizes, where, say),
        "conformance": lambda: bench_conformance(sizes, say),
    }
    for name, part in parts.items():
        try:
            out[name] = part()
        except Exception as exc:
            out["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
            say(f"  ERROR {name}: {type(exc).__name__}: {exc}")
    return out
