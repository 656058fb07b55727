"""The campaign's report: the table of figures per build (terminal and JSON) and the JSON
document of every figure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from leasefence.harness.campaign.ledger import History
from leasefence.harness.campaign.metrics import BuildRun, CampaignResult


def _fmt(x: float | None, unit: str = "") -> str:
    return "-" if x is None else f"{x:.2f}{unit}"


def table_rows(res: CampaignResult) -> list[tuple[str, list[str]]]:
    """(metric, one cell per build) for the terminal and the JSON."""
    builds = list(res.runs)

    def cells(fn: Callable[[BuildRun], object]) -> list[str]:
        return [str(fn(res.runs[b])) for b in builds]

    def yes(flag: bool) -> str:
        return "yes" if flag else "NO"

    rows: list[tuple[str, list[str]]] = [
        ("work items completed exactly once", cells(lambda r: yes(r.history.exactly_once))),
        ("duplicate completions", cells(lambda r: r.history.duplicate_completions)),
        ("wrong-owner commits", cells(lambda r: r.history.wrong_owner_commits)),
        (
            "double grants (work / state, L1)",
            cells(lambda r: f"{r.history.double_grants_work} / {r.history.double_grants_state}"),
        ),
        ("premature reclaims", cells(lambda r: r.history.premature_reclaims)),
        ("misattributed results (L7)", cells(lambda r: r.history.misattributed_results)),
        ("trace valid against the model", cells(_trace_cell)),
        ("duplicate dispatches", cells(lambda r: r.history.duplicate_dispatches)),
        (
            "concurrent dispatches, one state task",
            cells(lambda r: r.history.concurrent_state_dispatches),
        ),
        ("refused concurrent candidates", cells(lambda r: r.history.refused_candidates)),
        ("wrong-owner rejections", cells(lambda r: r.history.wrong_owner_rejections)),
        ("stale results refused", cells(lambda r: r.history.stale_results)),
        *(_pipeline_rows(res, cells) if res.config.pipeline != 1 else []),
        ("reclaimed leases", cells(lambda r: r.history.reclaimed_leases)),
        ("recovered work items", cells(lambda r: r.history.recovered_items)),
        (
            "recovery latency p50 / p95",
            cells(lambda r: f"{_fmt(r.latency(50), ' s')} / {_fmt(r.latency(95), ' s')}"),
        ),
        ("solver CPU total", cells(lambda r: f"{r.solver_cpu_s:.2f} s")),
        ("solver CPU wasted on duplicates", cells(lambda r: f"{r.wasted_cpu_s:.2f} s")),
        ("targets reached", cells(lambda r: r.targets)),
        ("coverage AUC", [f"{res.auc(b):.3f}" for b in builds]),
        ("wall time", cells(lambda r: f"{r.seconds:.1f} s ({r.jobs} jobs)")),
    ]
    for kind in res.expected_faults():
        rows.append(
            (f"fault: {kind}", [str(res.runs[b].fault_counts.get(kind, 0)) for b in builds])
        )
    rows.append(("clock rollbacks seen in the trace", cells(lambda r: r.history.rollbacks)))
    return rows


def _pipeline_rows(
    res: CampaignResult, cells: Callable[[Callable[[BuildRun], object]], list[str]]
) -> list[tuple[str, list[str]]]:
    """The rows beyond depth 1: results across generations (only a trace whose results present
    generations can tell them apart; a rank-fenced one shows "-"), re-dispatches to a rank
    still running that work, and accepted results the rank alone cannot attribute."""

    def gen(fn: Callable[[History], object]) -> Callable[[BuildRun], object]:
        return lambda r: fn(r.history) if r.history.fence == "generation" else "-"

    return [
        (
            "pipeline depth (deepest reached) / fence",
            cells(lambda r: f"{r.history.pipeline} ({r.history.deepest}) / {r.history.fence}"),
        ),
        (
            "cross-generation results refused / accepted",
            cells(gen(lambda h: f"{h.cross_generation_refused} / {h.cross_generation_accepted}")),
        ),
        (
            "of them superseded by a newer dispatch (same rank)",
            cells(gen(lambda h: f"{h.superseded_results} ({h.superseded_same_rank})")),
        ),
        (
            "re-dispatches to a rank still running that work",
            cells(lambda r: r.history.same_rank_redispatches),
        ),
        (
            "accepted results the rank alone cannot attribute",
            cells(lambda r: r.history.ambiguous_commits),
        ),
        (
            "results across an in-job restart (refused)",
            cells(
                lambda r: (
                    f"{r.history.restart_crossing_results} ({r.history.restart_crossing_refused})"
                )
            ),
        ),
    ]


def _trace_cell(r: BuildRun) -> str:
    h = r.history
    if h.trace_valid:
        return "yes"
    if h.trace_breaks is not None:
        return f"NO (breaks {h.trace_breaks})"
    if h.trace_ok:
        n = len(h.interrupted_rejections)
        return f"per job; {n} restart(s) after a kill mid-rejection"
    return "NO (diverges)"


def format_table(res: CampaignResult) -> str:
    head = ["metric", *res.runs]
    body = [[name, *vals] for name, vals in table_rows(res)]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    fmt = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    lines = [fmt.format(*head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt.format(*row) for row in body]
    return "\n".join(lines)


def to_json(res: CampaignResult) -> dict[str, Any]:
    return {
        "config": asdict(res.config) | {"work_items": res.config.work_items},
        "schedule": [asdict(f) for f in res.faults],
        "seconds": round(res.seconds, 2),
        "coverage_window_s": round(res.window, 3),
        "coverage_targets": res.targets,
        "f314_ok": res.f314_ok(),
        "prefix_damaged": res.prefix_damaged(),
        **({"rank_fence_damaged": res.rank_fence_damaged()} if "rank-fence" in res.runs else {}),
        "table": {name: dict(zip(res.runs, vals, strict=True)) for name, vals in table_rows(res)},
        "builds": {
            b: {
                "finished": r.finished,
                "seconds": round(r.seconds, 2),
                "jobs": r.jobs,
                "work_items": r.work,
                "history": asdict(r.history) | {"ok": r.history.ok, "damage": r.history.damage},
                "faults_fired": [asdict(f) for f in r.fired],
                "fault_counts": r.fault_counts,
                "unexpected_exits": r.unexpected_exits,
                "recovery_latencies_s": [round(x, 3) for x in r.recovery_latencies],
                "recovery_latency_p50_s": r.latency(50),
                "recovery_latency_p95_s": r.latency(95),
                "solver_cpu_s": round(r.solver_cpu_s, 4),
                "wasted_cpu_s": round(r.wasted_cpu_s, 4),
                "targets": r.targets,
                "coverage_auc": round(res.auc(b), 4),
                "coverage": r.coverage,
            }
            for b, r in res.runs.items()
        },
    }
