"""What a campaign measured: per build (faults fired, recovery latencies, solver CPU, coverage
over time, its history) and across builds (coverage AUC, the gates F314 and the others pass)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from leasefence.harness.campaign.ledger import History
from leasefence.harness.campaign.schedule import IN_JOB_RESTART, CampaignConfig, Fault


@dataclass
class FiredFault:
    """A fault as it was fired: real seconds since the build's start, kind and detail."""

    t: float
    kind: str
    detail: str = ""


@dataclass
class BuildRun:
    """Everything measured for one build."""

    build: str
    work: int
    seconds: float = 0.0
    jobs: int = 0
    finished: bool = False
    fired: list[FiredFault] = field(default_factory=list)
    fault_counts: dict[str, int] = field(default_factory=dict)
    unexpected_exits: list[str] = field(default_factory=list)
    #: Items neither completed nor given up when the run ended (the run's "end" event).
    unsettled: int = 0
    recovery_latencies: list[float] = field(default_factory=list)
    solver_cpu_s: float = 0.0
    wasted_cpu_s: float = 0.0
    coverage: list[tuple[float, int]] = field(default_factory=list)
    targets: int = 0
    history: History = field(default_factory=History)

    def latency(self, q: float) -> float | None:
        return percentile(self.recovery_latencies, q)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of ``values``, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def coverage_auc(curve: Sequence[tuple[float, int]], window: float, targets: int) -> float:
    """Normalised area under a step curve of (seconds, targets reached) over [0, window]."""
    if window <= 0 or targets <= 0:
        return 0.0
    area, last_t, last_v = 0.0, 0.0, 0
    for t, v in curve:
        t = min(max(t, 0.0), window)
        area += (t - last_t) * last_v
        last_t, last_v = t, v
    area += (window - last_t) * last_v
    return area / (window * targets)


@dataclass
class CampaignResult:
    config: CampaignConfig
    faults: tuple[Fault, ...]
    runs: dict[str, BuildRun]
    seconds: float = 0.0
    window: float = 0.0
    targets: int = 0

    def auc(self, build: str) -> float:
        """Area under the coverage curve (targets reached over real time) over the common
        window, divided by the window times the targets either build reached: 1.0 would be
        every target at once."""
        return coverage_auc(self.runs[build].coverage, self.window, self.targets)

    def f314_ok(self) -> bool:
        """F314's invariants held, every item completed once (none left neither completed nor
        given up at the end), and every fault was injected;
        beyond depth 1 also results across generations (duplicated, late or reordered past
        their generation's lease) arrived, each refused."""
        run = self.runs.get("f314")
        crossed = self.config.pipeline == 1 or (
            run is not None
            and run.history.cross_generation_results > 0
            and run.history.cross_generation_accepted == 0
        )
        return (
            run is not None
            and run.finished
            and run.unsettled == 0
            and run.history.ok
            and crossed
            and all(run.fault_counts.get(k, 0) > 0 for k in self.expected_faults())
        )

    def expected_faults(self) -> list[str]:
        kinds = sorted({f.kind for f in self.faults})
        extra = ["late", "dup", "reorder", "wrong-id", "duplicate-candidates", "compaction"]
        if any(k in ("kill", "reboot") for k in kinds):
            extra.append("torn-tail")
        if self.config.in_job_restart_every:
            extra.append(IN_JOB_RESTART)
        return kinds + extra

    def prefix_damaged(self) -> bool:
        run = self.runs.get("pre-fix")
        return run is not None and run.history.damage

    def rank_fence_damaged(self) -> bool:
        """The rank-fenced build shows duplicates or wrong-owner commits, or its trace breaks
        an invariant (tracecheck: a step the model allows that breaks L2, say)."""
        run = self.runs.get("rank-fence")
        return run is not None and (run.history.damage or run.history.trace_breaks is not None)


def measure(run: BuildRun, logged: Iterable[Mapping[str, Any]], start: float) -> None:
    """Solver CPU (each execution once; a duplicated message is not a second execution), CPU
    wasted on executions whose result was refused, and the coverage curve, from the build's
    event log (``start``: the build's start, Unix seconds)."""
    execs: dict[tuple[int, str, float], bool] = {}
    job = 0
    seen: set[str] = set()
    for ev in logged:
        kind = ev.get("kind")
        if kind == "start":
            job += 1
        elif kind == "result":
            key = (job, str(ev.get("w")), float(ev.get("cpu_s", 0.0)))
            accepted = not ev.get("stale") and bool(ev.get("work_ok"))
            execs[key] = execs.get(key, False) or accepted
            target = ev.get("reached")
            if target and target not in seen:
                seen.add(str(target))
                run.coverage.append((round(float(ev["t"]) - start, 3), len(seen)))
    run.solver_cpu_s = sum(k[2] for k in execs)
    run.wasted_cpu_s = sum(k[2] for k, ok in execs.items() if not ok)
    run.targets = len(seen)
