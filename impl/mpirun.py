"""One ``leasefence run`` job: every rank calls ``run``; rank 0 becomes the master, the rest workers."""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from leasefence.impl.master import Master, default_fence
from leasefence.impl.trace import TraceWriter
from leasefence.impl.transport import (
    Injection,
    MpiTransport,
    RestartFault,
    master_dispatch,
    worker_execute,
)
from leasefence.impl.wire import Result
from leasefence.impl.workload import WORKERS, WorkItem, generate, reached

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


@dataclass(frozen=True)
class RunConfig:
    """The options of one run (the ``leasefence run`` flags)."""

    work: int = 200
    seed: int = 0
    ttl: float = 30.0
    journal: Path | None = None
    snapshot: Path | None = None
    trace: Path | None = None
    inject: Injection = field(default_factory=Injection)
    worker: str = "z3"
    late_s: float | None = None  # default: 1.5 x ttl
    progress_every: float = 1.0
    # Fault injection for campaigns (``leasefence campaign``); all off by default.
    clock_file: Path | None = None
    compact_every: int = 0
    events: Path | None = None
    duplicate_candidates: float = 0.0
    # Pipelined dispatch (issue 12): dispatches per rank at once, and the owner token (None:
    # "rank" at depth 1, "generation" beyond).
    pipeline: int = 1
    fence: str | None = None
    # ``--inject restart``: results handled between in-job master restarts (``RestartFault``).
    restart_every: int = 10


class InjectedClock:
    """The master's Unix clock with faults read from a JSON file at each reading (``--clock-file``).

    ``{"wall_offset": S, "mono_origin": M}``: ``wall_offset`` seconds are added to ``time.time()``
    (a step forward or back of the wall clock); ``mono_origin`` is a reading of the host's
    monotonic clock taken at a simulated reboot, applied once when the master starts (see
    ``simulate_reboot``). A missing or unreadable file is no fault.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, float]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {k: float(v) for k, v in doc.items() if isinstance(v, int | float)}

    def __call__(self) -> float:
        return time.time() + self.read().get("wall_offset", 0.0)


def simulate_reboot(origin: float) -> None:
    """A host reboot as this process sees it: ``time.monotonic()`` counts from ``origin`` (a
    monotonic reading taken at the simulated boot), as if the machine had booted then. The offset
    is constant for the life of the process, so the clock stays monotonic; only code that
    persists monotonic readings (F314 defect 3) can tell."""
    real = time.monotonic
    if origin <= 0 or origin > real():
        return
    time.monotonic = lambda: real() - origin


class EventLog:
    """The campaign's measurement log (``--events``): one NDJSON line per master start, dispatch
    sent, result handled and compaction, stamped with the real (uninjected) Unix time."""

    def __init__(self, path: Path) -> None:
        self._fh = path.open("a", encoding="utf-8")

    def write(self, kind: str, **fields: Any) -> None:
        fields.update(kind=kind, t=time.time())
        self._fh.write(json.dumps(fields, separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class _LoggedTransport:
    """A transport that logs every WORK it sends (the dispatches actually sent)."""

    def __init__(self, inner: MpiTransport, log: EventLog) -> None:
        self.inner, self.log = inner, log

    @property
    def worker_ranks(self) -> tuple[Any, ...]:
        return self.inner.worker_ranks

    def send(self, rank: Any, msg: Any) -> None:
        self.inner.send(rank, msg)
        work_id = getattr(msg, "work_id", None)
        if work_id is not None:
            self.log.write("dispatch", r=int(rank), w=work_id)

    def receive(self, timeout: float) -> Any:
        return self.inner.receive(timeout)


class _Live:
    """The master now running: the one opened at start, or the last one an in-job restart
    (``--inject restart``) replaced it with. Callbacks reach the master through it."""

    def __init__(self, master: Master) -> None:
        self.master = master


class Coverage:
    """Distinct targets reached (verified witnesses) after each completed item: the coverage
    curve, and its area normalised to [0, 1] (the mean fraction of targets reached so far)."""

    def __init__(self, master: Master) -> None:
        self.master = master
        self.reached: set[str] = set()
        self.curve: list[int] = []

    def __call__(self, result: Result, outcome: Any) -> None:
        if outcome.stale or not outcome.work_ok or not result.ok:
            return
        item: WorkItem | None = self.master.catalogue.get(result.work_id)
        if item is not None and reached(item, result.output):
            self.reached.add(item.target)
        self.curve.append(len(self.reached))

    def auc(self) -> float:
        if not self.curve or not self.reached:
            return 0.0
        return sum(self.curve) / (len(self.curve) * len(self.reached))


def run(config: RunConfig, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run the job on ``MPI.COMM_WORLD``; returns this rank's exit status."""
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    if comm.Get_size() < 2:
        if comm.Get_rank() == 0:
            print(
                f"leasefence run: needs at least 2 MPI processes (rank 0 is the master, the "
                f"others are workers), got {comm.Get_size()}; start it as "
                f"`mpiexec -n 4 leasefence run --work {config.work}`",
                file=err,
            )
        return EXIT_USAGE
    try:
        if comm.Get_rank() == 0:
            return _master(comm, config, out, err)
        worker_execute(
            comm,
            WORKERS[config.worker],
            inject=config.inject,
            late_s=config.late_s if config.late_s is not None else 1.5 * config.ttl,
        )
        return EXIT_OK
    except Exception:
        traceback.print_exc(file=err)
        err.flush()
        comm.Abort(EXIT_FAILED)  # never leave the other ranks waiting (does not return)


