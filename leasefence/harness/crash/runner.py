"""The crash harness's runs: family kill and family power on one workload, rounds of workloads
until enough crash points are tried (``run``), and one crash point again (``replay``)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from leasefence.harness.crash.child import ChildRun, kill_run, prepare, record_run, result_json
from leasefence.harness.crash.disk import (
    MODELS,
    PowerPoint,
    materialize,
    power_disk,
    power_points,
)
from leasefence.harness.crash.master import check_master
from leasefence.harness.crash.master import parse_spec as parse_master_spec
from leasefence.harness.crash.master import spec as master_spec
from leasefence.harness.crash.oracle import History, Outcome, check_directory, describe, history
from leasefence.harness.crash.report import MAX_KEPT, Report, Violation
from leasefence.harness.crash.workloads import Workload, make_workload, workloads_for_round

Family = Literal["kill", "power"]
Progress = Callable[[str], None]

#: The sizes of ``--quick`` (and of ``verify``'s crashcheck row): a few hundred points in seconds.
QUICK_POINTS = 400
QUICK_SIZE = 6


def main_progress(line: str) -> None:
    """The command line's progress lines, on stderr."""
    print(f"[crashcheck] {line}", file=sys.stderr, flush=True)


def _scratch_root() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="leasefence-crash-", dir=base))


def _initial_files(w: Workload, scratch: Path) -> dict[str, bytes]:
    materialize(scratch, {})
    prepare(w, scratch)
    return {n: (scratch / n).read_bytes() for n in sorted(os.listdir(scratch))}


def _note(
    report: Report,
    w: Workload,
    family: Family,
    acked: int,
    point: str,
    out: Outcome,
    kept: list[int],
) -> None:
    report.acked_checked += out.acked_checked
    report.lost += out.lost
    for what in out.problems:
        step = min(acked + 1, len(w.ops) - 1)
        v = Violation(family, w.spec, step, w.ops[step].describe(), point, what)
        if kept[0] < MAX_KEPT:
            report.violations.append(v)
        kept[0] += 1


def _check_results(
    report: Report, w: Workload, h: History, run: ChildRun, family: Family, point: str
) -> None:
    if run.end.startswith("raised"):
        v = Violation(
            family, w.spec, max(run.acks, default=-1) + 1, "", point, f"the workload {run.end}"
        )
        report.violations.append(v)
    for step, result in run.acks.items():
        if result != result_json(h.results[step]):
            report.violations.append(
                Violation(
                    family,
                    w.spec,
                    step,
                    w.ops[step].describe(),
                    point,
                    f"the implementation returned {result!r}, the model {h.results[step]!r}",
                )
            )


def check_kill(
    w: Workload,
    report: Report,
    scratch: Path,
    progress: Progress | None = None,
    only: int | None = None,
) -> None:
    """Family ``kill`` on ``w``: SIGKILL after every mutating file call (or only after ``only``)."""
    h = history(w)
    directory = scratch / "kill"
    directory.mkdir(exist_ok=True)
    materialize(directory, {})
    prepare(w, directory)
    full = kill_run(w, directory, None)
    _check_results(report, w, h, full, "kill", "-")
    total = next((e[1] for e in full.events if e[0] == "count"), 0)
    kept = [0]
    points: range | list[int] = range(total + 1) if only is None else [only] if only >= 0 else []
    for k in points:
        if kept[0] >= MAX_KEPT:
            report.stopped_early.append(f"kill {w.spec}")
            break
        materialize(directory, {})
        prepare(w, directory)
        run = kill_run(w, directory, k)
        acked = max(run.acks, default=-1)
        _check_results(report, w, h, run, "kill", str(k))
        out = check_directory(w, h, directory, acked)
        report.kill_points += 1
        _note(report, w, "kill", acked, str(k), out, kept)
    if progress:
        progress(f"kill  {w.spec}: {len(points)} points")


