"""One contender of the dispatch benchmark, as an MPI job: round trips per second with trivial tasks.

Run as a module under ``mpiexec`` (``leasefence bench`` does this, one short job per contender
and repetition, interleaved)::

    mpiexec -n 3 python -m leasefence.harness.bench.mpi_job CONTENDER --tasks N --out RESULT.json
    mpiexec -n 3 python -m mpi4py.futures -m leasefence.harness.bench.mpi_job pool --tasks N \
        --out RESULT.json

Rank 0 times ``N`` round trips (one task out to a worker rank, one result back) after a short
warm-up and writes ``{"contender", "tasks", "seconds", "rate"}`` to RESULT.json (master
contenders add ``pipeline``, ``fence`` and what the master held, below). Contenders:

``master-always``  ``Master.open`` on a journal and snapshot in a temporary directory: fencing,
                   the dispatch transaction, a journal fsync per record and a coordinator
                   record appended and fsynced on every change (``leasefence run --sync
                   always``).
``master-group``   ``Master.open(..., group_commit=True, depth_by_ttl=True)`` at ``leasefence
                   run``'s default depth (64, each rank given as many as its gap between
                   results allows: ``Master.depth``), its defaults since issue 19:
                   ``master_dispatch`` decides on every result already waiting, then commits
                   the journal (one write, one fsync) and the coordinator (one append, one
                   fsync) before any WORK of that turn leaves.
``master-memory``  the same master over ``MemoryJournal`` and a coordinator without a snapshot:
                   the master's logic and the MPI loop, no disk (benchmark-only).
``master-run``     the in-memory master exactly as ``leasefence run`` configures it by default
                   (``RunConfig()``: generation fence, pipeline 64 with depth by TTL, group
                   commit, the run's TTL and reclaim period) over ``MemoryJournal`` and a
                   coordinator without a file: what a user's run costs on rank 0 without the
                   disk. ``master-memory`` stays the latency figure (one dispatch per rank).
``master-depth1``  ``master-memory`` with generation fencing (``fence="generation"``), still
                   ``pipeline=1``: the partner of ``master-depth2``.
``master-depth2``  the same with ``pipeline=2`` (issue 12): each worker rank holds up to two
                   dispatches, so its next WORK is already queued when it sends a RESULT.
                   Against ``master-depth1`` only the depth differs; against ``master-memory``
                   the fence differs too.
``bare``           a bare mpi4py loop: ``comm.recv(source=ANY_SOURCE)`` on rank 0, one pickled
                   message each way, blocking receives everywhere.
``bare-deep``      the ``bare`` loop keeping as many messages in flight per worker rank as the
                   run's pipeline allows (``RunConfig().pipeline``): the partner of
                   ``master-run`` that pipelines as it does.
``bare-poll``      the same loop receiving with ``Improbe`` + a growing sleep (0.2-5 ms: the
                   ``sleep`` poll mode, ``leasefence run``'s only one before issue 19),
                   which separates the polling policy from the master's logic.
``bare-transport`` ``master-run`` without the master: rank 0 waits as the master loop does
                   (``MpiTransport`` under ``--poll``: a wait, then every message already
                   waiting) and answers each RESULT with the next WORK to its rank, the real
                   WORK bytes of the catalogue encoded before the clock starts, in frames as
                   the master sends them (a frame of RESULTs answered by one of as many
                   WORKs), as deep as the run's pipeline; the worker ranks run the real
                   ``worker_execute``. Against
                   ``master-run`` the master's decisions differ (dispatch, journal,
                   coordinator, decoding the RESULT, encoding the WORK), and with them its
                   depth (``master-run`` ramps up by TTL, this is 64 deep from the start) and
                   when its clock starts (the frame holding the 20th result here, the end of that turn
                   there);
                   against ``bare``, the Python MPI path, the wire and the worker loop. With
                   fewer round trips than it keeps in flight (``--tasks`` + 20 at most 64 per
                   worker rank) every WORK leaves before the clock starts, which then times
                   only the draining: the benchmark runs it ten times ``--tasks``.

Master contenders and ``bare-transport`` wait for messages as ``--poll`` says (``leasefence run
--poll``, default ``auto``).
``pool``           ``mpi4py.futures.MPIPoolExecutor.map`` over the worker ranks.

Every master contender runs the real ``master_dispatch``/``worker_execute`` pair with
``trivial_worker``; the time is taken from the end of the loop turn in which the ``WARMUP``-th
item completed to the moment the master has every item completed (the STOP/BYE shutdown is not
counted). A master contender's RESULT.json also says how deep the pipeline really was:
``max_in_flight_per_rank``, the most dispatches one rank held at once, and
``mean_in_flight_per_rank``, the mean over the master loop's turns (each seen after the turn's
refill, in the timed part); its ``refused_leases`` (a dispatch refused because an adjacent
variant of the same state task is still in flight: more of them at depth 2, where four
dispatches are in flight instead of two); and ``master_cpu_s``, rank 0's CPU time over the
timed part (beside ``seconds``: whether the master was busy or waiting). Master contenders and
``bare-transport`` add ``worker_cpu_s``, the CPU time of every worker rank over its whole loop
(spinning while it waits included), for ``worker_round_trips`` round trips (the warm-up's
included): with ``master_cpu_s``, what one round trip costs each side.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from mpi4py import MPI

CONTENDERS = (
    "master-always",
    "master-group",
    "master-memory",
    "master-run",
    "master-depth1",
    "master-depth2",
    "bare",
    "bare-deep",
    "bare-poll",
    "bare-transport",
    "pool",
)
#: The in-memory master contenders: (pipeline depth, fence); None is the master's default
#: (rank fencing at depth 1, F314's setting).
MEMORY_MASTERS: dict[str, tuple[int, str | None]] = {
    "master-memory": (1, None),
    "master-depth1": (1, "generation"),
    "master-depth2": (2, "generation"),
}
WARMUP = 20


def trivial(x: int) -> int:
    """The pool's task: answers at once."""
    return x


