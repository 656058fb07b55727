"""The MPI benchmarks at their tiny sizes: every dispatch contender's ``mpiexec -n 3`` job runs and
reports a rate (no figure is checked; the machine is shared and noisy), the depth-2 contender
really ran at depth 2, and the whole jobs of ``jobs`` run and are compared."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path

import pytest

from leasefence.harness.bench.common import Sizes
from leasefence.harness.bench.dispatch import DISPATCH
from leasefence.harness.bench.goals import other_figures
from leasefence.harness.bench.runner import run

pytestmark = pytest.mark.mpi


def test_every_dispatch_contender_runs_under_mpiexec_and_reports_a_rate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A cache without a build: the compiled twin is left out, saying so (tests/unit/
    # test_compiled.py runs it against a build).
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    out = io.StringIO()
    report = run(Sizes.named("tiny"), ("dispatch",), directory=tmp_path, out=out)
    assert report.errors == [], out.getvalue()
    figures = report.results["dispatch"]
    assert set(figures["median_round_trips_per_s"]) == set(DISPATCH)
    assert "no compiled dispatcher for these sources: master-run-compiled not run" in out.getvalue()
    assert "run_compiled_over_bare_time" not in figures
    assert all(rate > 0 for rate in figures["median_round_trips_per_s"].values())
    statuses = {g.name: g.status for g in report.goals if "master" in g.name}
    compiled = statuses.pop("master as run, compiled / bare, time per rt")
    assert compiled == "SKIP"  # no build: not measured, and said so
    assert set(statuses.values()) <= {"PASS", "MISS"}

    # issue 12: depth 2 against depth 1 is a measured ratio, printed and in the JSON report
    ratio = report.to_json()["results"]["dispatch"]["depth2_over_depth1"]
    assert isinstance(ratio, float)
    assert math.isfinite(ratio)
    assert ratio > 0
    assert "depth 2 / depth 1 throughput:" in out.getvalue()
    assert any(label.startswith("depth 2 / depth 1") for label, _ in other_figures(report.results))
    # ... of a pipeline that really was two deep (a silent fallback to depth 1 fails here),
    # against a partner that really was one deep
    assert figures["max_in_flight_per_rank"]["master-depth2"] == 2
    assert figures["mean_in_flight_per_rank"]["master-depth2"] > 1.0
    assert figures["max_in_flight_per_rank"]["master-depth1"] == 1
    # the goal's contender runs as ``leasefence run`` does: deeper than 2 once its gaps are known
    # (a contender left at a fixed depth 1 or 2 fails here), beside a bare loop as deep
    assert figures["goal_master"] == "master-run"
    assert figures["max_in_flight_per_rank"]["master-run"] > 2
    assert figures["run_over_bare_time"] > 0
    assert figures["run_over_bare_deep_time"] > 0
    # the goal's ratio in its two factors, the master's decisions and the loop without them
    # (bare-transport), each with what a round trip costs rank 0 and the workers in CPU
    assert figures["run_over_transport_time"] > 0
    assert figures["transport_over_bare_time"] > 0
    cpu = figures["cpu_us_per_round_trip"]
    assert set(cpu) >= {"master-run", "bare-transport", "master-group"}
    assert all(side > 0 for sides in cpu.values() for side in sides.values())
    assert "what a round trip costs: master-run" in out.getvalue()


def test_whole_jobs_run_leasefence_and_the_pool_side_by_side_and_report_their_ratio(
    tmp_path: Path,
) -> None:
    """``jobs`` at its tiny size: each contender a whole ``mpiexec`` job, timed from outside,
    the run's journal holding every item completed (``completed_in_journal``: else an error),
    and a goal per size with the pool's time over the run's."""
    out = io.StringIO()
    sizes = dataclasses.replace(Sizes.named("tiny"), job_ranks=3)
    report = run(sizes, ("jobs",), directory=tmp_path, out=out)
    assert report.errors == [], out.getvalue()
    figures = report.results["jobs"]
    assert figures["ranks"] == 3
    assert figures["engine"] in {"compiled", "interpreted"}  # what `leasefence run` said it ran
    (row,) = figures["sizes"].values()
    assert row["run_s"] > 0
    assert row["pool_s"] > 0
    assert row["pool_over_run"] == row["pool_s"] / row["run_s"]
    assert set(figures["runs"]) == {"run-40", "pool-40"}
    (goal,) = [g for g in report.goals if g.bench == "jobs"]
    assert goal.name == "whole job, 40 tasks: MPIPoolExecutor / run"
    assert goal.value == row["pool_over_run"]
    assert goal.status in {"PASS", "MISS"}
    assert "-n 3" in goal.note
