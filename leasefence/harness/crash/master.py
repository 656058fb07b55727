"""The crash harness's family ``master``: a group-commit master (issue 19) killed at every file call
and cut by power loss at every prefix of its file operations, its promises checked on the files.

The child runs ``Master.open(..., group_commit=True)`` and ``transport.master_dispatch`` over an
``InProcessTransport`` with honest workers, on real files in the crash directory. It acknowledges
what leaves the master: each WORK as it is sent (``["work", rank, work_id, generation]``) and,
after each turn's commit, each completion it counted (``["done", work_id]``). The promises, read
from the files after the crash (both must open: no ``JournalCorrupt``, no ``SnapshotError``):

- a WORK leaves only after its dispatch's leases are durable: the journal holds the work
  completed, or leased to exactly that owner token; and while the journal does not hold it
  completed, the coordinator's file holds its state task leased to that token;
- a completion counts only once durable: the journal holds the work completed, and the
  coordinator's file books at least as many completions of its state task as were acknowledged.

A broken promise is a lost acknowledged operation (``Report.lost``). Power loss uses the three
models of ``disk.MODELS``, as the container families do.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

from leasefence.harness.crash.child import ChildRun, fork_run
from leasefence.harness.crash.disk import MODELS, materialize, power_disk, power_points
from leasefence.harness.crash.report import MAX_KEPT, Report, Violation
from leasefence.harness.crash.workloads import BASE, JOURNAL_NAME, SNAPSHOT_NAME
from leasefence.impl.coordfile import decode, read_file
from leasefence.impl.journal import WorkLeaseJournal
from leasefence.impl.workload import generate

FAMILY = "master"


def spec(items: int, depth: int, seed: int) -> str:
    """The name of one master workload (what ``--replay`` takes)."""
    return f"master-{items}-d{depth}-s{seed}"


def parse_spec(text: str) -> tuple[int, int, int]:
    """``(items, depth, seed)`` of ``spec``'s name; ``ValueError`` naming what is wrong."""
    parts = text.split("-")
    if len(parts) != 4 or parts[0] != FAMILY or parts[2][:1] != "d" or parts[3][:1] != "s":
        raise ValueError(f"not a master workload: {text!r} (expected master-<n>-d<depth>-s<seed>)")
    return int(parts[1]), int(parts[2][1:]), int(parts[3][1:])


def _run(directory: Path, items: int, depth: int, seed: int, ack: Any) -> None:
    """The workload: every item of ``generate(items, seed)`` completed by three honest ranks, the
    replies of rank 1 held until nothing else is ready (so its WORKs stay out across several
    turns and their commits)."""
    from leasefence.impl.master import Master
    from leasefence.impl.transport import (
        DispatchHooks,
        InProcessTransport,
        Reply,
        master_dispatch,
        respond,
    )
    from leasefence.impl.workload import trivial_worker

    def late_rank_1(result: Any, rank: int, attempt: int) -> list[Reply]:
        return [
            Reply(r.tag, r.data, 1.0 if rank == 1 else 0.0) for r in respond(result, rank, attempt)
        ]

    catalogue = generate(items, seed)
    master = Master.open(
        directory / JOURNAL_NAME,
        directory / SNAPSHOT_NAME,
        catalogue,
        ttl=3600.0,
        clock=lambda: float(BASE),
        pipeline=depth,
        group_commit=True,
    )
    step = [0]

    def say(payload: list[Any]) -> None:
        step[0] += 1
        ack(step[0], payload)

    class Sending(InProcessTransport):
        def send_many(self, rank: Any, msgs: Any) -> None:
            for msg in msgs:
                if hasattr(msg, "work_id"):
                    gen = list(msg.generation) if msg.generation is not None else None
                    say(["work", int(rank), msg.work_id, gen])
            super().send_many(rank, msgs)

    class Acks(DispatchHooks):
        def __init__(self) -> None:
            self.counted: list[str] = []

        def on_result(self, m: Any, rank: Any, result: Any, outcome: Any) -> None:
            if result.ok and outcome.work_ok and not outcome.stale:
                self.counted.append(result.work_id)  # counted now, told after the commit

        def on_progress(self, m: Any) -> None:  # after the turn's commit
            for w in self.counted:
                say(["done", w])
            self.counted.clear()

    master = master_dispatch(master, Sending(trivial_worker, respond=late_rank_1), hooks=Acks())
    master.close()


def _fork(
    directory: Path, items: int, depth: int, seed: int, point: int | None, record: bool
) -> ChildRun:
    """Run the workload in a child: killed after its ``point``-th mutating file call, or (with
    ``record``) to the end, its file operations recorded; what it reported."""
    return fork_run(
        directory, lambda ack: _run(directory, items, depth, seed, ack), point, record=record
    )


