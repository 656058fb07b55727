"""``leasefence bench``: run the chosen benchmarks into one report, and print the goals."""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from leasefence.harness.bench.common import (
    Say,
    Sizes,
    bytecode_note,
    machine,
    package_folders,
    uncached_count,
)
from leasefence.harness.bench.dispatch import bench_dispatch
from leasefence.harness.bench.goals import Goal, goals, other_figures
from leasefence.harness.bench.jobs import bench_jobs
from leasefence.harness.bench.journal import bench_journal
from leasefence.harness.bench.recovery import bench_recovery
from leasefence.harness.bench.scale import bench_scale
from leasefence.harness.bench.trace import bench_trace
from leasefence.harness.bench.verification import bench_verification

BENCHMARKS = ("journal", "recovery", "scale", "dispatch", "jobs", "verification", "trace")
SCHEMA = 1


@dataclass
class Report:
    """Everything one ``leasefence bench`` run measured."""

    sizes: Sizes
    results: dict[str, Any] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "command": "leasefence bench"
            + ("" if self.sizes.name == "default" else " --" + self.sizes.name),
            "sizes": asdict(self.sizes),
            "machine": machine(),
            "started": self.started,
            "seconds": self.seconds,
            "results": self.results,
            "goals": [g.to_json() for g in self.goals],
            "errors": self.errors,
        }


RUNNERS: dict[str, Callable[[Sizes, Path, Say], dict[str, Any]]] = {
    "journal": bench_journal,
    "recovery": bench_recovery,
    "scale": bench_scale,
    "dispatch": bench_dispatch,
    "jobs": bench_jobs,
    "verification": bench_verification,
    "trace": bench_trace,
}


@contextlib.contextmanager
def _workdir(base: Path | None) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="leasefence-bench-", dir=base) as tmp:
        yield Path(tmp)


def run(
    sizes: Sizes,
    only: Sequence[str] = BENCHMARKS,
    *,
    directory: Path | None = None,
    out: TextIO | None = None,
) -> Report:
    """Run the chosen benchmarks; errors are recorded in the report, not raised."""
    report = Report(sizes)
    start = time.perf_counter()

    def say(text: str) -> None:
        print(text, file=out or sys.stdout, flush=True)

    say(f"leasefence bench ({sizes.name} sizes): {', '.join(only)}")
    note = bytecode_note(uncached_count(package_folders(), not sys.flags.dont_write_bytecode))
    if note is not None:
        say(note)
    with _workdir(directory) as where:
        for name in only:
            say(f"[{time.perf_counter() - start:6.1f} s] {name}")
            sub = where / name
            sub.mkdir()
            try:
                report.results[name] = RUNNERS[name](sizes, sub, say)
                for error in report.results[name].get("errors", []):
                    report.errors.append(f"{name}: {error}")
            except Exception as exc:
                report.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                say(f"  ERROR {name}: {type(exc).__name__}: {exc}")
    report.seconds = time.perf_counter() - start
    report.goals = goals(report.results)
    failed = {error.split(":", 1)[0] for error in report.errors}
    for g in report.goals:
        g.failed = g.bench in failed
    say(f"[{report.seconds:6.1f} s] done. Ratios beside their goals (printed, not enforced):")
    for g in report.goals:
        say(g.line())
    for error in report.errors:
        say(f"  ERROR {error}")
    extra = other_figures(report.results)
    if extra:
        say("Other figures of this run (no goal):")
        for label, value in extra:
            say(f"        {label:<58} {value}")
    return report
