"""``leasefence bench`` at its smallest sizes: the non-MPI benchmarks run and report every goal.

These check the structure of what is reported, never a figure: the machine is shared and noisy,
and the benchmarks exist to print ratios, not to gate on them.
"""

from __future__ import annotations

import compileall
import importlib.metadata
import importlib.util
import io
import json
import os
import py_compile
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from leasefence.cli import main
from leasefence.harness.bench import common as bench_common
from leasefence.harness.bench.common import (
    Sizes,
    bytecode_note,
    uncached_count,
    uncached_sources,
)
from leasefence.harness.bench.goals import Goal, goals
from leasefence.harness.bench.runner import BENCHMARKS, run

NON_MPI = ("journal", "recovery", "scale", "verification", "trace")


@pytest.fixture(scope="module")
def report_json(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    out = io.StringIO()
    report = run(Sizes.named("tiny"), NON_MPI, directory=tmp_path_factory.mktemp("bench"), out=out)
    assert report.errors == [], out.getvalue()
    doc = report.to_json()
    return dict(json.loads(json.dumps(doc)))


def test_every_non_mpi_benchmark_reports_its_contenders_side_by_side(
    report_json: dict[str, object],
) -> None:
    results = report_json["results"]
    assert isinstance(results, dict)
    assert set(results) == set(NON_MPI)
    machine = report_json["machine"]
    assert isinstance(machine, dict)
    assert machine["orjson"] == importlib.metadata.version("orjson")  # what wire.py reads with
    for mode in ("per_call", "group"):
        figures = results["journal"][mode]
        assert set(figures["median_pairs_per_s"]) == {
            "journal",
            "sqlite",
            "append_fdatasync",
            "overwrite_fdatasync",
        }
        assert figures["journal_over_sqlite"] > 0
        assert figures["journal_over_limit"] > 0
    rows = results["recovery"]["sizes"]
    assert [r["records"] for r in rows] == list(Sizes.named("tiny").recovery)
    assert all(r["records_after_compaction"] == r["records"] // 2 for r in rows)
    assert all(r["batched_replayed_per_s"] > 0 for r in rows)
    assert results["recovery"]["active_open_s"] > 0
    scale = results["scale"]["sizes"]
    assert [r["items"] for r in scale] == list(Sizes.named("tiny").scale)
    assert all(r["items_per_s"] > 0 and r["peak_bytes"] > 0 for r in scale)
    model_vs_tlc = results["verification"]["model_vs_tlc"]
    assert model_vs_tlc["median_states_per_s"]["model"] > 0
    assert (model_vs_tlc["model_over_tlc"] is None) == ("tlc_skipped" in model_vs_tlc)
    live = results["verification"]["liveness"]
    assert live["live_over_safety"] > 0
    assert live["states"]["live"] > 0
    assert (live["tlc_over_model_live"] is None) == ("tlc_skipped" in live)
    if "tlc_live" in live["states"]:  # TLC and the model explore the same live graph
        assert live["states"]["tlc_live"] == live["states"]["live"]


def test_every_goal_is_reported_with_a_verdict_and_unmeasured_ones_are_skipped(
    report_json: dict[str, object],
) -> None:
    goals = report_json["goals"]
    assert isinstance(goals, list)
    assert len(goals) == 20
    assert {g["status"] for g in goals} <= {"PASS", "MISS", "SKIP"}
    dispatch = [g for g in goals if "master" in g["name"] or "MPIPool" in g["name"]]
    assert [g["status"] for g in dispatch] == ["SKIP"] * 5  # neither dispatch nor jobs was run
    assert all(g["value"] is not None for g in goals if g["name"].startswith("journal"))
    # the trace goals read the sizes they name: 2,000 items is in the tiny run, 10^5 is not
    trace = {g["name"]: g["value"] for g in goals if g["name"].startswith("trace check")}
    assert trace["trace check, 2,000-item run, in process"] > 0
    assert trace["trace check, 2,000-item run, interpreted"] > 0
    # the whole command compiled: measured wherever the validator can be built, else why not
    whole = report_json["results"]["trace"]["whole_command"]  # type: ignore[index]
    assert (trace["trace check, 2,000-item run, compiled"] is None) == ("compiled_error" in whole)
    assert trace["trace check, 100,000-item run"] is None
    assert trace["trace check, step cost largest / smallest run"] > 0
    assert report_json["schema"] == 1
    assert {"python", "cpu", "cores"} <= set(report_json["machine"])  # type: ignore[arg-type]


def test_a_goal_compares_in_the_direction_it_states() -> None:
    assert Goal("a", "x", 1.0, ">=", 1.0).status == "PASS"
    assert Goal("a", "x", 0.9, ">=", 1.0).status == "MISS"
    assert Goal("a", "x", 40.0, "<=", 50.0).status == "PASS"
    assert Goal("a", "x", 60.0, "<=", 50.0).status == "MISS"
    assert Goal("a", "x", None, "<=", 50.0).status == "SKIP"


def test_the_command_writes_json_and_exits_zero_whatever_the_goals_say(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "out" / "bench.json"
    status = main(
        ["bench", "--tiny", "--only", "journal", "--json", str(target), "--dir", str(tmp_path)]
    )
    assert status == 0
    doc = json.loads(target.read_text())
    assert set(doc["results"]) == {"journal"}
    printed = capsys.readouterr().out
    assert "journal / SQLite, per-call sync" in printed
    assert "goal >= 1.00x" in printed


def test_an_unknown_benchmark_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--only", "journal,nosuch"])
    assert exc.value.code == 2
    assert "nosuch" in capsys.readouterr().err
    assert set(BENCHMARKS) == {
        "journal", "recovery", "scale", "dispatch", "jobs", "verification", "trace"
    }  # fmt: skip


def test_a_benchmark_that_fails_reports_its_goals_as_errors_not_as_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from leasefence.harness.bench import runner

    def broken(sizes: Sizes, where: Path, say: object) -> dict[str, object]:
        raise OSError(95, "Operation not supported")

    monkeypatch.setitem(runner.RUNNERS, "recovery", broken)
    out = io.StringIO()
    report = run(Sizes.named("tiny"), ("recovery",), directory=tmp_path, out=out)
    statuses = {g.name: g.status for g in report.goals}
    assert statuses["replay, a record a line (longest journal)"] == "ERROR"
    assert statuses["replay, as a run writes (longest journal)"] == "ERROR"
    assert statuses["journal / SQLite, per-call sync"] == "SKIP"  # not asked for
    assert report.errors == ["recovery: OSError: [Errno 95] Operation not supported"]
    table = out.getvalue().split("done.")[1]
    assert "ERROR recovery: OSError" in table


def test_the_dispatch_goal_reads_the_master_as_leasefence_run_configures_it() -> None:
    # The goal is the master users run (``master-run``: generation fence, depth by TTL) over
    # the bare blocking loop; the depth-1 master's figure is printed beside it, not the goal.
    # (A goal reading ``memory_over_bare_time`` again fails here.)
    from leasefence.harness.bench.dispatch import GOAL_MASTER

    dispatch = {"run_over_bare_time": 1.5, "memory_over_bare_time": 30.0}
    (goal, twin) = [g for g in goals({"dispatch": dispatch}) if "/ bare," in g.name]
    assert GOAL_MASTER == "master-run"
    assert goal.value == 1.5
    assert goal.status == "PASS"
    # beside it the same master compiled (``make compile``): unmeasured without a build
    assert "compiled" in twin.name
    assert twin.status == "SKIP"
    (twin,) = [
        g
        for g in goals({"dispatch": {**dispatch, "run_compiled_over_bare_time": 2.5}})
        if "compiled / bare," in g.name
    ]
    assert (twin.value, twin.status) == (2.5, "MISS")


def test_the_dispatch_goal_times_master_and_bare_loop_over_jobs_of_the_same_length() -> None:
    # A bare job of ``--tasks`` round trips (400: a few milliseconds) measured the scheduler,
    # 2,800 to 145,000 round trips/s on one day; the goal's ratio compares equal jobs.
    from leasefence.harness.bench.dispatch import GOAL_MASTER, LONG_JOBS

    assert GOAL_MASTER in LONG_JOBS
    assert "bare" in LONG_JOBS


def test_a_whole_job_that_fails_or_leaves_items_undone_is_an_error_naming_it() -> None:
    from leasefence.harness.bench.common import whole_job
    from leasefence.harness.bench.jobs import completed_in_journal

    seconds, output = whole_job([sys.executable, "-c", "print('ran')"])
    assert seconds > 0
    assert output == "ran\n"
    failing = [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(3)"]
    with pytest.raises(RuntimeError, match=r"exited 3: boom$") as exc:
        whole_job(failing)
    assert sys.executable in str(exc.value)  # the command is named

    done = "  items completed 40 (journal: 40/40 completed)\n  dispatcher               compiled\n"
    assert completed_in_journal(done, 40) == "compiled"
    assert completed_in_journal(done.replace("compiled\n", "interpreted\n"), 40) == "interpreted"
    with pytest.raises(ValueError, match=r"journal: 39/40 completed \(want all 40 completed\)"):
        completed_in_journal(done.replace("40/40", "39/40"), 40)
    with pytest.raises(ValueError, match="of 41 items: journal: 40/40 completed"):
        completed_in_journal(done, 41)  # every item of this job, not another's count
    with pytest.raises(ValueError, match="no count of completed items"):
        completed_in_journal("leasefence run: done\n", 40)


def test_the_whole_job_goals_name_the_issues_sizes_until_jobs_runs_then_the_sizes_it_ran() -> None:
    from leasefence.harness.bench.goals import job_goals

    assert [(g.name, g.status) for g in job_goals({})] == [
        ("whole job, 2,000 tasks: MPIPoolExecutor / run", "SKIP"),
        ("whole job, 20,000 tasks: MPIPoolExecutor / run", "SKIP"),
    ]
    ran = {"jobs": {"ranks": 4, "sizes": {"500": {"pool_over_run": 0.9}}}}
    (goal,) = job_goals(ran)
    assert (goal.name, goal.value, goal.status) == (
        "whole job, 500 tasks: MPIPoolExecutor / run",
        0.9,
        "MISS",
    )
    assert goal.note == "durable leasefence run, -n 4"
    ran["jobs"]["sizes"]["500"]["pool_over_run"] = 1.0
    assert job_goals(ran)[0].status == "PASS"  # >= 1.0: as fast as the pool meets the goal


def test_ranks_sets_both_mpi_benchmarks_and_each_keeps_its_own_default_without_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from leasefence.cli import cmd_bench
    from leasefence.harness.bench.runner import Report

    seen: list[Sizes] = []

    def fake_run(sizes: Sizes, only: object, directory: object = None) -> Report:
        seen.append(sizes)
        return Report(sizes)

    monkeypatch.setattr(cmd_bench, "run", fake_run)
    assert main(["bench", "--only", "jobs"]) == 0
    assert main(["bench", "--only", "jobs", "--ranks", "2"]) == 0
    assert [(s.ranks, s.job_ranks) for s in seen] == [(3, 4), (2, 2)]
    assert main(["bench", "--ranks", "1"]) == 1
    assert "--ranks must be at least 2, got 1" in capsys.readouterr().err
    assert len(seen) == 2  # refused before running anything


@pytest.mark.parametrize("argv", [[], ["x"], ["-1"], ["1", "2"], ["²"]])
def test_the_pool_script_refuses_anything_but_a_count_of_tasks_before_starting_mpi(
    argv: list[str],
) -> None:
    from leasefence.harness.bench.jobs import POOL_MAP

    proc = subprocess.run(
        [sys.executable, str(POOL_MAP), *argv], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2, proc.stderr
    assert "pool_map: usage: pool_map.py N (a count of tasks)" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_uncached_sources_are_those_python_would_compile_again(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    names = ("fresh", "missing", "edited", "hashed", "rehashed", "unchecked", "foreign")
    for name in names:
        (pkg / f"{name}.py").write_text("X = 1\n")
    (pkg / "sub" / "deep.py").write_text("Y = 2\n")
    for name in ("fresh", "edited", "foreign"):
        py_compile.compile(str(pkg / f"{name}.py"), doraise=True)
    py_compile.compile(str(pkg / "sub" / "deep.py"), doraise=True)
    for name in ("hashed", "rehashed"):
        py_compile.compile(
            str(pkg / f"{name}.py"),
            doraise=True,
            invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH,
        )
    py_compile.compile(
        str(pkg / "unchecked.py"),
        doraise=True,
        invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH,
    )
    (pkg / "edited.py").write_text("X = 12\n")  # another size: its cache is stale
    (pkg / "rehashed.py").write_text("X = 2\n")  # the same size: only the hash tells
    (pkg / "unchecked.py").write_text("X = 2\n")  # Python never checks this cache: still used
    foreign = Path(importlib.util.cache_from_source(str(pkg / "foreign.py")))
    foreign.write_bytes(b"\0\0\r\n" + foreign.read_bytes()[4:])  # another Python's magic
    (tmp_path / "link").symlink_to(pkg)  # the same files again: each is counted once
    found = uncached_sources([pkg, tmp_path / "link"])
    assert found == [pkg / f"{n}.py" for n in ("edited", "foreign", "missing", "rehashed")]


def test_a_source_that_cannot_be_read_counts_as_uncached_not_as_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "m.py"
    source.write_text("X = 1\n")
    py_compile.compile(
        str(source), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
    )
    assert uncached_sources([tmp_path]) == []
    real_open = open

    def refuse_the_source(path: Any, *args: Any, **kwargs: Any) -> Any:
        if os.path.realpath(path) == os.path.realpath(source):  # the source does not open
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(bench_common, "open", refuse_the_source, raising=False)
    assert uncached_sources([tmp_path]) == [source]


def test_the_bytecode_note_speaks_only_when_processes_compile_what_no_cache_holds(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("A = 1\n")
    (tmp_path / "b.py").write_text("B = 1\n")
    assert uncached_count([tmp_path], caches_written=False) == 2
    note = bytecode_note(uncached_count([tmp_path], caches_written=False))
    assert note is not None
    assert "2 source files of leasefence have no current bytecode cache" in note
    assert "make bytecode" in note
    assert "1 source file of leasefence has no current bytecode cache" in str(bytecode_note(1))
    assert uncached_count([tmp_path], caches_written=True) == 0
    assert bytecode_note(uncached_count([tmp_path], caches_written=True)) is None
    compileall.compile_dir(str(tmp_path), quiet=1)
    assert uncached_count([tmp_path], caches_written=False) == 0
    assert bytecode_note(uncached_count([tmp_path], caches_written=False)) is None


@pytest.mark.parametrize("dont_write", [True, False])
def test_the_bench_prints_the_bytecode_note_when_pythondontwritebytecode_is_set(
    tmp_path: Path, dont_write: bool
) -> None:
    (tmp_path / "m.py").write_text("X = 1\n")
    code = (
        "from pathlib import Path\n"
        "from leasefence.harness.bench import runner\n"
        f"runner.package_folders = lambda: [Path({str(tmp_path)!r})]\n"
        "runner.run(runner.Sizes.named('tiny'), only=())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    if dont_write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    said = "note: 1 source file of leasefence has no current bytecode cache" in done.stdout
    assert said == dont_write, done.stdout
