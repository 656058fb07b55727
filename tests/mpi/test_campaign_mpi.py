"""A short fault-injection campaign on real ``mpiexec`` jobs: F314 holds, the pre-fix build
shows the damage (``leasefence campaign``, scaled down to a few seconds per build)."""

from __future__ import annotations

from pathlib import Path

import pytest

from leasefence.campaign import SCHEDULED, CampaignConfig, CampaignResult, run_campaign

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def short_campaign(tmp_path_factory: pytest.TempPathFactory) -> CampaignResult:
    config = CampaignConfig(seed=0, work=50, faults=5, timeout=90.0)
    return run_campaign(config, Path(tmp_path_factory.mktemp("campaign")))


def test_f314_completes_every_item_exactly_once_under_every_fault(
    short_campaign: CampaignResult,
) -> None:
    run = short_campaign.runs["f314"]
    assert run.finished, run.unexpected_exits
    h = run.history
    assert h.duplicate_completions == 0
    assert h.journal_duplicate_completions == 0
    assert h.wrong_owner_commits == 0
    assert h.double_grants_work == 0
    assert h.double_grants_state == 0
    assert h.premature_reclaims == 0
    assert h.misattributed_results == 0
    assert h.exactly_once
    assert h.trace_ok, (h.segment_divergences, h.interrupted_rejections, h.trace_divergence)
    for kind in SCHEDULED:
        assert run.fault_counts.get(kind, 0) > 0, kind


def test_the_pre_fix_build_shows_duplicates_or_wrong_owner_commits_on_the_same_seed(
    short_campaign: CampaignResult,
) -> None:
    runs = short_campaign.runs
    assert runs["pre-fix"].finished, runs["pre-fix"].unexpected_exits
    assert runs["pre-fix"].history.damage
    # Both builds follow one schedule, fired at the same fractions of completed work; a short
    # pre-fix run may finish before its last faults come due, so it fires a prefix of it.
    fired = [f.kind for f in runs["pre-fix"].fired]
    assert fired
    assert fired == [f.kind for f in runs["f314"].fired][: len(fired)]