def acked_upto(run: ChildRun, last: int) -> list[list[Any]]:
    """The acknowledgements of steps 1..``last``, in order."""
    return [list(run.acks[s]) for s in sorted(run.acks) if s <= last]  # type: ignore[call-overload]


def check_files(directory: Path, items: int, seed: int, acked: list[list[Any]]) -> list[str]:
    """The promises ``acked`` broke on the files in ``directory`` (module doc)."""
    task_of: dict[str, str] = {i.work_id: i.state_task_id for i in generate(items, seed)}
    done: frozenset[str] = frozenset()
    leases: Any = {}
    try:
        if (directory / JOURNAL_NAME).exists():
            journal = WorkLeaseJournal.open_readonly(directory / JOURNAL_NAME)
            try:
                done, leases = journal.completed, journal.leases
            finally:
                journal.close()
        raw = read_file(directory / SNAPSHOT_NAME)
        loaded = decode(directory / SNAPSHOT_NAME, raw) if raw is not None else None
    except Exception as exc:  # any error opening is a broken promise
        return [f"the files do not open: {type(exc).__name__}: {exc}"]
    problems: list[str] = []
    sent: dict[str, tuple[int, tuple[int, int] | None]] = {}
    booked: Counter[str] = Counter()
    for kind, *rest in acked:
        if kind == "work":
            rank, w, gen = rest
            sent[w] = (rank, tuple(gen) if gen is not None else None)
        else:
            (w,) = rest
            booked[task_of[w]] += 1
            if w not in done:
                problems.append(f"completion of {w[:12]} acknowledged, not in the journal")
    for w, (rank, gen) in sent.items():
        if w in done:
            continue
        held = leases.get(w)
        if held is None or (held.owner, held.generation) != (rank, gen):
            problems.append(f"WORK {w[:12]} to rank {rank} left, its journal lease is {held}")
        lease = loaded.leases.get(task_of[w]) if loaded is not None else None
        if lease is None or (lease.owner, lease.generation) != (rank, gen):
            problems.append(f"WORK {w[:12]} to rank {rank} left, its state lease is {lease}")
    for task, n in booked.items():
        got = loaded.stats[task].completions if loaded and task in loaded.stats else 0
        if got < n:
            problems.append(f"{n} completions of state task {task[:12]} acknowledged, {got} booked")
    return problems


def _note(
    report: Report, name: str, point: str, acked: list[list[Any]], problems: list[str]
) -> None:
    report.acked_checked += len(acked)
    report.lost += len(problems)
    for what in problems[: max(0, MAX_KEPT - len(report.violations))]:
        report.violations.append(Violation(FAMILY, name, len(acked) + 1, "", point, what))


def check_master(
    report: Report,
    scratch: Path,
    items: int = 6,
    depth: int = 2,
    seed: int = 0,
    *,
    kill: bool = True,
    power: bool = True,
    models: tuple[str, ...] = MODELS,
    only: str | None = None,
) -> None:
    """Family ``master`` on one workload: SIGKILL after every mutating file call (``kill``) and
    every simulated power loss under ``models`` (``power``); ``only``: one point again
    (``<k>`` of kill, or a ``disk.PowerPoint`` of power)."""
    from leasefence.harness.crash.disk import PowerPoint

    name = spec(items, depth, seed)
    report.workloads.append(name)
    directory = scratch / "master"
    directory.mkdir(exist_ok=True)
    materialize(directory, {})
    full = _fork(directory, items, depth, seed, None, record=False)
    if full.end != "finished":
        report.violations.append(Violation(FAMILY, name, 0, "", "-", f"the run {full.end}"))
        return
    total = next((e[1] for e in full.events if e[0] == "count"), 0)
    kill_points = range(total + 1) if kill and only is None else []
    if only is not None and ":" not in only and "," not in only:
        kill_points = [int(only)]
    for k in kill_points:
        materialize(directory, {})
        run = _fork(directory, items, depth, seed, k, record=False)
        acked = acked_upto(run, max(run.acks, default=0))
        report.kill_points += 1
        _note(report, name, str(k), acked, check_files(directory, items, seed, acked))
    if not power or (only is not None and "," not in only):
        return
    materialize(directory, {})
    rec = _fork(directory, items, depth, seed, None, record=True)
    seen: dict[str, set[bytes]] = {m: set() for m in MODELS}
    checked: dict[bytes, bool] = {}
    for point, last in power_points(rec.events, models):
        if only is not None and point != PowerPoint.parse(only):
            continue
        files = power_disk(rec.events, {}, point)
        acked = acked_upto(rec, last)
        key = hashlib.sha256(repr((sorted(files.items()), len(acked))).encode()).digest()

        def check(
            files: dict[str, bytes] = files, acked: list[list[Any]] = acked, at: str = str(point)
        ) -> bool:
            materialize(directory, files)
            problems = check_files(directory, items, seed, acked)
            _note(report, name, at, acked, problems)
            return bool(problems)

        report.power_state(point.model, key, seen, checked, check)
