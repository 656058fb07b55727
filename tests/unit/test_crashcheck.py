"""The crash harness (``leasefence crashcheck``): a clean run finds nothing, and planted
durability bugs (acknowledging before the fsync, before the write, saving in place) are found;
the sectors model finds what a crash keeping some sectors of a write would do to the journal.

The harness forks its children, so a bug planted here with ``monkeypatch`` is in them too.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from leasefence.cli import main
from leasefence.harness.crash.disk import PowerPoint, power_disk, power_points
from leasefence.harness.crash.oracle import check_directory, history
from leasefence.harness.crash.report import Report
from leasefence.harness.crash.runner import check_kill, check_power, replay, run
from leasefence.harness.crash.workloads import (
    BASE,
    JOURNAL_NAME,
    Op,
    Workload,
    coordinator_workload,
    journal_workload,
    make_workload,
    workloads_for_round,
)
from leasefence.impl import coordinator as coordinator_module
from leasefence.impl import journal as journal_module
from leasefence.impl.journal import WorkLeaseJournal


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    return tmp_path


def test_quick_crashcheck_tries_hundreds_of_points_and_finds_nothing(tmp_path: Path) -> None:
    out = tmp_path / "crash.json"
    assert main(["crashcheck", "--quick", "--quiet", "--json", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["crash_points"] >= 400
    assert doc["kill_points"] > 0
    assert doc["power_points"] > 0
    assert doc["acked_checked"] > 0
    assert doc["lost"] == 0
    assert doc["violations"] == []


def test_every_workload_kind_and_mode_agrees_with_the_model_when_not_crashed(
    scratch: Path,
) -> None:
    report = Report(seed=5)
    for w in workloads_for_round(5, 0, 10):
        check_kill(w, report, scratch, only=-1)  # the uninterrupted run only
    assert report.violations == []


def _skip_fsync(self: WorkLeaseJournal, data: bytes) -> None:
    """The planted bug: acknowledge a record once written, without fsync."""
    self._save_torn_tail()
    assert self._fd is not None
    journal_module._write_all(self._fd, data)


def test_a_journal_that_acknowledges_before_fsync_loses_records_on_power_loss(
    monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    monkeypatch.setattr(WorkLeaseJournal, "_write", _skip_fsync)
    report = Report(seed=1)
    check_power(journal_workload(1, 8, "always"), report, scratch)
    assert report.lost > 0
    assert any("lost acknowledged operation" in v.what for v in report.violations)
    spec = report.violations[0].replay
    assert spec.startswith("power:journal:always:1:8:")
    again = replay(spec)  # the printed replay finds the same violation
    assert report.violations[0].what in [v.what for v in again.violations]


def test_a_journal_that_acknowledges_before_writing_loses_records_on_sigkill(
    monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    def deferred(self: WorkLeaseJournal, lines: list[bytes], apply: object) -> None:
        # the planted bug: write each record only at the next call (acknowledged too early)
        previous = self.__dict__.get("_planted", [])
        self.__dict__["_planted"] = list(lines)
        if previous:
            self._write(b"".join(previous))
        if callable(apply):  # (None: the caller makes the change after the call)
            apply()
        self._records += len(lines)

    monkeypatch.setattr(WorkLeaseJournal, "_commit_records", deferred)
    report = Report(seed=2)
    check_kill(journal_workload(2, 8, "always"), report, scratch)
    assert any("lost acknowledged operation" in v.what for v in report.violations)


def test_a_coordinator_that_saves_in_place_is_caught_by_sigkill_mid_save(
    monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    def in_place(path: Path, data: bytes) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data[: len(data) // 2])
            os.write(fd, data[len(data) // 2 :])
            os.fsync(fd)
        finally:
            os.close(fd)

    monkeypatch.setattr(coordinator_module, "_atomic_write", in_place)
    report = Report(seed=3)
    check_kill(coordinator_workload(3, 6, "autosave"), report, scratch)
    assert any("SnapshotError" in v.what for v in report.violations)


def test_a_coordinator_that_skips_the_directory_fsync_loses_saves_on_power_loss(
    monkeypatch: pytest.MonkeyPatch, scratch: Path
) -> None:
    def no_dir_fsync(path: Path, data: bytes) -> None:
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)

    monkeypatch.setattr(coordinator_module, "_atomic_write", no_dir_fsync)
    report = Report(seed=4)
    check_power(coordinator_workload(4, 4, "autosave"), report, scratch)
    assert report.lost > 0


def test_the_cli_exits_non_zero_and_lists_each_violation_with_its_replay(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(WorkLeaseJournal, "_write", _skip_fsync)
    assert main(["crashcheck", "--quick", "--quiet", "--kill-rounds", "0"]) == 1
    out = capsys.readouterr().out
    assert "replay: leasefence crashcheck --replay power:journal:" in out
    assert "acknowledged operations lost: 0" not in out


def test_power_loss_points_cut_the_last_unsynced_write_at_every_byte() -> None:
    events = [["create", "f", 1], ["write", 1, 0, b"abcd".hex()], ["fsync", 1]]
    points = [str(p) for p, _ in power_points(events)]
    assert {"2,1,1", "2,1,2", "2,1,3", "2,1,-", "2,0,-"} <= set(points)
    assert power_disk(events, {}, PowerPoint(2, 1, 2)) == {"f": b"ab"}
    assert power_disk(events, {}, PowerPoint(2, 0, None)) == {}  # the create is undone
    assert power_disk(events, {}, PowerPoint(3, 0, None)) == {}  # no directory fsync
    assert not any(p.startswith("3,1") for p in points)  # fsynced: the write is forced


def test_an_undurable_rename_may_be_undone_by_power_loss() -> None:
    events = [
        ["create", "t", 2],
        ["write", 2, 0, b"new".hex()],
        ["fsync", 2],
        ["rename", "t", "s"],
    ]
    before = power_disk(events, {"s": b"old"}, PowerPoint(4, 3, None))
    after = power_disk(events, {"s": b"old"}, PowerPoint(4, 4, None))
    assert before["s"] == b"old"
    assert after == {"s": b"new"}
    durable = [*events, ["dsync"]]
    assert power_disk(durable, {"s": b"old"}, PowerPoint(5, 3, None)) == {"s": b"new"}


def test_the_sectors_model_keeps_any_subset_of_a_writes_sectors_with_zeros_where_it_grew() -> None:
    data = bytes(range(256)) * 2  # 512 bytes from offset 600: sectors 1 and 2 of the file
    events = [["write", 1, 600, data.hex()]]
    initial = {"f": b"x" * 600}
    points = [p for p, _ in power_points(events, ("sectors",))]
    assert {str(p) for p in points} == {"1,0,s0", "1,0,s1", "1,0,s2"}  # all kept is "whole"
    assert {p.model for p in points} == {"sectors"}
    assert PowerPoint.parse("1,0,s2") == PowerPoint(1, 0, None, 2)
    second_only = power_disk(events, initial, PowerPoint(1, 0, None, 2))["f"]
    assert second_only == b"x" * 600 + bytes(424) + data[424:]
    first_only = power_disk(events, initial, PowerPoint(1, 0, None, 1))["f"]
    assert first_only == b"x" * 600 + data[:424] + bytes(88)
    assert power_disk(events, initial, PowerPoint(1, 0, None, 0))["f"] == b"x" * 600 + bytes(512)


def test_the_sectors_model_samples_the_subsets_of_a_long_write() -> None:
    events = [["write", 1, 0, bytes(512 * 20).hex()]]
    masks = [p.sectors for p, _ in power_points(events, ("sectors",))]
    assert len(masks) == len(set(masks)) == 64
    assert 0 in masks
    assert (1 << 20) - 1 not in masks


def _sectors_only(spec: str, scratch: Path) -> Report:
    report = Report(seed=0)
    check_power(make_workload(spec), report, scratch, models=("sectors",))
    assert report.model("sectors").states > 0
    return report


@pytest.mark.parametrize("spec", ["journal:group:1004:6", "journal:always:1013:6"])
def test_a_batch_write_with_some_sectors_lost_is_a_torn_tail_not_corruption(
    spec: str, scratch: Path
) -> None:
    # A group commit (1004) or a recover (1013) writes several records at once. Written one
    # record per line, a crash keeping a later sector but not an earlier one left a bad line
    # followed by good records: the journal refused to open (JournalCorrupt) until `journal
    # repair`. These workloads start from an empty journal, so only that defect shows here.
    w = make_workload(spec)
    assert not w.legacy
    report = _sectors_only(w.spec, scratch)
    assert report.violations == [], "\n".join(map(str, report.violations))


def test_a_last_record_without_its_newline_survives_a_crash_during_the_next_append(
    scratch: Path,
) -> None:
    # The journal starts with a legacy lease without its newline, a record recovery counts.
    # Written together with the next record, the newline's sector could be lost (zeros) while
    # the file grew: the lease and everything after it were cut as one torn tail.
    w = make_workload("journal:group:1016:6")
    assert w.legacy
    assert w.unterminated
    report = _sectors_only(w.spec, scratch)
    assert report.violations == [], "\n".join(map(str, report.violations))


def test_the_cli_prints_the_figures_of_each_model(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["crashcheck", "--quick", "--quiet", "--model", "sectors", "--model", "torn"]) == 0
    out = capsys.readouterr().out
    assert "power loss, model torn:" in out
    assert "power loss, model sectors:" in out
    assert "model whole" not in out


def _one_lease(work: str) -> Workload:
    return Workload(
        "journal", "always", 0, 1, False, (work,), (Op("open", (), 1), Op("lease", (work, 1), 2))
    )


@pytest.mark.parametrize("generation", [None, (1, 7)])
def test_the_oracle_sees_a_recovered_leases_generation_which_the_model_never_issued(
    scratch: Path, generation: tuple[int, int] | None
) -> None:
    # The model's history grants the lease by rank alone (generation 0). A file whose lease
    # carries a generation token is another state: the oracle maps it with
    # conformance.refinement, generations included, instead of dropping them.
    w = _one_lease("a" * 64)
    with WorkLeaseJournal(scratch / JOURNAL_NAME, clock=lambda: BASE + 2) as journal:
        assert journal.lease("a" * 64, 1, generation)
    out = check_directory(w, history(w), scratch, acked=1)
    if generation is None:
        assert out.problems == []
    else:
        assert any("no state the history allows" in p for p in out.problems), out.problems


@pytest.mark.slow
def test_crashcheck_of_a_few_thousand_points_finds_no_lost_operation_and_no_violation(
    request: pytest.FixtureRequest,
) -> None:
    if "slow" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("slow: run with -m slow (the Makefile does not deselect slow tests)")
    report = run(seed=7, points=3_000, size=20, kill_rounds=2)
    assert report.points >= 3_000
    assert report.kill_points > 100
    assert report.lost == 0
    assert report.violations == []
