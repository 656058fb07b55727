"""The dispatch benchmark at its tiny size: every contender's ``mpiexec -n 3`` job runs and reports
a rate (no figure is checked; the machine is shared and noisy)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from leasefence.bench import DISPATCH, Sizes, run

pytestmark = pytest.mark.mpi


def test_every_dispatch_contender_runs_under_mpiexec_and_reports_a_rate(tmp_path: Path) -> None:
    out = io.StringIO()
    report = run(Sizes.named("tiny"), ("dispatch",), directory=tmp_path, out=out)
    assert report.errors == [], out.getvalue()
    figures = report.results["dispatch"]
    assert set(figures["median_round_trips_per_s"]) == set(DISPATCH)
    assert all(rate > 0 for rate in figures["median_round_trips_per_s"].values())
    statuses = {g.name: g.status for g in report.goals if "master" in g.name}
    assert set(statuses.values()) <= {"PASS", "MISS"}
