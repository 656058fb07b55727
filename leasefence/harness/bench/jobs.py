"""The ``jobs`` benchmark: whole jobs, start-up included, as a user runs them (issue 19, point 1).

Two contenders per size, interleaved, each a fresh ``mpiexec -n R`` (``Sizes.job_ranks``, 4 by
default, or ``--ranks``) timed from outside, from launch to exit:

``run``   ``leasefence run --worker trivial --work N``: durable, with the run's defaults (a
          journal and a coordinator snapshot in the benchmark's directory, group commit, the
          dispatcher of ``--engine auto``: compiled when ``leasefence trace compile`` built it).
          Its journal must hold all ``N`` items completed, or the benchmark fails.
``pool``  ``python -m mpi4py.futures pool_map.py N``: ``MPIPoolExecutor.map`` of the identity
          over ``range(N)``, what mpi4py ships for the same job, no durability.

The figure of each size is the pool's median time over the run's (the goal: ≥ 1.0, fencing
costs nothing a user would notice against the pool).
"""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import Sizes, fmt, interleave, median, whole_job
from leasefence.harness.bench.dispatch import mpiexec

#: The pool contender's script (run by path: see its docstring).
POOL_MAP = Path(__file__).with_name("pool_map.py")
#: What ``leasefence run`` prints at the end: every item completed, counted in the journal.
_COMPLETED = re.compile(r"journal: (\d+)/(\d+) completed")
_ENGINE = re.compile(r"^\s*dispatcher\s+(\S+)", re.MULTILINE)


def completed_in_journal(output: str, tasks: int) -> str:
    """The dispatcher ``leasefence run`` says it ran (compiled, interpreted), once its output
    says the journal holds all ``tasks`` items completed; else ValueError saying what it said."""
    found = _COMPLETED.search(output)
    if found is None or (int(found[1]), int(found[2])) != (tasks, tasks):
        said = found[0] if found else "no count of completed items"
        raise ValueError(f"leasefence run of {tasks} items: {said} (want all {tasks} completed)")
    engine = _ENGINE.search(output)
    return engine[1] if engine else "unknown"


def run_command(launcher: str, ranks: int, tasks: int, journal: Path) -> list[str]:
    script = Path(sys.executable).with_name("leasefence")
    leasefence = [str(script)] if script.is_file() else [sys.executable, "-m", "leasefence"]
    return [
        launcher,
        "-n",
        str(ranks),
        *leasefence,
        "run",
        "--worker",
        "trivial",
        "--work",
        str(tasks),
        "--journal",
        str(journal),
    ]


def pool_command(launcher: str, ranks: int, tasks: int) -> list[str]:
    return [launcher, "-n", str(ranks), sys.executable, "-m", "mpi4py.futures", str(POOL_MAP), str(tasks)]  # fmt: skip


def bench_jobs(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Every size's two contenders, interleaved ``sizes.job_repeats`` times; per size the
    medians in seconds and ``pool_over_run``, the pool's time over the run's."""
    launcher = mpiexec()
    if launcher is None:
        raise RuntimeError("no mpiexec beside this Python or on PATH")
    ranks = sizes.job_ranks
    engines: set[str] = set()

    def run_job(tasks: int) -> Callable[[int], float]:
        def one(rep: int) -> float:
            home = where / f"run-{tasks}-{rep}"
            cmd = run_command(launcher, ranks, tasks, home / "journal.jsonl")
            seconds, output = whole_job(cmd)
            engines.add(completed_in_journal(output, tasks))
            shutil.rmtree(home)  # a 20,000-item journal and snapshot: a few MB each
            say(f"    run  {tasks:>7,} tasks  {seconds:6.2f} s")
            return seconds

        return one

    def pool_job(tasks: int) -> Callable[[int], float]:
        def one(rep: int) -> float:
            seconds, _ = whole_job(pool_command(launcher, ranks, tasks))
            say(f"    pool {tasks:>7,} tasks  {seconds:6.2f} s")
            return seconds

        return one

    say(f"  mpiexec -n {ranks}, whole jobs with start-up, sizes {', '.join(map(str, sizes.jobs))}")
    contenders: dict[str, Callable[[int], float]] = {}
    for tasks in sizes.jobs:
        contenders[f"run-{tasks}"] = run_job(tasks)
        contenders[f"pool-{tasks}"] = pool_job(tasks)
    runs = interleave(contenders, sizes.job_repeats)
    rows: dict[str, dict[str, float]] = {}
    for tasks in sizes.jobs:
        run_s, pool_s = median(runs[f"run-{tasks}"]), median(runs[f"pool-{tasks}"])
        rows[str(tasks)] = {"run_s": run_s, "pool_s": pool_s, "pool_over_run": pool_s / run_s}
        say(
            f"  {tasks:,} tasks: leasefence run {fmt(run_s)} s, MPIPoolExecutor {fmt(pool_s)} s "
            f"(medians of {sizes.job_repeats}): pool / run {fmt(pool_s / run_s)}x"
        )
    return {
        "ranks": ranks,
        "engine": ",".join(sorted(engines)),
        "repeats": sizes.job_repeats,
        "sizes": rows,
        "runs": runs,
    }
