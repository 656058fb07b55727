"""The benchmarks' goals: each figure beside the bound it should meet (printed, never enforced), and the figures that explain them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from leasefence.harness.bench.common import fmt


@dataclass
class Goal:
    """One goal: a figure, the bound it must meet, and the verdict: ``PASS``/``MISS``, ``SKIP``
    when its benchmark was not run, ``ERROR`` when it was and failed (its error is printed after
    the table)."""

    name: str
    figure: str  # what the value is, e.g. "journal/SQLite pairs per second"
    value: float | None
    op: str  # ">=" or "<="
    bound: float
    unit: str = "x"
    note: str = ""
    bench: str = ""  # the benchmark whose result holds the figure
    failed: bool = False  # that benchmark raised

    @property
    def status(self) -> str:
        if self.value is None:
            return "ERROR" if self.failed else "SKIP"
        ok = self.value >= self.bound if self.op == ">=" else self.value <= self.bound
        return "PASS" if ok else "MISS"

    def line(self) -> str:
        shown = "-" if self.value is None else fmt(self.value) + self.unit
        want = f"{self.op} {fmt(self.bound)}{self.unit}"
        tail = f"  ({self.note})" if self.note else ""
        return f"  {self.status:<4}  {self.name:<44} {shown:>12}   goal {want}{tail}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


def goals(results: dict[str, Any]) -> list[Goal]:
    """The issue's goals, each with the figure this run measured (None: not measured)."""

    def get(*path: str) -> float | None:
        node: Any = results
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, int | float) else None

    active = int(get("recovery", "active_leases") or 10_000)
    return [
        Goal("journal / SQLite, per-call sync", "pairs/s, both durable", get("journal", "per_call", "journal_over_sqlite"), ">=", 1.0, bench="journal"),
        Goal("journal / SQLite, group commit", "pairs/s, group vs one transaction", get("journal", "group", "journal_over_sqlite"), ">=", 1.0, bench="journal"),
        Goal("journal / fdatasync limit, per-call sync", "pairs/s vs 2 syncs per pair", get("journal", "per_call", "journal_over_limit"), ">=", 0.8, bench="journal"),
        Goal("journal / fdatasync limit, group commit", "pairs/s vs 1 sync per group", get("journal", "group", "journal_over_limit"), ">=", 0.8, bench="journal"),
        Goal("replay, a record a line (longest journal)", "records/s", get("recovery", "replayed_per_s"), ">=", 500_000, unit="/s", note="stamps T0 + i", bench="recovery"),
        Goal("replay, as a run writes (longest journal)", "records/s", get("recovery", "batched_replayed_per_s"), ">=", 500_000, unit="/s", note="batch lines of 32, stamps to 10 us", bench="recovery"),
        Goal("scale: items/s, largest run / smallest", "in-process master, memory journal", get("scale", "largest_over_smallest_items_per_s"), ">=", 0.8, bench="scale"),
        Goal(f"open compacted journal, {active:,} active leases", "milliseconds", None if get("recovery", "active_open_s") is None else 1e3 * (get("recovery", "active_open_s") or 0.0), "<=", 50, unit=" ms", bench="recovery"),
        Goal("master as run (memory journal) / bare, time per rt", "bare blocking recv loop", get("dispatch", "run_over_bare_time"), "<=", 2.0, note="master-run: the run's defaults", bench="dispatch"),
        Goal("master as run, compiled / bare, time per rt", "make compile: every rank compiled", get("dispatch", "run_compiled_over_bare_time"), "<=", 2.0, note="master-run-compiled", bench="dispatch"),
        Goal("durable master, group commit / MPIPoolExecutor", "round trips/s", get("dispatch", "group_over_pool"), ">=", 1.0, bench="dispatch"),
        *job_goals(results),
        Goal("model checker / TLC states per second", "same bounds, wall clock", get("verification", "model_vs_tlc", "model_over_tlc"), ">=", 0.5, bench="verification"),
        Goal("liveness / safety check time (model)", "live vs CI config, wall clock", get("verification", "liveness", "live_over_safety"), "<=", 2.0, bench="verification"),
        # issue 18: 20,000 steps/s at 2,000 items, a 10^5-item trace in under a minute, linear
        Goal("trace check, 2,000-item run, compiled", "steps per CPU second", get("trace", "whole_command", "compiled_steps_per_s"), ">=", 20_000, unit="/s", note="the whole command, compiled", bench="trace"),
        Goal("trace check, 2,000-item run, interpreted", "steps per CPU second", get("trace", "whole_command", "interpreted_steps_per_s"), ">=", 20_000, unit="/s", note="the whole command", bench="trace"),
        Goal("trace check, 2,000-item run, in process", "steps per CPU second", get("trace", "steps_per_s", "2000"), ">=", 20_000, unit="/s", note="validate, interpreted", bench="trace"),
        Goal("trace check, 100,000-item run", "CPU seconds", get("trace", "sizes", "100000", "cpu_s"), "<=", 60, unit=" s", bench="trace"),
        Goal("trace check, step cost largest / smallest run", "CPU per step", get("trace", "step_cost_growth"), "<=", 1.5, bench="trace"),
    ]  # fmt: skip


