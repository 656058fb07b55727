"""The ``dispatch`` benchmark's driver: one short ``mpiexec -n 3`` job (``--ranks``) of ``mpi_job`` per contender and repetition, interleaved."""

from __future__ import annotations

import json
import shutil
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import Sizes, fmt, interleave, median, whole_job

#: The MPI job of one contender, run as a module (it ships in the package).
MPI_JOB = "leasefence.harness.bench.mpi_job"
#: The contenders, in the order they are interleaved.
DISPATCH = (
    "bare",
    "bare-deep",
    "bare-poll",
    "bare-transport",
    "master-memory",
    "master-run",
    "master-depth1",
    "master-depth2",
    "master-always",
    "master-group",
    "pool",
)
#: Contenders that are another contender with the dispatcher compiled (``leasefence run
#: --engine compiled``, on every rank), run only when there is a build for these sources
#: (``leasefence trace compile``): the compiled name, the contender it compiles.
COMPILED_TWINS = {"master-run-compiled": "master-run"}
#: The pipelined contenders (``master-run``, ``bare-deep``) run this many times ``Sizes.tasks``:
#: 64 deep per rank, a job of ``tasks`` round trips would be mostly its ramp (depth 2 until a
#: rank's gap between results is known) and its drain. So does ``bare``, the goal's yardstick
#: for ``master-run``: at ``tasks`` round trips (400 by default, a few milliseconds) one
#: descheduled rank decided its rate, which ranged from 2,800 to 145,000 round trips/s
#: (2026-12-03, 4 ranks on 2 cores), and with it the goal's ratio.
DEEP_TASKS_FACTOR = 10
#: The contenders run ``DEEP_TASKS_FACTOR`` times ``Sizes.tasks`` round trips.
LONG_JOBS = ("master-run", "master-run-compiled", "bare-deep", "bare", "bare-transport")
#: The contender the issue's goal reads (in-memory master / bare blocking loop): the master as
#: ``leasefence run`` configures it by default, which is what a user runs.
GOAL_MASTER = "master-run"