def check_power(
    w: Workload,
    report: Report,
    scratch: Path,
    progress: Progress | None = None,
    only: PowerPoint | None = None,
    models: tuple[str, ...] = MODELS,
) -> None:
    """Family ``power`` on ``w``: every simulated power loss over its recorded operations, under
    each of ``models`` (``disk.MODELS``). A state reached under two models is reopened once and
    counted under each."""
    h = history(w)
    directory = scratch / "power"
    directory.mkdir(exist_ok=True)
    initial = _initial_files(w, directory)
    materialize(directory, initial)
    rec = record_run(w, directory)
    _check_results(report, w, h, rec, "power", "-")
    checked: dict[bytes, bool] = {}  # state -> whether it broke a promise
    seen: dict[str, set[bytes]] = {m: set() for m in MODELS}
    kept = [0]
    n = 0
    for point, acked in power_points(rec.events, models if only is None else (only.model,)):
        if kept[0] >= MAX_KEPT:
            report.stopped_early.append(f"power {w.spec}")
            break
        if only is not None and point != only:
            continue
        n += 1
        files = power_disk(rec.events, initial, point)
        key = hashlib.sha256(repr((sorted(files.items()), h.window(acked))).encode()).digest()

        def check(
            files: dict[str, bytes] = files, acked: int = acked, at: str = str(point)
        ) -> bool:
            materialize(directory, files)
            out = check_directory(w, h, directory, acked)
            _note(report, w, "power", acked, at, out, kept)
            return bool(out.problems)

        report.power_state(point.model, key, seen, checked, check)
    if progress:
        progress(f"power {w.spec}: {n} points, {len(checked)} distinct states")


def run(
    seed: int = 1,
    points: int = 10_000,
    size: int = 40,
    kill_rounds: int = 5,
    progress: Progress | None = None,
    models: tuple[str, ...] = MODELS,
) -> Report:
    """Rounds of four workloads: the first ``kill_rounds`` get family ``kill``; family ``power``
    (under ``models``) runs on each round that starts with fewer than ``points`` crash points
    tried. Rounds go on until both are done."""
    report = Report(seed=seed)
    start = time.perf_counter()
    scratch = _scratch_root()
    try:
        r = 0
        while report.points < points or r < kill_rounds:
            power = report.points < points
            for w in workloads_for_round(seed, r, size):
                report.workloads.append(w.spec)
                if r < kill_rounds:
                    check_kill(w, report, scratch, progress)
                if power:
                    check_power(w, report, scratch, progress, models=models)
            if r < kill_rounds or power:
                # the group-commit master (issue 19), a new seed and depth 1 or 2 each round
                items, depth = max(3, min(size // 4, 9)), 1 + r % 2
                check_master(
                    report, scratch, items, depth, seed + r, kill=r < kill_rounds, power=power,
                    models=models,
                )  # fmt: skip
                if progress:
                    progress(f"master {master_spec(items, depth, seed + r)}: done")
            if progress:
                progress(
                    f"round {r}: {report.points:,}/{points:,} crash points, "
                    f"{len(report.violations)} violations, {time.perf_counter() - start:.1f} s"
                )
            r += 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def replay(spec: str, progress: Progress | None = None) -> Report:
    """Run one crash point again: ``kill:<workload>:<k>`` or ``power:<workload>:<p>,<q>,<cut>``
    (``<cut>``: ``-`` model whole, a byte count model torn, ``s<hex mask>`` model sectors)."""
    family, rest = spec.split(":", 1)
    workload, point = rest.rsplit(":", 1)
    if family == "master":
        return _replay_master(workload, point)
    w = make_workload(workload)
    report = Report(seed=w.seed, workloads=[w.spec])
    scratch = _scratch_root()
    start = time.perf_counter()
    try:
        if family == "kill":  # point "-": only the uninterrupted run (its results)
            check_kill(w, report, scratch, progress, only=-1 if point == "-" else int(point))
        elif family == "power":
            check_power(w, report, scratch, progress, only=PowerPoint.parse(point))
        else:
            raise ValueError(f"unknown family {family!r} (kill or power)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    if progress:
        for line in describe(w).splitlines():
            progress(line)
    return report


def _replay_master(workload: str, point: str) -> Report:
    """One crash point of family ``master`` again (``<k>`` of kill, a power point otherwise)."""
    items, depth, seed = parse_master_spec(workload)
    report = Report(seed=seed)
    scratch = _scratch_root()
    start = time.perf_counter()
    try:
        check_master(report, scratch, items, depth, seed, only=point)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def crashcheck(
    *,
    seed: int = 1,
    points: int = 10_000,
    size: int = 40,
    kill_rounds: int = 5,
    quick: bool = False,
    replay_spec: str | None = None,
    json_path: str | None = None,
    quiet: bool = False,
    models: tuple[str, ...] = MODELS,
) -> int:
    """``leasefence crashcheck``: a run (or ``--quick`` one, or one crash point again), each
    violation and the summary printed, the report written as JSON if asked; 1 on any violation."""
    progress = None if quiet else main_progress
    if replay_spec:
        report = replay(replay_spec, main_progress)
    elif quick:
        report = run(seed, QUICK_POINTS, QUICK_SIZE, 1, progress, models)
    else:
        report = run(seed, points, size, kill_rounds, progress, models)
    for v in report.violations:
        print(v)
    print(report.summary())
    if json_path:
        Path(json_path).write_text(json.dumps(report.to_json(), indent=2) + "\n")
    return 1 if report.violations else 0
