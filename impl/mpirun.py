"""One ``leasefence run`` job: every rank calls ``run``; rank 0 becomes the master, the rest workers.

Exit status (the same on every rank: the master's STOP carries it to the workers)::

    0  every work item completed exactly once
    1  the run ended, but not every item completed exactly once: some were given up (failed
       ``max_failures`` times, or answered invalidly ``--max-invalid`` times), or a duplicate
       completion was counted
    2  bad usage (fewer than 2 MPI processes; argparse's own errors)
    3  a file could not be used: a missing or unwritable directory, a permission refused, a full
       disk, a corrupt journal or snapshot (one line on stderr names the file and the cause)
    4  the journal is locked: another master is running on it

On 3 and 4 the master stops the workers with the STOP sentinel before it exits (no
``MPI_Abort``, no traceback); nothing was written before the journal's lock was taken. Only an
unexpected error (a bug) still prints its traceback and aborts the job.
"""

from __future__ import annotations

import logging
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from leasefence.impl.errors import CoordinatorError, JournalError, JournalLocked, SnapshotError
from leasefence.impl.poll import PollPolicy, node_policy
from leasefence.impl.transport import (
    DispatchHooks,
    MpiTransport,
    Reply,
    master_dispatch,
    respond,
    stop_workers,
    worker_execute,
)
from leasefence.impl.wire import Rank, Result, Work, WorkId
from leasefence.impl.workload import WORKERS, WorkItem, generate, reached

if TYPE_CHECKING:
    # Imported where rank 0 uses them (``_master``): a worker rank, which runs only
    # ``worker_execute``, starts without the journal, coordinator and master modules (about
    # half of its start-up; issue 19).
    from leasefence.impl.master import CandidatePolicy, Master, ResultOutcome
    from leasefence.impl.trace import TraceWriter

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_FILES, EXIT_LOCKED = 0, 1, 2, 3, 4


@dataclass(frozen=True)
class RunConfig:
    """The options of one run (the ``leasefence run`` flags but the faults)."""

    work: int = 200
    seed: int = 0
    ttl: float = 30.0
    journal: Path | None = None
    snapshot: Path | None = None
    trace: Path | None = None
    worker: str = "z3"
    progress_every: float = 1.0
    # Pipelined dispatch (issue 12): dispatches per rank at once, and the owner token (None:
    # "rank" at depth 1, "generation" beyond). Depth 2 by default since issue 19: it won on
    # trivial and on z3 tasks (docs/performance.md, "Group commit"); up to 16 since, each rank given as many
    # as keep its last dispatch's wait within a quarter of the TTL (``Master.depth``); up to 64
    # since (fewer, larger group commits: docs/performance.md, "Depth 64"); up to 128 since,
    # with a loop turn taking at most half of what is in flight (docs/performance.md,
    # "Turns that leave the workers work").
    pipeline: int = 128
    fence: str | None = None
    # Invalid answers (messages the wire refuses) charged to one item before it is given up.
    max_invalid: int = 3
    # How every rank waits for its next message (``leasefence.impl.poll``: auto, spin, yield,
    # sleep, block).
    poll: str = "auto"
    # Group commit (issue 19): the decisions of one loop turn share one journal fsync and one
    # coordinator fsync, made before any WORK leaves (``Master.open(group_commit=...)``).
    group_commit: bool = True


