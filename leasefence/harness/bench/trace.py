"""Benchmark of ``leasefence trace check``: replayed steps per second against the run's size.

A run of N work items is synthesized with the master's own ``TraceWriter`` as ``leasefence run
--worker trivial`` makes it by default: two ranks, two work IDs per state task, the run's
pipeline depth (``RunConfig.pipeline``, 64) under generation fencing (each rank holds up to that
many dispatches, each with its own ``[epoch, counter]``), pending work taken in catalogue order with a variant passed over while its task is
leased, each rank's results back in the order of its dispatches (about 2 lines per item). It is
then validated in process; the figure is steps per CPU second (the best of ``REPEATS``
validations up to ``REPEATED_UP_TO`` items). Linear validation keeps it flat
as N grows (issue 18). The process's peak resident memory after each size shows how memory
grows with N.
"""

from __future__ import annotations

import hashlib
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import Say, Sizes
from leasefence.impl.mpirun import RunConfig

#: Items per synthesized run, by benchmark size name (``tiny`` is for the tests).
ITEMS: dict[str, tuple[int, ...]] = {
    "tiny": (100, 2_000),
    # 2,000: the size issue 18 sets its goal at (the trace of a real run of that size)
    "default": (1_000, 2_000, 10_000, 100_000),
    "full": (1_000, 2_000, 10_000, 100_000),
}


def _id(kind: str, n: int) -> str:
    return hashlib.sha256(f"{kind}{n}".encode()).hexdigest()


#: The run's defaults that shape its trace: ranks, pipeline depth (``RunConfig.pipeline``).
RANKS, DEPTH = (1, 2), RunConfig.pipeline
#: A run of at most ``REPEATED_UP_TO`` items is validated ``REPEATS`` times and the best CPU time
#: is its figure (the median printed beside it): one validation of 2,000 items takes ~0.2 s, and
#: on a shared machine one such sample moved between 14,000 and 23,000 steps/s from run to run.
REPEATS, REPEATED_UP_TO = 5, 10_000


