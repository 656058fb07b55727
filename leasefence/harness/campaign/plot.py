"""The campaign's plot: coverage over time per build, with the instants its faults fired."""

from __future__ import annotations

from pathlib import Path

from leasefence.harness.campaign.metrics import BuildRun, CampaignResult


def plot(res: CampaignResult, path: Path) -> None:
    """Coverage over time for each build, with the times its faults fired marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"f314": "tab:blue", "pre-fix": "tab:red", "rank-fence": "tab:orange"}
    marks = {
        "kill": "x",
        "reboot": "X",
        "pause": "s",
        "clock-forward": "^",
        "clock-back": "v",
    }
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    for build, run in res.runs.items():
        c = colours.get(build, "tab:gray")
        xs = [0.0, *[t for t, _ in run.coverage], run.seconds]
        ys = [0, *[v for _, v in run.coverage], run.targets]
        ax.step(xs, ys, where="post", color=c, label=f"{build} (AUC {res.auc(build):.3f})")
        for i, f in enumerate(run.fired):
            ax.axvline(f.t, color=c, alpha=0.25, lw=1)
            ax.plot(
                f.t,
                (0.03 + 0.04 * (build != "f314")) * max(res.targets, 1),
                marks.get(f.kind, "o"),
                color=c,
                label=f.kind
                if build == next(iter(res.runs)) and i == _first(run, f.kind)
                else None,
            )
    ax.set_xlabel("seconds since the build's campaign started (real time)")
    ax.set_ylabel("distinct targets reached")
    ax.set_title(
        f"leasefence campaign, seed {res.config.seed}: coverage over time "
        f"({res.config.work_items} z3 items, {res.config.ranks} ranks, ttl {res.config.ttl:g} s"
        + (f", pipeline {res.config.pipeline})" if res.config.pipeline != 1 else ")")
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _first(run: BuildRun, kind: str) -> int:
    return next(i for i, f in enumerate(run.fired) if f.kind == kind)
