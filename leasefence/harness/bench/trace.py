"""Benchmark of ``leasefence trace check``: replayed steps per second against the run's size.

A run of N work items is synthesized with the master's own ``TraceWriter`` (two ranks, two work
IDs per state task, the second dispatch of a pair refused while the first holds the task, as in
``leasefence run --worker trivial``: about 2.5 lines per item), then validated in process; the
figure is steps per CPU second. Linear validation keeps it flat as N grows (issue 18). The
process's peak resident memory after each size shows how memory grows with N.
"""

from __future__ import annotations

import hashlib
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import Say, Sizes

#: Items per synthesized run, by benchmark size name (``tiny`` is for the tests).
ITEMS: dict[str, tuple[int, ...]] = {
    "tiny": (100, 1_000),
    "default": (1_000, 10_000, 100_000),
    "full": (1_000, 10_000, 100_000),
}


def _id(kind: str, n: int) -> str:
    return hashlib.sha256(f"{kind}{n}".encode()).hexdigest()


def synthesize(path: Path, items: int) -> int:
    """Write the trace of a correct run of ``items`` work items to ``path``; returns its lines."""
    from leasefence.impl.master import ResultOutcome
    from leasefence.impl.trace import TraceWriter

    works = [_id("w", i) for i in range(items)]
    task_of = {w: _id("s", i // 2) for i, w in enumerate(works)}
    now, lines = 1_767_225_600.0, 1
    path.unlink(missing_ok=True)  # the writer appends, as a restarted master does
    with TraceWriter(path, ttl=30.0, ranks=(1, 2), task_of=task_of) as tw:

        def deliver(r: int, w: str) -> None:
            outcome = ResultOutcome(False, task_of[w], False, True, True)
            tw.deliver_result(r, w, task_of[w], True, now, outcome)

        for first in range(0, items, 2):
            pair = works[first : first + 2]
            now += 0.001
            tw.dispatch_work(pair[0], 1, now, True, None)
            if len(pair) == 2:
                tw.dispatch_work(pair[1], 2, now, False, "lease_state")
            deliver(1, pair[0])
            lines += 2 + (len(pair) == 2)
            if len(pair) == 2:
                now += 0.001
                tw.dispatch_work(pair[1], 2, now, True, None)
                deliver(2, pair[1])
                lines += 2
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
        with path.open(encoding="utf-8") as fh:
            start = time.process_time()
            report = validate(fh)
            seconds = time.process_time() - start
        if not report.ok:
            raise RuntimeError(
                f"synthesized trace of {items} items diverges: {(report.divergence or '')[:300]}"
            )
        peak = _peak_rss_mb()
        rows[str(items)] = {
            "lines": lines,
            "steps": report.steps,
            "cpu_s": seconds,
            "steps_per_s": report.steps / seconds,
            "peak_rss_mb": peak,
        }
        say(
            f"    {items:>9,} items  {lines:>9,} lines  {seconds:7.2f} CPU s  "
            f"{report.steps / seconds:>9,.0f} steps/s  peak RSS {peak:,.0f} MB"
        )
    first, last = rows[str(counts[0])], rows[str(counts[-1])]
    growth = (last["cpu_s"] / last["steps"]) / (first["cpu_s"] / first["steps"])
    say(f"  per-step cost at {counts[-1]:,} items / at {counts[0]:,}: {growth:.2f}x")
    return {
        "sizes": rows,
        "steps_per_s": {k: v["steps_per_s"] for k, v in rows.items()},
        "largest_steps_per_s": last["steps_per_s"],
        "step_cost_growth": growth,
    }