# -- the master contenders ---------------------------------------------------------------------


#: What rank 0 of a master contender runs per task: ``compiled`` in its result lists those of
#: them loaded from a build.
RANK0_MODULES = (
    "leasefence.impl.master",
    "leasefence.impl.transport",
    "leasefence.impl.coordinator",
    "leasefence.impl.wire",
    "leasefence.harness.bench.memory_journal",
)


def master_job(
    comm: Any, contender: str, tasks: int, out: Path, poll: Any, pipeline: int | None = None
) -> dict[str, Any]:
    from leasefence.harness.bench.memory_journal import MemoryJournal
    from leasefence.harness.compiled import is_compiled
    from leasefence.impl.coordinator import StateShardCoordinator
    from leasefence.impl.master import Master, StepClock
    from leasefence.impl.transport import DispatchHooks, MpiTransport, master_dispatch
    from leasefence.impl.workload import generate

    catalogue = generate(tasks + WARMUP, seed=0)
    with tempfile.TemporaryDirectory(prefix="leasefence-bench-", dir=out.parent) as tmp:
        journal_path = Path(tmp) / "journal.jsonl"
        snapshot = Path(tmp) / "snapshot.json"
        transport: Any
        if contender == "master-always":
            master = Master.open(
                journal_path, snapshot, catalogue, ttl=3600.0, pipeline=pipeline or 1
            )
            transport = MpiTransport(comm, poll)
        elif contender == "master-group":
            from leasefence.impl.mpirun import RunConfig

            master = Master.open(
                journal_path, snapshot, catalogue, ttl=3600.0, group_commit=True,
                pipeline=pipeline or RunConfig().pipeline, depth_by_ttl=True,
            )  # fmt: skip
            transport = MpiTransport(comm, poll)
        elif contender == "master-run":
            from leasefence.impl.mpirun import RunConfig

            config, clock = RunConfig(), StepClock()
            master = Master(
                MemoryJournal(clock), StateShardCoordinator(None, clock=clock, autosave=False),
                catalogue, ttl=config.ttl, clock=clock, pipeline=config.pipeline,
                fence=config.fence, group_commit=config.group_commit, depth_by_ttl=True,
            )  # fmt: skip
            transport = MpiTransport(comm, poll)
        else:
            pipeline, fence = MEMORY_MASTERS[contender]
            clock = StepClock()
            master = Master(
                MemoryJournal(clock), StateShardCoordinator(None, clock=clock), catalogue,
                ttl=3600.0, clock=clock, pipeline=pipeline, fence=fence,
            )  # fmt: skip
            transport = MpiTransport(comm, poll)
        marks: dict[str, float] = {}
        # Dispatches per rank, seen after each refill of the timed part (every master contender
        # pays for this count, so the depth 1 and depth 2 contenders pay alike).
        depth = {"max": 0, "sum": 0, "samples": 0}
        ranks = len(transport.worker_ranks)

        def progress(m: Any) -> None:
            done = m.counters.completed
            if "start" not in marks and done >= WARMUP:
                marks["start"] = time.perf_counter()
                marks["cpu_start"] = time.process_time()
                marks["at"] = done
            if "start" in marks and "end" not in marks:
                held = m.held_by_rank()
                depth["max"] = max(depth["max"], max(held.values(), default=0))
                depth["sum"] += sum(held.values())
                depth["samples"] += ranks
            if "end" not in marks and m.finished:
                marks["end"] = time.perf_counter()
                marks["cpu_end"] = time.process_time()

        class Progress(DispatchHooks):
            def on_progress(self, master: Any) -> None:
                progress(master)

        if contender == "master-run":  # the loop's own defaults, as ``leasefence run`` calls it
            master_dispatch(master, transport, hooks=Progress())
        else:
            master_dispatch(master, transport, poll=0.05, reclaim_every=3600.0, hooks=Progress())
        master.close()
    timed = tasks + WARMUP - int(marks["at"])
    seconds = marks["end"] - marks["start"]
    extra: dict[str, Any] = {
        "pipeline": master.pipeline,
        "fence": master.fence,
        "max_in_flight_per_rank": depth["max"],
        "mean_in_flight_per_rank": depth["sum"] / max(depth["samples"], 1),
        "master_cpu_s": marks["cpu_end"] - marks["cpu_start"],
        "refused_leases": master.counters.refused_leases,
        "stale_results": master.counters.stale_results,
        "duplicate_completions": master.counters.duplicate_completions,
        # the master's modules this job ran from a build (``--engine compiled``): its
        # decisions, its loop, and its journal
        "compiled": [m for m in RANK0_MODULES if is_compiled(sys.modules[m])],
    }
    return result(contender, timed, seconds, **extra)


