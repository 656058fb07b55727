"""Running a campaign: each build's jobs under ``mpiexec`` to the end, faults fired on the
schedule as the work completes, then the build's history checked offline."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from leasefence.harness.campaign.history import check_build
from leasefence.harness.campaign.metrics import BuildRun, CampaignResult, FiredFault, measure
from leasefence.harness.campaign.process import (
    build_tree,
    executable,
    fire,
    rank_pids,
    read_ndjson,
    signal_pid,
    tail,
    tear,
    wait_or_kill,
)
from leasefence.harness.campaign.schedule import (
    IN_JOB_RESTART,
    SCHEDULED,
    CampaignConfig,
    Fault,
    build_args,
    schedule,
)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BuildFiles:
    """The files of one build's runs, all in its work directory."""

    workdir: Path

    @property
    def journal(self) -> Path:
        return self.workdir / "journal.jsonl"

    @property
    def snapshot(self) -> Path:
        return self.workdir / "snapshot.json"

    @property
    def trace(self) -> Path:
        return self.workdir / "trace.ndjson"

    @property
    def events(self) -> Path:
        return self.workdir / "events.ndjson"

    @property
    def clock(self) -> Path:
        return self.workdir / "clock.json"

    def log(self, job: int) -> Path:
        return self.workdir / f"job{job}.log"


def job_command(build: str, config: CampaignConfig, files: BuildFiles) -> list[str]:
    """The ``mpiexec ... leasefence run`` command of every job of ``build``."""
    return [
        executable("mpiexec"),
        "-n",
        str(config.ranks),
        executable("leasefence"),
        "run",
        "--work",
        str(config.work_items),
        "--seed",
        str(config.seed),
        "--ttl",
        str(config.ttl),
        "--worker",
        config.worker,
        "--journal",
        str(files.journal),
        "--snapshot",
        str(files.snapshot),
        "--trace",
        str(files.trace),
        "--events",
        str(files.events),
        "--clock-file",
        str(files.clock),
        *config.inject_args(),
        "--inject-rate",
        str(config.inject_rate),
        "--duplicate-candidates",
        str(config.duplicate_candidates),
        "--compact-every",
        str(config.compact_every),
        *build_args(build, config.pipeline),
    ]


@dataclass
class _Job:
    """One running job as it is watched."""

    proc: subprocess.Popen[bytes]
    launched: float
    first_dispatch: bool
    up: bool = False
    paused: tuple[int, float] | None = None  # (PID, when to SIGCONT it)
    killed: bool = False