def _master(comm: Any, config: RunConfig, out: TextIO, err: TextIO) -> int:
    logging.basicConfig(
        level=logging.WARNING, stream=err, format="leasefence %(levelname)s: %(message)s"
    )
    injected = InjectedClock(config.clock_file) if config.clock_file is not None else None
    if injected is not None:
        simulate_reboot(injected.read().get("mono_origin", 0.0))
    start = time.monotonic()
    catalogue = generate(config.work, config.seed)
    events = EventLog(config.events) if config.events is not None else None
    transport: Any = MpiTransport(comm)
    if events is not None:
        transport = _LoggedTransport(transport, events)
    with tempfile.TemporaryDirectory(prefix="leasefence-run-") as tmp:
        journal = config.journal or Path(tmp) / ".work_leases.jsonl"
        snapshot = config.snapshot or journal.with_name(journal.name + ".snapshot.json")
        trace = None
        if config.trace is not None:
            trace = TraceWriter(
                config.trace,
                ttl=config.ttl,
                ranks=transport.worker_ranks,
                task_of={i.work_id: i.state_task_id for i in catalogue},
                pipeline=config.pipeline,
                fence=config.fence or default_fence(config.pipeline),
            )
        restarting = journal.exists() and journal.stat().st_size > 0
        master = Master.open(
            journal,
            snapshot,
            catalogue,
            ttl=config.ttl,
            trace=trace,
            clock=injected if injected is not None else time.time,
            pipeline=config.pipeline,
            fence=config.fence,
        )
        master.duplicate_candidates = config.duplicate_candidates
        master.duplicate_rng = random.Random(f"{config.seed}/duplicate-candidates")
        live = _Live(master)
        coverage = Coverage(master)
        on_result: Callable[[Result, Any], None] = coverage
        if events is not None:
            events.write("start", pid=os.getpid(), restart=restarting)
            on_result = _logged(live, coverage, events, config.compact_every)
        restart = RestartFault(config.restart_every) if "restart" in config.inject.kinds else None

        def on_restart(old: Master, new: Master) -> None:
            live.master = coverage.master = new
            epoch = getattr(new.coordinator, "epoch", None)
            if events is not None:
                events.write("restart", epoch=epoch, in_flight=len(old.dispatches()))
            print(
                f"  master restarted in the job (epoch {epoch}; {len(old.dispatches())} "
                "dispatches in flight forgotten)",
                file=err,
                flush=True,
            )

        print(
            f"leasefence run: {len(catalogue)} work items, {len(transport.worker_ranks)} worker "
            f"ranks, ttl {config.ttl:g} s, seed {config.seed}, worker {config.worker}"
            + (f", inject {','.join(sorted(config.inject.kinds))}" if config.inject.kinds else "")
            + (
                f", pipeline {master.pipeline} ({master.fence} fence)"
                if master.pipeline > 1
                else ""
            )
            + f"; journal {config.journal or '(temporary)'}",
            file=err,
            flush=True,
        )
        try:
            master = master_dispatch(
                master,
                transport,
                on_result=on_result,
                progress=_progress(start, config.progress_every, coverage, err),
                restart=restart,
                on_restart=on_restart,
            )
            summary = master.summary()
            if events is not None:
                events.write("end", **master.counters.as_dict())
        finally:
            live.master.close()
            if trace is not None:
                trace.close()
            if events is not None:
                events.close()
    wall = time.monotonic() - start
    c = master.counters
    lines = [
        (
            "items completed",
            f"{c.completed} (journal: {summary['completed_in_journal']}/{len(catalogue)} completed)",
        ),
        ("duplicate completions", f"{c.duplicate_completions}"),
        ("refused leases", f"{c.refused_leases}"),
        ("refused reservations", f"{c.refused_reservations}"),
        ("wrong-owner rejections", f"{c.wrong_owner_rejections} (state: {c.state_rejections})"),
        ("stale results", f"{c.stale_results}"),
        ("ID mismatches", f"{c.id_mismatches}"),
        ("results without dispatch", f"{c.results_without_dispatch}"),
        ("malformed messages", f"{c.malformed_messages}"),
        ("failed / given up", f"{c.failed} / {c.given_up}"),
        ("reclaimed leases", f"{c.reclaimed_work} work, {c.reclaimed_states} state"),
        ("solver CPU", f"{c.solver_cpu_s:.2f} s"),
        (
            "coverage",
            f"{len(coverage.reached)} distinct targets reached (AUC {coverage.auc():.3f})",
        ),
        ("wall time", f"{wall:.2f} s"),
    ]
    if restart is not None:
        lines[-1:-1] = [
            ("master restarts", f"{restart.restarts} in the job (every {restart.every} results)"),
            (
                "results across a restart",
                f"{restart.crossed} ({restart.crossed_refused} refused or stale, "
                f"{restart.state_taken} took the state task of another live dispatch)",
            ),
        ]
    print("leasefence run: done", file=out)
    for name, value in lines:
        print(f"  {name:<25}{value}", file=out)
    out.flush()
    ok = (
        c.duplicate_completions == 0
        and summary["completed_in_journal"] == len(catalogue)
        and c.given_up == 0
    )
    return EXIT_OK if ok else EXIT_FAILED