#: The whole jobs of issue 19's goal, in tasks: their goals are listed (SKIP) when ``jobs`` did
#: not run, and the sizes it ran are listed instead when it did.
JOB_GOAL_SIZES = (2_000, 20_000)


def job_goals(results: dict[str, Any]) -> list[Goal]:
    """A goal per whole-job size: MPIPoolExecutor's time over ``leasefence run``'s (``jobs``)."""
    jobs = results.get("jobs")
    rows = jobs.get("sizes", {}) if isinstance(jobs, dict) else {}
    ranks = f", -n {jobs['ranks']}" if isinstance(jobs, dict) and "ranks" in jobs else ""
    sizes = [int(n) for n in rows] or list(JOB_GOAL_SIZES)
    return [
        Goal(
            f"whole job, {n:,} tasks: MPIPoolExecutor / run",
            "wall time, start-up included",
            rows[str(n)]["pool_over_run"] if str(n) in rows else None,
            ">=",
            1.0,
            note=f"durable leasefence run{ranks}",
            bench="jobs",
        )
        for n in sizes
    ]


def other_figures(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Ratios that explain the goals' figures (no goal of their own)."""
    lines: list[tuple[str, str]] = []
    d = results.get("dispatch")
    if isinstance(d, dict):
        med = d["median_round_trips_per_s"]
        lines += [
            ("master as run (memory journal) / bare loop as deep, time per rt", fmt(d["run_over_bare_deep_time"]) + "x"),
            ("the goal's factor 1: master as run / bare-transport (its decisions), time per rt", fmt(d["run_over_transport_time"]) + "x"),
            ("the goal's factor 2: bare-transport / bare (MPI path in Python, wire, workers)", fmt(d["transport_over_bare_time"]) + "x"),
            ("master at depth 1, rank fence (memory journal) / bare loop, time per rt", fmt(d["memory_over_bare_time"]) + "x"),
            ("master at depth 1 (memory journal) / bare-poll loop, time per rt", fmt(d["memory_over_bare_poll_time"]) + "x"),
            ("bare blocking loop / bare Improbe+sleep loop, rt/s", fmt(med["bare"] / med["bare-poll"]) + "x"),
            ("durable master, group commit / per-call sync, rt/s", fmt(d["group_over_always"]) + "x"),
            ("durable master, per-call sync / MPIPoolExecutor, rt/s", fmt(d["always_over_pool"]) + "x"),
            ("depth 2 / depth 1 (memory journal, generation fence), rt/s", fmt(d["depth2_over_depth1"]) + "x"),
            ("generation / rank fence at depth 1, memory journal, rt/s", fmt(d["generation_over_rank_fence"]) + "x"),
        ]  # fmt: skip
    v = results.get("verification")
    if isinstance(v, dict):
        for name, row in v.get("conformance", {}).get("machines", {}).items():
            lines.append((f"conformance {name}, steps/s", fmt(row["steps_per_s"])))
    return lines
