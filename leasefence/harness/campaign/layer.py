"""The campaign's ``verify`` layer: short campaigns at depth 1 and 2, one row per build."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from leasefence.harness.campaign.metrics import CampaignResult
from leasefence.harness.campaign.runner import run_campaign
from leasefence.harness.campaign.schedule import SCHEDULED, CampaignConfig


def layer_campaign(deep: bool) -> list[Any]:
    """The ``verify`` layer: a short campaign (a longer one with ``--deep``); one row per build.
    F314 passes when its history holds with every fault injected; the pre-fix build passes when
    its history shows the damage. Then F314 again at pipeline depth 2 (issue 12): it passes when
    its history holds and every cross-generation result was refused (the rank-fenced build is a
    measurement, not a gate: ``leasefence campaign --pipeline 2`` runs it)."""
    from leasefence.report import Row

    config = (
        CampaignConfig(faults=10, duration=20.0)
        if deep
        else CampaignConfig(faults=5, work=60, timeout=90.0)
    )
    depth2 = replace(config, pipeline=2, builds=("f314",))
    rows: list[Row] = []
    for cfg in (config, depth2):
        with tempfile.TemporaryDirectory(prefix="leasefence-verify-campaign-") as tmp:
            rows += _campaign_rows(run_campaign(cfg, Path(tmp)))
    return rows


def _campaign_rows(res: CampaignResult) -> list[Any]:
    from leasefence.report import FAIL, PASS, Row

    config = res.config
    depth = f", pipeline {config.pipeline}" if config.pipeline != 1 else ""
    rows = []
    for build, run in res.runs.items():
        h = run.history
        good = res.f314_ok() if build == "f314" else h.damage
        figures = (
            f"{h.duplicate_completions} dup completions, {h.wrong_owner_commits} wrong-owner "
            f"commits, {h.double_grants_work + h.double_grants_state} double grants, "
            f"{'all' if h.exactly_once else 'NOT all'} items once, "
            f"{sum(run.fault_counts.get(k, 0) for k in SCHEDULED)} faults"
        )
        if config.pipeline != 1:
            figures += (
                f", {h.cross_generation_results} cross-generation results "
                f"({h.cross_generation_accepted} accepted)"
            )
        detail = "; ".join(h.examples + h.interrupted_rejections + run.unexpected_exits)
        rows.append(
            Row(
                "campaign",
                f"{build}: {run.work} items, seed {config.seed}{depth}",
                figures,
                PASS if good else FAIL,
                run.seconds,
                detail,
            )
        )
    return rows