def _logged(
    live: _Live, coverage: Coverage, events: EventLog, compact_every: int
) -> Callable[[Result, Any], None]:
    """``on_result`` for campaigns: coverage, one ``result`` line per result handled, and a
    journal compaction after every ``compact_every`` accepted completions."""
    done = [0]

    def on_result(result: Result, outcome: Any) -> None:
        master = live.master
        coverage(result, outcome)
        item = master.catalogue.get(result.work_id)
        accepted = not outcome.stale and outcome.work_ok and result.ok
        events.write(
            "result",
            w=result.work_id,
            ok=result.ok,
            cpu_s=result.cpu_s,
            stale=outcome.stale,
            work_ok=outcome.work_ok,
            state_ok=outcome.state_ok,
            reached=item.target
            if accepted and item is not None and reached(item, result.output)
            else None,
        )
        if outcome.work_ok and result.ok:
            done[0] += 1
            if compact_every and done[0] % compact_every == 0:
                compact = getattr(master.journal, "compact", None)
                if compact is not None:
                    compact()
                    events.write("compact")

    return on_result


def _progress(
    start: float, every: float, coverage: Coverage, err: TextIO
) -> Callable[[Master], None]:
    last = [0.0]

    def show(master: Master) -> None:
        now = time.monotonic()
        if now - last[0] < every:
            return
        last[0] = now
        c = master.counters
        done = master.summary()["completed_in_journal"]
        print(
            f"  [{now - start:6.1f} s] {done}/{len(master.catalogue)} completed, "
            f"{len(master.dispatches())} running, {c.refused_leases} refused leases, "
            f"{c.stale_results} stale, {c.wrong_owner_rejections} wrong-owner, "
            f"{len(coverage.reached)} targets reached",
            file=err,
            flush=True,
        )

    return show
