"""The crash harness's row of ``leasefence verify``."""

from __future__ import annotations

from leasefence.harness.crash.runner import QUICK_POINTS, QUICK_SIZE, run
from leasefence.report import FAIL, PASS, Row


def layer_crashcheck(deep: bool) -> list[Row]:
    """The ``crashcheck`` row of ``leasefence verify``: the quick run, or with ``--deep`` the
    default one (at least 10,000 crash points)."""
    if deep:
        report = run()
        ran = f"crashcheck (seed {report.seed}, {len(report.workloads)} workloads)"
    else:
        report = run(points=QUICK_POINTS, size=QUICK_SIZE, kill_rounds=1)
        ran = f"crashcheck --quick (seed {report.seed}; --deep: 10,000+ points)"
    figures = (
        f"{report.points:,} crash points ({report.kill_points:,} SIGKILL, "
        f"{report.power_points:,} power loss; distinct states "
        + ", ".join(f"{name} {m.states:,}" for name, m in report.models.items())
        + f"), {report.acked_checked:,} acked ops checked, "
        f"{report.lost} lost, {report.invariant_violations} invariant violations"
    )
    return [
        Row(
            "crashcheck",
            ran,
            figures,
            FAIL if report.violations else PASS,
            report.seconds,
            "\n".join(str(v) for v in report.violations),
        )
    ]