@dataclass
class _BuildDriver:
    """Runs one build's jobs one after another until the work is done, firing the faults."""

    build: str
    config: CampaignConfig
    faults: Sequence[Fault]
    files: BuildFiles
    progress: Progress
    run: BuildRun
    todo: list[Fault] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    clock_doc: dict[str, float] = field(default_factory=dict)
    start: float = 0.0
    offset: int = 0  # bytes of the event log read so far
    completed: int = 0
    last_line: float = 0.0

    def drive(self, env: dict[str, str]) -> None:
        """Start jobs until the build finishes, times out, or restarts too often."""
        config, run = self.config, self.run
        while not run.finished:
            if time.time() - self.start > config.timeout:
                run.unexpected_exits.append(f"timeout after {config.timeout:g} s")
                break
            if run.jobs > len(self.faults) + 3:
                run.unexpected_exits.append("too many jobs")
                break
            self.job(env)

    def job(self, env: dict[str, str]) -> None:
        """One ``mpiexec`` job, watched until it ends or a kill fault ends it."""
        run = self.run
        launched = time.time()
        run.jobs += 1
        with self.files.log(run.jobs).open("w") as log:
            job = self._launch(env, log, launched)
            try:
                while job.proc.poll() is None and not self._watch(job):
                    time.sleep(0.05)
            finally:
                if job.paused is not None:
                    signal_pid(job.paused[0], signal.SIGCONT)
                wait_or_kill(job.proc, 60.0)
        new, self.offset = tail(self.files.events, self.offset)
        run.finished |= any(ev.get("kind") == "end" for ev in new)
        if not job.killed and not run.finished:
            log_tail = self.files.log(run.jobs).read_text()[-400:]
            run.unexpected_exits.append(f"job {run.jobs} exit {job.proc.returncode}: {log_tail}")

    def _launch(self, env: dict[str, str], log: IO[str], launched: float) -> _Job:
        cmd = job_command(self.build, self.config, self.files)
        proc = subprocess.Popen(
            cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.files.workdir
        )
        return _Job(proc, launched, first_dispatch=self.run.jobs == 1)

    def _watch(self, job: _Job) -> bool:
        """Read the job's new events, resume a paused worker, fire the next fault when due;
        True once a kill fault ended the job."""
        self._read_events(job)
        now = time.time()
        if job.paused is not None and now >= job.paused[1]:
            signal_pid(job.paused[0], signal.SIGCONT)
            job.paused = None
        due = bool(self.todo) and self.completed >= self.todo[0].at * self.run.work
        if job.paused is None and job.up and due and self._fire_next(job, now):
            return True
        if now - self.last_line >= 2.0:
            self.last_line = now
            self.progress(
                f"  [{self.build} {now - self.start:6.1f} s] {self.completed}/{self.run.work} "
                f"completed, job {self.run.jobs}, {sum(self.counts[k] for k in SCHEDULED)}/"
                f"{len(self.faults)} faults fired"
            )
        return False

    def _read_events(self, job: _Job) -> None:
        new, self.offset = tail(self.files.events, self.offset)
        for ev in new:
            kind = ev.get("kind")
            if kind == "start":
                job.up = True
            elif kind == "dispatch" and not job.first_dispatch:
                job.first_dispatch = True
                self.run.recovery_latencies.append(float(ev["t"]) - job.launched)
            elif kind == "result" and ev.get("work_ok") and ev.get("ok"):
                self.completed += 1
            elif kind == "end":
                self.run.finished = True
                # Liveness at the end: every item completed or given up (EveryItemSettled).
                self.run.unsettled = int(ev.get("unsettled", 0))
                if self.run.unsettled:
                    self.run.unexpected_exits.append(
                        f"{ev['unsettled']} item(s) neither completed nor given up at the end"
                    )

    def _fire_next(self, job: _Job, now: float) -> bool:
        """Fire the next scheduled fault; True when it killed the job (torn tails left)."""
        fault = self.todo.pop(0)
        pids = rank_pids(job.proc.pid)
        detail = fire(fault, pids, self.files.clock, self.clock_doc)
        if detail is None:
            self.todo.insert(0, fault)  # its process is not there yet
            return False
        self.counts[fault.kind] += 1
        self.run.fired.append(FiredFault(round(now - self.start, 3), fault.kind, detail))
        self.progress(f"  [{self.build} {now - self.start:6.1f} s] {fault.kind}: {detail}")
        if fault.kind == "pause":
            job.paused = (pids[fault.rank or 1], now + fault.seconds)
        if fault.kind not in ("kill", "reboot"):
            return False
        job.killed = True
        wait_or_kill(job.proc, 20.0)
        for path in (self.files.journal, self.files.trace):
            if tear(path, fault.torn):
                self.counts["torn-tail"] += 1
        return True

    def finish(self) -> None:
        """Measure the build from its event log, then check its history offline."""
        run, counts = self.run, self.counts
        run.seconds = time.time() - self.start
        logged = read_ndjson(self.files.events)
        measure(run, logged, self.start)
        counts["compaction"] = sum(1 for e in logged if e.get("kind") == "compact")
        counts[IN_JOB_RESTART] = sum(1 for e in logged if e.get("kind") == "restart")
        run.fault_counts = dict(counts)
        run.history = h = check_build(self.files.workdir, run.work, self.config.seed)
        run.fault_counts.update(
            {
                "late": h.late_results,
                "dup": h.duplicated_results,
                "reorder": h.reordered_results,
                "wrong-id": h.wrong_id_reports,
                "duplicate-candidates": h.refused_candidates + h.duplicate_dispatches,
            }
        )


def run_build(
    build: str,
    config: CampaignConfig,
    faults: Sequence[Fault],
    workdir: Path,
    progress: Progress = lambda line: None,
) -> BuildRun:
    """Run ``build`` to the end under the fault schedule, then check its history."""
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in workdir.iterdir():
        if stale.is_file():
            stale.unlink()
    files = BuildFiles(workdir)
    clock_doc = {"wall_offset": 0.0, "mono_origin": 0.0}
    files.clock.write_text(json.dumps(clock_doc))
    driver = _BuildDriver(
        build, config, faults, files, progress, BuildRun(build, config.work_items), list(faults)
    )
    driver.clock_doc, driver.start = clock_doc, time.time()
    with build_tree(build) as env:
        driver.drive(env)
    driver.finish()
    return driver.run


def run_campaign(
    config: CampaignConfig, workdir: Path, progress: Progress = lambda line: None
) -> CampaignResult:
    """Every build of the campaign, one after the other, on the same seed and schedule."""
    faults = schedule(config.seed, config.faults, config.ranks, config.ttl)
    start = time.time()
    runs = {}
    for build in config.builds:
        progress(
            f"[campaign] {build}: {config.work_items} items, {config.ranks} ranks, ttl "
            f"{config.ttl:g} s, {len(faults)} scheduled faults, seed {config.seed}"
            + (f", pipeline {config.pipeline}" if config.pipeline != 1 else "")
        )
        runs[build] = r = run_build(build, config, faults, workdir / build, progress)
        progress(
            f"[campaign] {build}: {'finished' if r.finished else 'NOT finished'} in "
            f"{r.seconds:.1f} s, {r.jobs} jobs; history "
            f"{'OK' if r.history.ok else 'VIOLATED'}"
        )
    result = CampaignResult(config, faults, runs, time.time() - start)
    result.window = max((r.seconds for r in runs.values()), default=0.0)
    result.targets = max((r.targets for r in runs.values()), default=0)
    return result
