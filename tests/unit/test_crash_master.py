"""Family ``master`` of the crash harness: the group-commit master (issue 19) killed at every file
call and cut by power loss, its WORK and completion promises checked on the files, and the
family shown to catch a master that sends before it commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from leasefence.harness.crash.master import check_master, parse_spec, spec
from leasefence.harness.crash.report import Report
from leasefence.impl.master import Master


def test_the_group_commit_master_keeps_its_promises_at_every_kill_and_power_loss(
    tmp_path: Path,
) -> None:
    report = Report(seed=0)
    check_master(report, tmp_path, items=4, depth=2, seed=3)
    assert report.kill_points > 10
    assert report.power_points > 10
    assert report.acked_checked > 0
    assert report.violations == []
    assert report.lost == 0


def test_a_master_that_sends_work_before_it_commits_loses_acknowledged_operations(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Planted bug: no commit before the WORKs of a turn leave (the decisions stay pending until
    # close, which commits only the journal): the completions told are not booked on disk.
    monkeypatch.setattr(Master, "commit", lambda self: None)
    report = Report(seed=0)
    check_master(report, tmp_path, items=4, depth=1, seed=3, power=False)
    assert report.lost > 0
    assert any("acknowledged, 0 booked" in v.what for v in report.violations)


def test_a_master_that_commits_only_its_journal_before_sending_is_caught(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Planted bug: the turn's commit forgets the coordinator: a WORK leaves while its state
    # lease is only in memory.
    monkeypatch.setattr(Master, "commit", lambda self: self.journal.commit())
    report = Report(seed=0)
    check_master(report, tmp_path, items=4, depth=2, seed=3, power=False)
    assert report.lost > 0
    assert any("left, its state lease is None" in v.what for v in report.violations)


def test_a_master_workload_name_reads_back_and_a_wrong_one_is_refused() -> None:
    assert parse_spec(spec(7, 2, 11)) == (7, 2, 11)
    with pytest.raises(ValueError, match="not a master workload"):
        parse_spec("journal-7-d2")
