"""The campaign as a command: run it, print its table and notes, write the JSON and the plot,
and return the exit status (``leasefence campaign``)."""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from leasefence.harness.campaign.metrics import CampaignResult
from leasefence.harness.campaign.runner import run_campaign
from leasefence.harness.campaign.schedule import CampaignConfig
from leasefence.harness.campaign.table import format_table, to_json


def main(
    config: CampaignConfig,
    workdir: Path | None = None,
    json_path: Path | None = None,
    plot_path: Path | None = None,
) -> int:
    """Run the campaign (in ``workdir``, default a temporary directory) and report it. 0 when
    F314 holds with every fault injected and the pre-fix build, if run, shows damage."""

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="leasefence-campaign-") as tmp:
        result = run_campaign(config, workdir or Path(tmp), progress)
    print(format_table(result))
    print_notes(result)
    print(f"campaign: {result.seconds:.1f} s")
    if json_path:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(to_json(result), indent=2) + "\n")
    if plot_path:
        from leasefence.harness.campaign.plot import plot

        plot(result, plot_path)
        print(f"plot: {plot_path}")
    return verdict(result)


def print_notes(result: CampaignResult) -> None:
    """Examples of what went wrong, divergences from the model and unexpected job ends."""
    for build, r in result.runs.items():
        for line in r.history.examples[:4]:
            print(f"  {build}: {line}")
        if not r.history.trace_valid:
            print(f"  {build}: first divergence from the model: {r.history.trace_divergence}"[:400])
        if r.history.trace_ok and not r.history.trace_valid:
            for line in r.history.interrupted_rejections:
                print(f"  {build}: restart explained by a kill mid-rejection: {line}")
        for line in r.unexpected_exits:
            print(f"  {build}: job ended unexpectedly: {line[-300:]}")


def verdict(result: CampaignResult) -> int:
    """Print what the campaign showed; 0 when it showed what it must, else 1."""
    ok = result.f314_ok() if "f314" in result.runs else True
    if "pre-fix" in result.runs:
        ok = ok and result.prefix_damaged()
    said = []
    if "f314" in result.runs and result.f314_ok():
        said.append("F314 held under every fault")
    if result.prefix_damaged():
        said.append("the pre-fix build shows damage")
    if "rank-fence" in result.runs:
        # a measurement, not a gate: see the README on why a campaign may not reach the
        # model's counterexample
        said.append(
            "the rank-fenced build shows damage"
            if result.rank_fence_damaged()
            else "the rank-fenced build shows no damage in this run"
        )
    print("campaign: " + "; ".join(said))
    return 0 if ok else 1