def master_worker(comm: Any, poll: Any) -> None:
    from leasefence.impl.transport import worker_execute
    from leasefence.impl.workload import trivial_worker

    worker_execute(comm, trivial_worker, poll=poll)


# -- the bare loops ----------------------------------------------------------------------------


def _poll_recv(comm: Any, source: int) -> tuple[Any, int]:
    from leasefence.impl.poll import PollPolicy
    from leasefence.impl.transport import mpi_receive

    sleep = PollPolicy.of("sleep", oversubscribed=False)  # Improbe + 0.2-5 ms sleeps
    while (env := mpi_receive(comm, source, 1.0, sleep)) is None:
        pass
    return int.from_bytes(env.data, "big"), env.source


def bare_master(comm: Any, tasks: int, poll: bool, out: Path, depth: int = 1) -> None:
    """Rank 0 of a bare loop: ``depth`` messages in flight per worker rank, a new one sent to
    each rank that answers."""
    workers = range(1, comm.Get_size())
    total = tasks + WARMUP
    sent = received = 0
    status = MPI.Status()
    start = 0.0

    def send(dest: int, value: int) -> None:
        if poll:
            comm.Send([value.to_bytes(8, "big"), MPI.BYTE], dest=dest, tag=1)
        else:
            comm.send(value, dest=dest)

    for _ in range(depth):
        for w in workers:
            if sent < total:
                send(w, sent)
                sent += 1
    while received < total:
        if poll:
            _, source = _poll_recv(comm, MPI.ANY_SOURCE)
        else:
            comm.recv(source=MPI.ANY_SOURCE, status=status)
            source = status.Get_source()
        received += 1
        if received == WARMUP:
            start = time.perf_counter()
        if sent < total:
            send(source, sent)
            sent += 1
    seconds = time.perf_counter() - start
    for w in workers:
        if poll:
            comm.Send([(2**63).to_bytes(8, "big"), MPI.BYTE], dest=w, tag=1)
        else:
            comm.send(None, dest=w)
    name = "bare-poll" if poll else "bare" if depth == 1 else "bare-deep"
    report(out, name, total - WARMUP, seconds, **({"depth": depth} if depth > 1 else {}))


def bare_worker(comm: Any, poll: bool) -> None:
    while True:
        if poll:
            value, _ = _poll_recv(comm, 0)
            if value == 2**63:
                return
            comm.Send([value.to_bytes(8, "big"), MPI.BYTE], dest=0, tag=2)
        else:
            got = comm.recv(source=0)
            if got is None:
                return
            comm.send(got, dest=0)