def synthesize(path: Path, items: int) -> int:
    """Write the trace of a correct run of ``items`` work items to ``path``; returns its lines."""
    from collections import deque

    from leasefence.impl.master import ResultOutcome
    from leasefence.impl.trace import TraceWriter

    works = [_id("w", i) for i in range(items)]
    task_of = {w: _id("s", i // 2) for i, w in enumerate(works)}
    pending = deque(works)
    leased: set[str] = set()
    held: dict[int, deque[tuple[str, tuple[int, int]]]] = {r: deque() for r in RANKS}
    counter = dict.fromkeys(RANKS, 0)
    now, lines = 1_767_225_600.0, 1
    path.unlink(missing_ok=True)  # the writer appends, as a restarted master does
    with TraceWriter(
        path, ttl=30.0, ranks=RANKS, task_of=task_of, pipeline=DEPTH, fence="generation"
    ) as tw:

        def dispatch(r: int) -> None:
            nonlocal now, lines
            while len(held[r]) < DEPTH:
                w = next((x for x in pending if task_of[x] not in leased), None)
                if w is None:
                    return
                pending.remove(w)
                leased.add(task_of[w])
                counter[r] += 1
                gen = (1, counter[r])
                now += 0.0005
                tw.dispatch_work(w, r, now, True, None, gen)
                held[r].append((w, gen))
                lines += 1

        for r in RANKS:
            dispatch(r)
        while any(held.values()):
            for r in RANKS:
                if held[r]:
                    w, gen = held[r].popleft()
                    now += 0.0005
                    outcome = ResultOutcome(False, task_of[w], False, True, True)
                    tw.deliver_result(r, w, task_of[w], True, now, outcome, gen)
                    leased.discard(task_of[w])
                    lines += 1
                dispatch(r)
    return lines


def _peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (sizes run in increasing order, so
    after each size it is that size's peak unless an earlier benchmark of the run went higher)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 2**10


def bench_trace(sizes: Sizes, where: Path, say: Say) -> dict[str, Any]:
    """Steps per second of ``trace check`` at each size of ``ITEMS[sizes.name]``, and the
    per-step cost at the largest size over that at the smallest (1.0: linear)."""
    from leasefence.conformance.tracecheck import validate

    counts: Sequence[int] = ITEMS.get(sizes.name, ITEMS["default"])
    rows: dict[str, dict[str, float]] = {}
    for items in counts:
        path = where / f"trace-{items}.ndjson"
        lines = synthesize(path, items)
        times: list[float] = []
        for _ in range(REPEATS if items <= REPEATED_UP_TO else 1):
            with path.open(encoding="utf-8") as fh:
                start = time.process_time()
                report = validate(fh)
                times.append(time.process_time() - start)
            if not report.ok:
                raise RuntimeError(
                    f"synthesized trace of {items} items diverges: "
                    f"{(report.divergence or '')[:300]}"
                )
        seconds, median = min(times), statistics.median(times)
        peak = _peak_rss_mb()
        rows[str(items)] = {
            "lines": lines,
            "steps": report.steps,
            "cpu_s": seconds,
            "cpu_s_median": median,
            "runs": len(times),
            "steps_per_s": report.steps / seconds,
            "peak_rss_mb": peak,
        }
        spread = (
            f" (median {report.steps / median:,.0f}, {len(times)} runs)" if len(times) > 1 else ""
        )
        say(
            f"    {items:>9,} items  {lines:>9,} lines  {seconds:7.2f} CPU s  "
            f"{report.steps / seconds:>9,.0f} steps/s{spread}  peak RSS {peak:,.0f} MB"
        )
    if WHOLE_AT in counts:
        whole = whole_command(where / f"trace-{WHOLE_AT}.ndjson", rows[str(WHOLE_AT)]["steps"], say)
    else:
        whole = {}
    first, last = rows[str(counts[0])], rows[str(counts[-1])]
    growth = (last["cpu_s"] / last["steps"]) / (first["cpu_s"] / first["steps"])
    say(f"  per-step cost at {counts[-1]:,} items / at {counts[0]:,}: {growth:.2f}x")
    return {
        "sizes": rows,
        "steps_per_s": {k: v["steps_per_s"] for k, v in rows.items()},
        "largest_steps_per_s": last["steps_per_s"],
        "step_cost_growth": growth,
        "whole_command": whole,
    }


#: The size whose trace is also checked by the whole command, start-up included (issue 18 counts
#: the CPU seconds of ``leasefence trace check``).
WHOLE_AT = 2_000


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def whole_command(path: Path, steps: float, say: Say) -> dict[str, Any]:
    """Steps per CPU second of the whole ``leasefence trace check`` of ``path`` (start-up,
    imports and output included), the interpreted and the compiled validator alternately, best
    of ``REPEATS`` each. The compiled one is built first if there is none for these sources
    (``leasefence trace compile``, about a minute once); where it cannot be, the row says why."""
    from leasefence.harness.compiled import ENGINE_ENV, CompileError, compile_validator

    engines = ["interpreted", "compiled"]
    out: dict[str, Any] = {}
    try:
        compile_validator(say=lambda line: say(f"    {line}"))
    except CompileError as exc:
        say(f"    no compiled validator here: {exc}")
        out["compiled_error"] = str(exc)
        engines.remove("compiled")
    cpu: dict[str, list[float]] = {e: [] for e in engines}
    env = dict(os.environ)
    env.pop(ENGINE_ENV, None)  # --engine decides
    for _ in range(REPEATS):
        for engine in engines:
            before = _child_cpu()
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "leasefence",
                    "trace",
                    "check",
                    "--engine",
                    engine,
                    str(path),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
                env=env,
            )
            cpu[engine].append(_child_cpu() - before)
    for engine, times in cpu.items():
        best = min(times)
        out[f"{engine}_cpu_s"] = best
        out[f"{engine}_steps_per_s"] = steps / best
        say(
            f"    whole `trace check` of {WHOLE_AT:,} items, {engine:<11}  {best:5.2f} CPU s  "
            f"{steps / best:>9,.0f} steps/s (best of {len(times)}, median "
            f"{steps / statistics.median(times):,.0f})"
        )
    if "compiled" in cpu:
        out["compiled_over_interpreted"] = out["interpreted_cpu_s"] / out["compiled_cpu_s"]
        ratio = out["compiled_over_interpreted"]
        say(f"    compiled / interpreted, steps per CPU second: {ratio:.2f}x")
    return out