def mpiexec() -> str | None:
    """``mpiexec`` beside this Python (the mpich wheel puts it in the virtualenv), or on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.is_file() else shutil.which("mpiexec")


def _dispatch_job(
    contender: str,
    tasks: int,
    where: Path,
    timeout: float = 120.0,
    *,
    ranks: int = 3,
    poll: str = "auto",
) -> dict[str, Any]:
    """One contender's ``mpiexec -n RANKS`` job, master contenders waiting as ``poll`` says; its
    RESULT.json (``rate`` and, for a master contender, the pipeline depth it reached). A
    contender of ``COMPILED_TWINS`` is its twin's job with ``--engine compiled``."""
    launcher = mpiexec()
    if launcher is None:
        raise RuntimeError("no mpiexec beside this Python or on PATH")
    out = where / f"{contender}.json"
    out.unlink(missing_ok=True)
    engine = "compiled" if contender in COMPILED_TWINS else "interpreted"
    contender = COMPILED_TWINS.get(contender, contender)
    python = [sys.executable, "-m", "mpi4py.futures"] if contender == "pool" else [sys.executable]
    cmd = [
        launcher,
        "-n",
        str(ranks),
        *python,
        "-m",
        MPI_JOB,
        contender,
        "--tasks",
        str(tasks),
        "--out",
        str(out),
        "--poll",
        poll,
        *(() if contender == "pool" else ("--engine", engine)),
    ]
    whole_job(cmd, timeout)
    if not out.is_file():
        raise RuntimeError(f"{' '.join(cmd)} exited 0 without writing {out}")
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def bench_dispatch(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Every contender of ``DISPATCH``, interleaved. ``depth2_over_depth1`` is the throughput of
    pipeline depth 2 over depth 1, both on the in-memory journal with generation fencing (only
    the depth differs); ``max_in_flight_per_rank`` and ``mean_in_flight_per_rank`` say how
    deep each master contender's pipeline really was (the most and the mean dispatches per
    rank, over repetitions), ``master_busy`` the median share of the timed wall time rank 0
    spent on its CPU (near 1: the master's own work bounds the rate; far below: waiting), for
    the master contenders and ``bare-transport``, and ``cpu_us_per_round_trip`` their CPU per
    round trip on rank 0 and on the workers together, in microseconds."""
    from leasefence.harness.compiled import built

    docs: dict[str, list[dict[str, Any]]] = {}
    contenders: tuple[str, ...] = DISPATCH
    if built() is None:
        say(
            f"  no compiled dispatcher for these sources: {', '.join(COMPILED_TWINS)} not run "
            "(`make compile` builds it)"
        )
    else:
        contenders += tuple(COMPILED_TWINS)

    def job(name: str) -> Callable[[int], float]:
        n = sizes.durable_tasks if name in ("master-always", "master-group") else sizes.tasks
        if name in LONG_JOBS:
            n = sizes.tasks * DEEP_TASKS_FACTOR

        def run(rep: int) -> float:
            doc = _dispatch_job(name, n, where, ranks=sizes.ranks)
            rate = float(doc["rate"])
            if "master_cpu_s" in doc:
                docs.setdefault(name, []).append(doc)
            say(f"    {name:<19} {fmt(rate):>8} round trips/s")
            return rate

        return run

    runs = interleave({name: job(name) for name in contenders}, sizes.dispatch_repeats)
    med = {k: median(v) for k, v in runs.items()}
    say("  medians: " + ", ".join(f"{k} {fmt(v)}" for k, v in med.items()) + " round trips/s")
    depth2_over_depth1 = med["master-depth2"] / med["master-depth1"]
    masters = {k: v for k, v in docs.items() if k.startswith("master")}
    max_in_flight = {
        k: max(int(d["max_in_flight_per_rank"]) for d in v) for k, v in masters.items()
    }
    mean_in_flight = {
        k: statistics.fmean(float(d["mean_in_flight_per_rank"]) for d in v)
        for k, v in masters.items()
    }
    busy = {k: median([d["master_cpu_s"] / d["seconds"] for d in v]) for k, v in docs.items()}
    # CPU per round trip, microseconds: rank 0 over the timed part, the worker ranks together
    # over their whole loops (medians over repetitions)
    cpu_us = {
        k: {
            "master": median([1e6 * d["master_cpu_s"] / max(d["tasks"], 1) for d in v]),
            "workers": median([1e6 * d["worker_cpu_s"] / d["worker_round_trips"] for d in v]),
        }
        for k, v in docs.items()
        if all("worker_cpu_s" in d for d in v)
    }

    def depth(k: str) -> str:
        return f"max {max_in_flight[k]}, mean {mean_in_flight[k]:.2f}, master busy {busy[k]:.0%}"

    say(
        f"  depth 2 / depth 1 throughput: {fmt(depth2_over_depth1)}x (in-memory journal, "
        f"generation fence; dispatches in flight per rank, depth 1: {depth('master-depth1')}; "
        f"depth 2: {depth('master-depth2')})"
    )
    say(
        f"  goal: in-memory master as `leasefence run` runs it ({GOAL_MASTER}: generation "
        f"fence, depth by TTL up to its pipeline, {depth(GOAL_MASTER)}) / bare blocking loop, "
        f"time per round trip {fmt(med['bare'] / med[GOAL_MASTER])}x; against a bare loop "
        f"as deep (bare-deep) {fmt(med['bare-deep'] / med[GOAL_MASTER])}x; the depth-1 master "
        f"(master-memory, F314's rank fence: the latency figure) "
        f"{fmt(med['bare'] / med['master-memory'])}x"
    )
    if GOAL_MASTER in cpu_us and "bare-transport" in cpu_us:
        run_cpu, transport_cpu = cpu_us[GOAL_MASTER], cpu_us["bare-transport"]
        say(
            f"  what a round trip costs: {GOAL_MASTER} {1e6 / med[GOAL_MASTER]:.1f} us "
            f"(rank 0 {run_cpu['master']:.1f} us of CPU, the workers "
            f"{run_cpu['workers']:.1f} us); bare-transport, the same loop and workers without "
            f"the master's decisions, {1e6 / med['bare-transport']:.1f} us (rank 0 "
            f"{transport_cpu['master']:.1f} us, the workers {transport_cpu['workers']:.1f} "
            f"us); bare {1e6 / med['bare']:.1f} us"
        )
    (twin,) = COMPILED_TWINS
    compiled: dict[str, float] = {}
    if twin in med:
        compiled = {
            "run_compiled_over_bare_time": med["bare"] / med[twin],
            "run_compiled_over_run_time": med[twin] / med[GOAL_MASTER],
        }
        cpu = cpu_us.get(twin, {})
        say(
            f"  compiled (`make compile`, every rank): {twin} / bare, time per round trip "
            f"{fmt(compiled['run_compiled_over_bare_time'])}x; {fmt(compiled['run_compiled_over_run_time'])}x "
            f"the interpreted {GOAL_MASTER}'s round trips/s; {1e6 / med[twin]:.1f} us a round trip"
            + (
                f" (rank 0 {cpu['master']:.1f} us of CPU, the workers {cpu['workers']:.1f} us)"
                if cpu
                else ""
            )
        )
    return {
        **compiled,
        "ranks": sizes.ranks,
        "tasks": sizes.tasks,
        "durable_tasks": sizes.durable_tasks,
        "runs": runs,
        "median_round_trips_per_s": med,
        # time per round trip, master with the in-memory journal over the bare loops: the goal's
        # figure is the master as ``leasefence run`` configures it (``GOAL_MASTER``); the depth-1
        # one (F314's rank fence) is the latency figure
        "goal_master": GOAL_MASTER,
        "run_over_bare_time": med["bare"] / med[GOAL_MASTER],
        "run_over_bare_deep_time": med["bare-deep"] / med[GOAL_MASTER],
        # the goal's ratio in two factors: the master's decisions (master-run over the same
        # loop without them), and the Python MPI path, the wire and the worker loop
        # (bare-transport over the bare loop)
        "run_over_transport_time": med["bare-transport"] / med[GOAL_MASTER],
        "transport_over_bare_time": med["bare"] / med["bare-transport"],
        "cpu_us_per_round_trip": cpu_us,
        "memory_over_bare_time": med["bare"] / med["master-memory"],
        "memory_over_bare_poll_time": med["bare-poll"] / med["master-memory"],
        "group_over_pool": med["master-group"] / med["pool"],
        "always_over_pool": med["master-always"] / med["pool"],
        "group_over_always": med["master-group"] / med["master-always"],
        # issue 12: pipeline depth 2 over depth 1, round trips/s (medians), only the depth
        # differs; and the generation fence over F314's rank fence, both at depth 1
        "depth2_over_depth1": depth2_over_depth1,
        "generation_over_rank_fence": med["master-depth1"] / med["master-memory"],
        "max_in_flight_per_rank": max_in_flight,
        "mean_in_flight_per_rank": mean_in_flight,
        "master_busy": busy,
    }