def transport_master(comm: Any, tasks: int, poll: Any) -> dict[str, Any]:
    """Rank 0 of ``bare-transport`` (module doc): the master loop's waiting and sending without
    its decisions."""
    from leasefence.impl.mpirun import RunConfig
    from leasefence.impl.transport import MpiTransport, mpi_send, stop_workers
    from leasefence.impl.wire import Tag, encode, frames, split_frame
    from leasefence.impl.workload import generate

    total, depth = tasks + WARMUP, RunConfig().pipeline
    works = [encode(item.work((0, i)))[1] for i, item in enumerate(generate(total, seed=0))]
    transport = MpiTransport(comm, poll)
    sent = received = at = 0
    start = cpu_start = 0.0

    def send(rank: int, n: int) -> None:
        """The next ``n`` WORKs to ``rank``, in frames as the master sends them."""
        nonlocal sent
        n = min(n, total - sent)
        for frame in frames(works[sent : sent + n], transport.frame_bytes):
            mpi_send(comm, rank, Tag.WORK, frame)
        sent += n

    for rank in transport.worker_ranks:
        send(rank, depth)
    while received < total:
        env, answered = transport.receive(0.05), Counter[int]()
        while env is not None:  # a wait, then every message already waiting, as the master
            n = len(split_frame(env.tag, env.data))
            received += n
            answered[env.source] += n
            if not at and received >= WARMUP:
                start, cpu_start, at = time.perf_counter(), time.process_time(), received
            env = transport.ready()
        for source, n in answered.items():
            send(source, n)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    if not stop_workers(transport, 0):
        raise RuntimeError("bare-transport: a worker did not say BYE")
    return result("bare-transport", total - at, seconds, master_cpu_s=cpu, depth=depth)


# -- MPIPoolExecutor ---------------------------------------------------------------------------


def pool_job(tasks: int, out: Path) -> None:
    from mpi4py.futures import MPIPoolExecutor

    with MPIPoolExecutor() as pool:
        pool.bootup()
        list(pool.map(trivial, range(WARMUP)))
        start = time.perf_counter()
        results = list(pool.map(trivial, range(tasks)))
        seconds = time.perf_counter() - start
    assert results == list(range(tasks))
    report(out, "pool", tasks, seconds)


def result(contender: str, tasks: int, seconds: float, **extra: Any) -> dict[str, Any]:
    """A contender's RESULT.json document."""
    doc = {"contender": contender, "tasks": tasks, "seconds": seconds, "rate": tasks / seconds}
    return {**doc, **extra}


def report(out: Path, contender: str, tasks: int, seconds: float, **extra: Any) -> None:
    out.write_text(json.dumps(result(contender, tasks, seconds, **extra)) + "\n")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("contender", choices=CONTENDERS)
    p.add_argument("--tasks", type=int, default=300)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument(
        "--poll",
        default="auto",
        help="master contenders and bare-transport: leasefence run's --poll",
    )
    p.add_argument(
        "--pipeline", type=int, default=None, help="durable master contenders: the pipeline depth"
    )
    p.add_argument(
        "--engine",
        choices=("interpreted", "compiled"),
        default="interpreted",
        help="the dispatcher's modules on every rank: interpreted, or the build of "
        "`leasefence trace compile` for these sources (leasefence run --engine)",
    )
    args = p.parse_args()
    from leasefence.harness.compiled import EVERY_RANK, EngineError, activate

    try:
        activate(args.engine, EVERY_RANK)  # before any of them is imported
    except EngineError as exc:  # no build for these sources, or one that does not load
        sys.exit(f"mpi_job: {exc}")
    comm = MPI.COMM_WORLD
    if args.contender == "pool":
        pool_job(args.tasks, args.out)
        return
    if comm.Get_size() < 2:
        sys.exit("mpi_job: needs mpiexec -n 2 or more")
    rank = comm.Get_rank()
    if args.contender.startswith("master") or args.contender == "bare-transport":
        from leasefence.impl.poll import node_policy

        policy = node_policy(comm, args.poll)  # collective, before the ranks part
        if rank != 0:
            cpu = time.process_time()
            master_worker(comm, policy)
            comm.gather(time.process_time() - cpu, root=0)  # collective, after the ranks part
            return
        try:
            if args.contender == "bare-transport":
                doc = transport_master(comm, args.tasks, policy)
            else:
                doc = master_job(comm, args.contender, args.tasks, args.out, policy, args.pipeline)
        except BaseException:
            # the workers may have said BYE already and wait in the gather below: end the job
            # instead of leaving them there (under a launcher that would not)
            traceback.print_exc()
            comm.Abort(1)
        # every worker rank's CPU over its whole loop (warm-up and shutdown included), beside
        # the master's over the timed part: what a round trip costs on each side
        gathered = comm.gather(0.0, root=0)
        assert gathered is not None  # (a list on the root)
        doc["worker_cpu_s"], doc["worker_round_trips"] = sum(gathered[1:]), args.tasks + WARMUP
        args.out.write_text(json.dumps(doc) + "\n")
    else:
        poll = args.contender == "bare-poll"
        if rank == 0:
            depth = 1
            if args.contender == "bare-deep":
                from leasefence.impl.mpirun import RunConfig

                depth = RunConfig().pipeline
            bare_master(comm, args.tasks, poll, args.out, depth)
        else:
            bare_worker(comm, poll)


if __name__ == "__main__":
    main()