class RunHooks(DispatchHooks):
    """What a harness plugs into ``run`` (``leasefence.harness.runjob``): the loop's
    ``DispatchHooks`` and the run's own. Every hook here is the plain run's (the no-op twin)."""

    def on_start(self) -> None:
        """Rank 0 is about to become the master (before anything else)."""

    def clock(self) -> float:
        """The master's Unix clock."""
        return time.time()

    def candidates(self, pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
        """The master's ``CandidatePolicy``: the pending work."""
        return pending

    def candidate_policy(self) -> CandidatePolicy:
        """The policy the master is opened with: ``pending_only`` itself unless a subclass
        overrides ``candidates`` (only the master's own ``pending_only`` takes its lazy queue,
        ``Master.dispatch_pending``; any other policy walks the whole catalogue every round)."""
        from leasefence.impl.master import pending_only  # rank 0 only (see the imports)

        if type(self).candidates is RunHooks.candidates:
            return pending_only
        return self.candidates

    def respond(self, result: Result, rank: int, attempt: int) -> Sequence[Reply]:
        """A worker's ``Respond``: the honest one."""
        return respond(result, rank, attempt)

    def on_open(self, master: Master, restarting: bool) -> None:
        """The master is open (``restarting``: on an existing journal)."""

    def on_end(self, master: Master) -> None:
        """The loop ended: every item completed or given up, or the rest starved
        (``Master.starved``: no step could settle them; the run then exits 1)."""

    def close(self) -> None:
        """The run is over (also after an error)."""

    def describe(self) -> str:
        """What the start line says of the faults (e.g. ``", inject late,dup"``)."""
        return ""

    def summary(self) -> list[tuple[str, str]]:
        """Lines the report prints before the wall time."""
        return []


class Coverage:
    """Distinct targets reached (verified witnesses) after each completed item: the coverage
    curve, and its area normalised to [0, 1] (the mean fraction of targets reached so far)."""

    def __init__(self) -> None:
        self.reached: set[str] = set()
        self.curve: list[int] = []

    def add(self, master: Master, result: Result, outcome: ResultOutcome) -> None:
        if outcome.stale or not outcome.work_ok or not result.ok:
            return
        item: WorkItem | None = master.catalogue.get(result.work_id)
        if item is not None and reached(item, result.output):
            self.reached.add(item.target)
        self.curve.append(len(self.reached))

    def auc(self) -> float:
        if not self.curve or not self.reached:
            return 0.0
        return sum(self.curve) / (len(self.curve) * len(self.reached))


class _Loop(DispatchHooks):
    """The run's own hooks around the harness's: the master running now (the one opened at
    start, or the last one an in-job restart replaced it with), coverage and progress lines."""

    def __init__(
        self, master: Master, hooks: RunHooks, start: float, every: float, err: TextIO
    ) -> None:
        self.master, self.hooks, self.err = master, hooks, err
        self.start, self.every, self.last = start, every, 0.0
        self.coverage = Coverage()

    def on_dispatch(self, master: Master, rank: Rank, work: Work) -> None:
        self.hooks.on_dispatch(master, rank, work)

    def on_result(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        self.coverage.add(master, result, outcome)
        self.hooks.on_result(master, rank, result, outcome)

    def restart_due(self, master: Master, sent: Sequence[tuple[Rank, Work]]) -> bool:
        return self.hooks.restart_due(master, sent)

    def on_restart(self, old: Master, new: Master) -> None:
        self.master = new
        self.hooks.on_restart(old, new)
        print(
            f"  master restarted in the job (epoch {getattr(new.coordinator, 'epoch', None)}; "
            f"{len(old.dispatches())} dispatches in flight forgotten)",
            file=self.err,
            flush=True,
        )

    def on_progress(self, master: Master) -> None:
        self.hooks.on_progress(master)
        now = time.monotonic()
        if now - self.last < self.every:
            return
        self.last = now
        c = master.counters
        done = master.summary()["completed_in_journal"]
        print(
            f"  [{now - self.start:6.1f} s] {done}/{len(master.catalogue)} completed, "
            f"{len(master.dispatches())} running, {c.refused_leases} refused leases, "
            f"{c.stale_results} stale, {c.wrong_owner_rejections} wrong-owner, "
            f"{len(self.coverage.reached)} targets reached",
            file=self.err,
            flush=True,
        )


def run(
    config: RunConfig,
    hooks: RunHooks | None = None,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Run the job on ``MPI.COMM_WORLD``; returns this rank's exit status."""
    from mpi4py import MPI

    hooks = hooks if hooks is not None else RunHooks()
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
    policy = node_policy(comm, config.poll)  # collective: every rank, before they part
    try:
        if comm.Get_rank() == 0:
            return _master(comm, config, hooks, out, err, policy)
        return worker_execute(comm, WORKERS[config.worker], respond=hooks.respond, poll=policy)
    except Exception:
        traceback.print_exc(file=err)
        err.flush()
        comm.Abort(EXIT_FAILED)  # never leave the other ranks waiting (does not return)


def expected_failure(exc: BaseException) -> tuple[int, str] | None:
    """The exit status and one-line message of a failure ``run`` expects (a file it cannot use,
    a journal locked by another master), or None for anything else (a bug: traceback)."""
    if isinstance(exc, JournalLocked):
        return EXIT_LOCKED, f"{exc}: is another master running on it?"
    if isinstance(exc, JournalError | SnapshotError):
        return EXIT_FILES, str(exc)
    if isinstance(exc, CoordinatorError) and isinstance(exc.__cause__, OSError):
        return EXIT_FILES, str(exc)
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename is not None else ""
        return EXIT_FILES, f"{where}{exc.strerror or exc}"
    return None


def make_parents(*paths: Path | None) -> None:
    """Create the missing parent directories of ``paths`` (0700; an ``OSError`` names the one
    that could not be made)."""
    for path in paths:
        if path is not None:
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def _master(
    comm: Any, config: RunConfig, hooks: RunHooks, out: TextIO, err: TextIO, poll: PollPolicy
) -> int:
    """Rank 0: run the master (waiting for messages as ``poll`` says); on an expected failure,
    say it in one line, stop the workers and return its exit status (module doc)."""
    logging.basicConfig(
        level=logging.WARNING, stream=err, format="leasefence %(levelname)s: %(message)s"
    )
    transport = MpiTransport(comm, poll)
    try:
        return _serve(transport, config, hooks, out, err)
    except Exception as exc:
        failure = expected_failure(exc)
        if failure is None:
            raise
        status, message = failure
        print(f"leasefence run: {message}", file=err, flush=True)
        if not stop_workers(transport, status):
            print("leasefence run: a worker did not stop in time; aborting", file=err, flush=True)
            comm.Abort(status)
        return status


def _serve(
    transport: MpiTransport, config: RunConfig, hooks: RunHooks, out: TextIO, err: TextIO
) -> int:
    """Open the master, run the loop to the end, report; the exit status."""
    from leasefence.impl.master import Master  # rank 0 only (see the imports)

    hooks.on_start()
    start = time.monotonic()
    catalogue = generate(config.work, config.seed)
    trace: TraceWriter | None = None
    try:
        with tempfile.TemporaryDirectory(prefix="leasefence-run-") as tmp:
            journal = config.journal or Path(tmp) / ".work_leases.jsonl"
            snapshot = config.snapshot or journal.with_name(journal.name + ".snapshot.json")
            make_parents(journal, snapshot, config.trace)
            # Touches no file before its first event, which comes after the journal's lock.
            trace = _trace_writer(config, catalogue, transport.worker_ranks)
            restarting = journal.exists() and journal.stat().st_size > 0
            master = Master.open(
                journal,
                snapshot,
                catalogue,
                ttl=config.ttl,
                trace=trace,
                clock=hooks.clock,
                max_invalid=config.max_invalid,
                pipeline=config.pipeline,
                fence=config.fence,
                candidates=hooks.candidate_policy(),
                group_commit=config.group_commit,
                depth_by_ttl=True,
            )
            loop = _Loop(master, hooks, start, config.progress_every, err)
            try:
                hooks.on_open(master, restarting)
                print(_banner(config, hooks, master, len(transport.worker_ranks)), file=err)
                err.flush()
                master = master_dispatch(master, transport, hooks=loop)
                summary = master.summary()
                # Liveness (EveryItemSettled): items neither completed nor given up.
                unsettled = master.unfinished()
                hooks.on_end(master)
            finally:
                loop.master.close()
    finally:
        if trace is not None:
            trace.close()
        hooks.close()
    lines = _report(master, summary, unsettled, loop.coverage, time.monotonic() - start)
    lines[-1:-1] = hooks.summary()
    print("leasefence run: done", file=out)
    for name, value in lines:
        print(f"  {name:<25}{value}", file=out)
    out.flush()
    c = master.counters
    ok = (
        c.duplicate_completions == 0
        and summary["completed_in_journal"] == len(catalogue)
        and c.given_up == 0
        and not unsettled
    )
    if unsettled:
        print(
            f"leasefence run: {len(unsettled)} item(s) neither completed nor given up, and no "
            f"step could change that ({', '.join(w[:12] for w in unsettled[:5])}"
            f"{', ...' if len(unsettled) > 5 else ''}): exit {EXIT_FAILED}",
            file=err,
            flush=True,
        )
    if c.given_up:
        gone = [w[:12] for w in master.catalogue if master.given_up(w)]
        print(
            f"leasefence run: {c.given_up} item(s) given up ({', '.join(gone[:5])}"
            f"{', ...' if len(gone) > 5 else ''}): exit {EXIT_FAILED}",
            file=err,
            flush=True,
        )
    return EXIT_OK if ok else EXIT_FAILED


def _trace_writer(
    config: RunConfig, catalogue: Sequence[WorkItem], ranks: Sequence[Rank]
) -> TraceWriter | None:
    """The run's trace writer, if it has a trace."""
    from leasefence.impl.master import default_fence  # rank 0 only (see the imports)
    from leasefence.impl.trace import TraceWriter

    if config.trace is None:
        return None
    return TraceWriter(
        config.trace,
        ttl=config.ttl,
        ranks=ranks,
        task_of={i.work_id: i.state_task_id for i in catalogue},
        pipeline=config.pipeline,
        fence=config.fence or default_fence(config.pipeline),
    )


def _banner(config: RunConfig, hooks: RunHooks, master: Master, workers: int) -> str:
    """The line a run starts with (on stderr)."""
    return (
        f"leasefence run: {len(master.catalogue)} work items, {workers} worker "
        f"ranks, ttl {config.ttl:g} s, seed {config.seed}, worker {config.worker}"
        + hooks.describe()
        + (f", pipeline {master.pipeline} ({master.fence} fence)" if master.pipeline > 1 else "")
        + f"; journal {config.journal or '(temporary)'}"
    )


def _report(
    master: Master,
    summary: dict[str, Any],
    unsettled: list[WorkId],
    coverage: Coverage,
    wall: float,
) -> list[tuple[str, str]]:
    """The lines of the final report, by name."""
    c = master.counters
    return [
        (
            "items completed",
            f"{c.completed} (journal: {summary['completed_in_journal']}/{len(master.catalogue)} "
            "completed)",
        ),
        ("duplicate completions", f"{c.duplicate_completions}"),
        ("refused leases", f"{c.refused_leases}"),
        ("refused reservations", f"{c.refused_reservations}"),
        ("wrong-owner rejections", f"{c.wrong_owner_rejections} (state: {c.state_rejections})"),
        ("stale results", f"{c.stale_results}"),
        ("ID mismatches", f"{c.id_mismatches}"),
        ("results without dispatch", f"{c.results_without_dispatch}"),
        (
            "malformed messages",
            f"{c.malformed_messages} ({c.invalid_results} dispatches expired after only "
            "invalid answers)",
        ),
        ("failed / given up", f"{c.failed} / {c.given_up}"),
        ("neither (starved)", f"{len(unsettled)}"),
        ("reclaimed leases", f"{c.reclaimed_work} work, {c.reclaimed_states} state"),
        ("solver CPU", f"{c.solver_cpu_s:.2f} s"),
        (
            "coverage",
            f"{len(coverage.reached)} distinct targets reached (AUC {coverage.auc():.3f})",
        ),
        ("dispatcher", _engine()),
        ("wall time", f"{wall:.2f} s"),
    ]


def _engine() -> str:
    """Whether the master runs the build of ``leasefence trace compile`` (``--engine``): its
    module loaded from an extension module, the test of ``harness.compiled.is_compiled`` (not
    imported: impl/ imports no harness)."""
    module = sys.modules.get("leasefence.impl.master")
    path = getattr(module, "__file__", None) or ""
    return "compiled" if path.endswith(tuple(EXTENSION_SUFFIXES)) else "interpreted"
