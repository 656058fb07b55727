"""Side-by-side benchmarks: every figure is a ratio of contenders measured in the same run.

Machines are noisy (the CI boxes and the 2-core development machines are shared), so nothing
here is a timed test. Each benchmark runs its contenders interleaved (A, B, C, A, B, C, ...),
repeats, takes each contender's median and reports the ratio of medians beside its goal. The
goals are printed, never enforced: ``leasefence bench`` exits non-zero only on an error.

Benchmarks (``BENCHMARKS``):

``journal``       durable lease+complete pairs per second: ``WorkLeaseJournal`` against SQLite
                  (WAL, ``synchronous=FULL``, same directory) and against the disk's fdatasync
                  limit, per call and for group commit.
``recovery``      journal open time against length (10³…10⁵, 10⁶ with ``--full``), before and
                  after compaction; records replayed per second; a compacted journal of 10,000
                  active leases.
``dispatch``      master round trips per second against a bare mpi4py loop and
                  ``MPIPoolExecutor``, and pipeline depth 2 against depth 1 (issue 12): short
                  ``mpiexec -n 3`` jobs of ``benchmarks/dispatch.py``.
``verification``  the model checker's states per second against TLC's on the same bounds;
                  conformance steps per second.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import platform
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from leasefence.impl.journal import WorkLeaseJournal, encode_record
from leasefence.paths import ROOT

#: The benchmark programs run by path (``benchmarks/`` is not a package).
BENCH_DIR = ROOT / "benchmarks"
BENCHMARKS = ("journal", "recovery", "dispatch", "verification")
SCHEMA = 1
#: Unix time stamped into generated records (any fixed value: replay does not read the clock).
T0 = 1_767_225_600.25


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark does. ``tiny`` is for the tests, ``default`` for ``make bench``
    (every benchmark in well under 5 minutes), ``full`` adds 10⁶-record journals and longer runs."""

    name: str
    repeats: int
    pairs: int  # lease+complete pairs per journal contender per repetition (per-call sync)
    group: int  # pairs per group commit
    groups: int  # groups per contender per repetition
    recovery: tuple[int, ...]  # journal lengths, in records
    active: int  # active leases in the compacted journal whose open time has a goal
    opens: int  # opens per journal per repetition (the median is kept)
    tasks: int  # round trips per dispatch job
    durable_tasks: int  # round trips per dispatch job with a durable journal
    dispatch_repeats: int
    conformance_examples: int
    tlc_repeats: int

    @classmethod
    def named(cls, name: str) -> Sizes:
        return SIZES[name]


SIZES = {
    "tiny": Sizes("tiny", 1, 5, 4, 2, (100, 1_000), 200, 1, 30, 20, 1, 2, 1),
    "default": Sizes(
        "default", 5, 40, 16, 8, (1_000, 10_000, 100_000), 10_000, 3, 400, 200, 3, 10, 2
    ),
    "full": Sizes(
        "full",
        7,
        100,
        16,
        20,
        (1_000, 10_000, 100_000, 1_000_000),
        10_000,
        5,
        2_000,
        500,
        5,
        40,
        3,
    ),
}


@dataclass
class Goal:
    """One goal: a figure, the bound it must meet, and the verdict (``PASS``/``MISS``/``SKIP``)."""

    name: str
    figure: str  # what the value is, e.g. "journal/SQLite pairs per second"
    value: float | None
    op: str  # ">=" or "<="
    bound: float
    unit: str = "x"
    note: str = ""

    @property
    def status(self) -> str:
        if self.value is None:
            return "SKIP"
        ok = self.value >= self.bound if self.op == ">=" else self.value <= self.bound
        return "PASS" if ok else "MISS"

    def line(self) -> str:
        shown = "-" if self.value is None else _fmt(self.value) + self.unit
        want = f"{self.op} {_fmt(self.bound)}{self.unit}"
        tail = f"  ({self.note})" if self.note else ""
        return f"  {self.status:<4}  {self.name:<44} {shown:>12}   goal {want}{tail}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "status": self.status}


@dataclass
class Report:
    """Everything one ``leasefence bench`` run measured."""

    sizes: Sizes
    results: dict[str, Any] = field(default_factory=dict)
    goals: list[Goal] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "command": "leasefence bench"
            + ("" if self.sizes.name == "default" else " --" + self.sizes.name),
            "sizes": asdict(self.sizes),
            "machine": machine(),
            "started": self.started,
            "seconds": self.seconds,
            "results": self.results,
            "goals": [g.to_json() for g in self.goals],
            "errors": self.errors,
        }


def _fmt(v: float) -> str:
    if v == 0:
        return "0"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 0.1 else f"{v:.3g}"


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in load],
        "sqlite": sqlite3.sqlite_version,
    }


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def interleave(
    contenders: dict[str, Callable[[int], float]], repeats: int
) -> dict[str, list[float]]:
    """Run every contender once per repetition, in a rotating order; their figures by name.

    Each contender takes the repetition number and returns its figure (a rate)."""
    names = list(contenders)
    runs: dict[str, list[float]] = {n: [] for n in names}
    for rep in range(repeats):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            runs[name].append(contenders[name](rep))
    return runs


def work_ids(n: int, salt: str = "") -> list[str]:
    return [hashlib.sha256(f"{salt}{i}".encode()).hexdigest() for i in range(n)]


# -- journal durability --------------------------------------------------------------------


def _journal_pairs(path: Path, ids: list[str], group: int) -> float:
    """Pairs per second through ``WorkLeaseJournal``: per-call sync when ``group`` is 0, else
    ``group`` pairs decided then one ``commit()``."""
    with WorkLeaseJournal(path, sync="group" if group else "always") as j:
        start = time.perf_counter()
        for k, w in enumerate(ids, 1):
            j.lease(w, 1)
            j.complete(w, 1)
            if group and k % group == 0:
                j.commit()
        j.commit()
        return len(ids) / (time.perf_counter() - start)


def _sqlite_pairs(path: Path, ids: list[str], group: int) -> float:
    """The same two operations in SQLite (WAL, synchronous=FULL): a lease (admission check and
    insert) and a fenced completion (update where the owner matches). Per call: each operation
    is its own transaction; with ``group``: the group's operations in one transaction."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute(
            "CREATE TABLE IF NOT EXISTS leases (work_id TEXT PRIMARY KEY, worker INTEGER, "
            "updated REAL, clock TEXT, attempt INTEGER, done INTEGER NOT NULL DEFAULT 0)"
        )

        def lease(w: str) -> None:
            db.execute(
                "INSERT INTO leases (work_id, worker, updated, clock, attempt) "
                "VALUES (?, ?, ?, 'unix', 1) ON CONFLICT (work_id) DO NOTHING",
                (w, 1, time.time()),
            )

        def complete(w: str) -> None:
            db.execute(
                "UPDATE leases SET done = 1, updated = ? WHERE work_id = ? AND worker = ? "
                "AND done = 0",
                (time.time(), w, 1),
            )

        start = time.perf_counter()
        if not group:
            for w in ids:
                for op in (lease, complete):
                    db.execute("BEGIN IMMEDIATE")
                    op(w)
                    db.execute("COMMIT")
        else:
            for k in range(0, len(ids), group):
                db.execute("BEGIN IMMEDIATE")
                for w in ids[k : k + group]:
                    lease(w)
                    complete(w)
                db.execute("COMMIT")
        return len(ids) / (time.perf_counter() - start)
    finally:
        db.close()


def _record_size() -> int:
    w = work_ids(1)[0]
    return len(
        encode_record(
            {
                "event": "lease",
                "work_id": w,
                "worker": 1,
                "updated": T0,
                "clock": "unix",
                "attempt": 1,
            }
        )
    )


def _append_pairs(path: Path, pairs: int, group: int, size: int) -> float:
    """The limit, appending: lines of the journal's size, one fdatasync per record (per call)
    or per group of ``2 * group`` records; returns pairs per second."""
    line = b"x" * (size - 1) + b"\n"
    per_sync = 2 * group if group else 1
    syncs = (2 * pairs) // per_sync
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(syncs):
            os.write(fd, line * per_sync)
            os.fdatasync(fd)
        return syncs * per_sync / 2 / (time.perf_counter() - start)
    finally:
        os.close(fd)


def _overwrite_pairs(path: Path, pairs: int, group: int, size: int) -> float:
    """The limit, in place: the same writes into a preallocated, fsynced file (as etcd's WAL
    does with its preallocated segments), one fdatasync per record or per group."""
    per_sync = 2 * group if group else 1
    syncs = (2 * pairs) // per_sync
    chunk = (b"x" * (size - 1) + b"\n") * per_sync
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.posix_fallocate(fd, 0, syncs * len(chunk))
        os.write(fd, b"\0" * (syncs * len(chunk)))
        os.fsync(fd)
        start = time.perf_counter()
        for k in range(syncs):
            os.pwrite(fd, chunk, k * len(chunk))
            os.fdatasync(fd)
        return syncs * per_sync / 2 / (time.perf_counter() - start)
    finally:
        os.close(fd)


def _journal_contenders(
    where: Path, group: int, pairs: int, size: int
) -> dict[str, Callable[[int], float]]:
    """The four contenders of one mode, each writing a fresh file in ``where``."""
    counter = iter(range(10**9))

    def fresh(stem: str) -> Path:
        return where / f"{stem}-{next(counter)}"

    return {
        "journal": lambda rep: _journal_pairs(fresh("j"), work_ids(pairs, f"{rep}"), group),
        "sqlite": lambda rep: _sqlite_pairs(fresh("s"), work_ids(pairs, f"{rep}"), group),
        "append_fdatasync": lambda rep: _append_pairs(fresh("a"), pairs, group, size),
        "overwrite_fdatasync": lambda rep: _overwrite_pairs(fresh("o"), pairs, group, size),
    }


def bench_journal(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    size = _record_size()
    out: dict[str, Any] = {"record_bytes": size, "directory": str(where)}
    for mode, group, pairs in (
        ("per_call", 0, sizes.pairs),
        ("group", sizes.group, sizes.group * sizes.groups),
    ):
        contenders = _journal_contenders(where, group, pairs, size)
        runs = interleave(contenders, sizes.repeats)
        med = {k: median(v) for k, v in runs.items()}
        limit = max(med["append_fdatasync"], med["overwrite_fdatasync"])
        out[mode] = {
            "pairs_per_repeat": pairs,
            "group_pairs": group or None,
            "runs": runs,
            "median_pairs_per_s": med,
            "limit_pairs_per_s": limit,
            "journal_over_sqlite": med["journal"] / med["sqlite"],
            "journal_over_limit": med["journal"] / limit,
        }
        say(
            f"  {mode:<8} journal {_fmt(med['journal'])} pairs/s, SQLite {_fmt(med['sqlite'])}, "
            f"limit {_fmt(limit)} (append {_fmt(med['append_fdatasync'])}, overwrite "
            f"{_fmt(med['overwrite_fdatasync'])})"
        )
        for p in where.iterdir():
            if p.is_file():
                p.unlink()
    return out


# -- recovery ------------------------------------------------------------------------------


def _write_journal(path: Path, records: int, *, done: bool = True) -> None:
    """A journal of ``records`` records: lease+done pairs (or leases only), as the journal
    writes them."""
    ids = work_ids(records // 2 if done else records, "r")
    with path.open("wb") as f:
        for i, w in enumerate(ids):
            body = {"event": "lease", "work_id": w, "worker": 1 + i % 7, "updated": T0 + i}
            f.write(encode_record({**body, "clock": "unix", "attempt": 1}))
            if done:
                end = {**body, "event": "done", "updated": T0 + i + 0.5}
                f.write(encode_record({**end, "clock": "unix", "attempt": 1}))


def _open_seconds(path: Path) -> float:
    start = time.perf_counter()
    WorkLeaseJournal(path).close()
    return time.perf_counter() - start


def _compacted_copy(src: Path, dst: Path) -> int:
    shutil.copyfile(src, dst)
    with WorkLeaseJournal(dst) as j:
        j.compact()
        return j.record_count


def bench_recovery(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    rows = []
    for n in sizes.recovery:
        raw, compact = where / f"raw-{n}.jsonl", where / f"compact-{n}.jsonl"
        _write_journal(raw, n)
        kept = _compacted_copy(raw, compact)

        def best_of(p: Path) -> Callable[[int], float]:
            return lambda rep: min(_open_seconds(p) for _ in range(sizes.opens))

        runs = interleave({"before": best_of(raw), "after": best_of(compact)}, sizes.repeats)
        before, after = median(runs["before"]), median(runs["after"])
        rows.append(
            {
                "records": n,
                "records_after_compaction": kept,
                "open_s_before": before,
                "open_s_after": after,
                "replayed_per_s": n / before,
            }
        )
        say(
            f"  {n:>9,} records: open {before * 1e3:8.1f} ms ({_fmt(n / before)} records/s); "
            f"compacted to {kept:,}: {after * 1e3:8.1f} ms"
        )
        raw.unlink()
        compact.unlink()
    active = where / "active.jsonl"
    _write_journal(active, sizes.active, done=False)
    compacted = where / "active-compacted.jsonl"
    _compacted_copy(active, compacted)
    runs = interleave(
        {"open": lambda rep: min(_open_seconds(compacted) for _ in range(sizes.opens))},
        sizes.repeats,
    )
    active_s = median(runs["open"])
    say(f"  compacted journal, {sizes.active:,} active leases: open {active_s * 1e3:.1f} ms")
    for p in where.iterdir():
        if p.is_file():
            p.unlink()
    return {
        "sizes": rows,
        "replayed_per_s": rows[-1]["replayed_per_s"] if rows else None,
        "active_leases": sizes.active,
        "active_open_s": active_s,
    }


# -- dispatch ------------------------------------------------------------------------------

DISPATCH = (
    "bare",
    "bare-poll",
    "master-memory",
    "master-depth1",
    "master-depth2",
    "master-always",
    "master-group",
    "pool",
)


def mpiexec() -> str | None:
    """``mpiexec`` beside this Python (the mpich wheel puts it in the virtualenv), or on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    return str(here) if here.is_file() else shutil.which("mpiexec")


def _dispatch_job(
    contender: str, tasks: int, where: Path, timeout: float = 120.0
) -> dict[str, Any]:
    """One contender's ``mpiexec -n 3`` job; its RESULT.json (``rate`` and, for a master
    contender, the pipeline depth it reached)."""
    launcher = mpiexec()
    if launcher is None:
        raise RuntimeError("no mpiexec beside this Python or on PATH")
    out = where / f"{contender}.json"
    out.unlink(missing_ok=True)
    script = str(BENCH_DIR / "dispatch.py")
    python = [sys.executable, "-m", "mpi4py.futures"] if contender == "pool" else [sys.executable]
    cmd = [
        launcher,
        "-n",
        "3",
        *python,
        script,
        contender,
        "--tasks",
        str(tasks),
        "--out",
        str(out),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0 or not out.is_file():
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: " + " | ".join(tail))
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def bench_dispatch(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Every contender of ``DISPATCH``, interleaved. ``depth2_over_depth1`` is the throughput of
    pipeline depth 2 over depth 1, both on the in-memory journal with generation fencing (only
    the depth differs); ``max_in_flight_per_rank`` and ``mean_in_flight_per_rank`` say how
    deep each master contender's pipeline really was (the most and the mean dispatches per
    rank, over repetitions), ``master_busy`` the median share of the timed wall time rank 0
    spent on its CPU (near 1: the master's own work bounds the rate; far below: waiting)."""
    docs: dict[str, list[dict[str, Any]]] = {}

    def job(name: str) -> Callable[[int], float]:
        n = sizes.durable_tasks if name in ("master-always", "master-group") else sizes.tasks

        def run(rep: int) -> float:
            doc = _dispatch_job(name, n, where)
            rate = float(doc["rate"])
            if "max_in_flight_per_rank" in doc:
                docs.setdefault(name, []).append(doc)
            say(f"    {name:<14} {_fmt(rate):>8} round trips/s")
            return rate

        return run

    runs = interleave({name: job(name) for name in DISPATCH}, sizes.dispatch_repeats)
    med = {k: median(v) for k, v in runs.items()}
    say("  medians: " + ", ".join(f"{k} {_fmt(v)}" for k, v in med.items()) + " round trips/s")
    depth2_over_depth1 = med["master-depth2"] / med["master-depth1"]
    max_in_flight = {k: max(int(d["max_in_flight_per_rank"]) for d in v) for k, v in docs.items()}
    mean_in_flight = {
        k: statistics.fmean(float(d["mean_in_flight_per_rank"]) for d in v) for k, v in docs.items()
    }
    busy = {k: median([d["master_cpu_s"] / d["seconds"] for d in v]) for k, v in docs.items()}

    def depth(k: str) -> str:
        return f"max {max_in_flight[k]}, mean {mean_in_flight[k]:.2f}, master busy {busy[k]:.0%}"

    say(
        f"  depth 2 / depth 1 throughput: {_fmt(depth2_over_depth1)}x (in-memory journal, "
        f"generation fence; dispatches in flight per rank, depth 1: {depth('master-depth1')}; "
        f"depth 2: {depth('master-depth2')})"
    )
    return {
        "ranks": 3,
        "tasks": sizes.tasks,
        "durable_tasks": sizes.durable_tasks,
        "runs": runs,
        "median_round_trips_per_s": med,
        # time per round trip, master with the in-memory journal over the bare loops
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


# -- verification --------------------------------------------------------------------------


def bench_model_vs_tlc(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    from leasefence import tlc
    from leasefence.model.check import explore
    from leasefence.model.system import Bounds
    from leasefence.tlc.agree import agreement_files, bounds_of_config

    cfg = tlc.TLA_DIR / "MCLeaseFence.cfg"
    bounds = bounds_of_config(cfg)
    if sizes.name == "tiny":  # a few hundred states: the same checks, seconds instead of tens
        bounds = Bounds(
            task_of=(("w1", "s1"), ("w2", "s1")),
            max_wall=1,
            max_reboots=0,
            max_rollbacks=0,
            max_restarts=0,
            max_dups=0,
        )
        module, constants = agreement_files(bounds)
        checks = cfg.read_text().split("INVARIANTS", 1)[1]
        cfg = where / "MCAgree.cfg"
        cfg.write_text(constants + "INVARIANTS" + checks)
        (where / "MCAgree.tla").write_text(module)
    try:
        tools = tlc.find_tools(download=False)
    except tlc.TlcUnavailable as exc:
        tools = None
        reason = str(exc)
    states: dict[str, int] = {}

    def model(rep: int) -> float:
        start = time.perf_counter()
        r = explore(bounds)
        seconds = time.perf_counter() - start
        states["model"] = r.states
        say(f"    model checker  {r.states:,} states in {seconds:.1f} s")
        return r.states / seconds

    def run_tlc(rep: int) -> float:
        assert tools is not None
        r = tlc.run_tlc(cfg, tools, workers=1, timeout=600)
        if r.errors or not r.distinct_states:
            raise RuntimeError(f"TLC on {cfg.name}: {(r.errors or ['no statistics'])[0]}")
        states["tlc"] = r.distinct_states
        say(
            f"    TLC            {r.distinct_states:,} states in {r.seconds:.1f} s "
            f"(TLC's own clock {r.tlc_seconds} s)"
        )
        return r.distinct_states / r.seconds

    contenders: dict[str, Callable[[int], float]] = {"model": model}
    if tools is not None:
        contenders["tlc"] = run_tlc
    runs = interleave(contenders, sizes.tlc_repeats)
    med = {k: median(v) for k, v in runs.items()}
    out: dict[str, Any] = {
        "config": cfg.name,
        "states": states,
        "runs": runs,
        "median_states_per_s": med,
    }
    if tools is None:
        out["tlc_skipped"] = reason
        out["model_over_tlc"] = None
        say(f"  TLC skipped: {reason}")
    else:
        out["tlc_jar"] = tools.jar.describe()
        out["model_over_tlc"] = med["model"] / med["tlc"]
        say(
            f"  model {_fmt(med['model'])} states/s, TLC {_fmt(med['tlc'])} states/s "
            f"(wall clock, JVM start included); jar {tools.jar.describe()}"
        )
    return out


def bench_conformance(sizes: Sizes, say: Callable[[str], None]) -> dict[str, Any]:
    """Steps per second of each Hypothesis state machine (fixed seed, no database)."""
    try:
        from hypothesis import HealthCheck, settings
        from hypothesis.stateful import run_state_machine_as_test

        from leasefence.conformance import machines
        from leasefence.conformance.coverage import COVERAGE
    except Exception as exc:  # the machines are being written: skip, saying why
        say(f"  conformance skipped: {type(exc).__name__}: {exc}")
        return {"skipped": f"{type(exc).__name__}: {exc}"}
    rows = {}
    for name, cls in machines.MACHINES.items():
        before = COVERAGE.steps(name)
        cfg = settings(
            max_examples=sizes.conformance_examples,
            stateful_step_count=30,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        quiet = logging.getLogger("leasefence")
        level = quiet.level
        quiet.setLevel(logging.CRITICAL)  # the machines inject faults the master logs
        try:
            start = time.perf_counter()
            run_state_machine_as_test(cls, settings=cfg)
            seconds = time.perf_counter() - start
        finally:
            quiet.setLevel(level)
        steps = COVERAGE.steps(name) - before
        rows[cls.__name__] = {"steps": steps, "seconds": seconds, "steps_per_s": steps / seconds}
        say(
            f"    {cls.__name__:<24} {steps:>6,} steps in {seconds:5.1f} s: {_fmt(steps / seconds)} steps/s"
        )
    return {"machines": rows}


def bench_verification(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    """Both parts run even when one fails; a failure is listed under ``errors`` (and reported
    as an error of the run)."""
    out: dict[str, Any] = {"errors": []}
    parts: dict[str, Callable[[], dict[str, Any]]] = {
        "model_vs_tlc": lambda: bench_model_vs_tlc(sizes, where, say),
        "conformance": lambda: bench_conformance(sizes, say),
    }
    for name, part in parts.items():
        try:
            out[name] = part()
        except Exception as exc:
            out["errors"].append(f"{name}: {type(exc).__name__}: {exc}")
            say(f"  ERROR {name}: {type(exc).__name__}: {exc}")
    return out


RUNNERS: dict[str, Callable[[Sizes, Path, Callable[[str], None]], dict[str, Any]]] = {
    "journal": bench_journal,
    "recovery": bench_recovery,
    "dispatch": bench_dispatch,
    "verification": bench_verification,
}


# -- goals ---------------------------------------------------------------------------------


def goals(results: dict[str, Any]) -> list[Goal]:
    """The issue's goals, each with the figure this run measured (None: not measured)."""

    def get(*path: str) -> float | None:
        node: Any = results
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return float(node) if isinstance(node, int | float) else None

    active = int(get("recovery", "active_leases") or 10_000)
    return [
        Goal("journal / SQLite, per-call sync", "pairs/s, both durable", get("journal", "per_call", "journal_over_sqlite"), ">=", 1.0),
        Goal("journal / SQLite, group commit", "pairs/s, group vs one transaction", get("journal", "group", "journal_over_sqlite"), ">=", 1.0),
        Goal("journal / fdatasync limit, per-call sync", "pairs/s vs 2 syncs per pair", get("journal", "per_call", "journal_over_limit"), ">=", 0.8),
        Goal("journal / fdatasync limit, group commit", "pairs/s vs 1 sync per group", get("journal", "group", "journal_over_limit"), ">=", 0.8),
        Goal("replay (longest journal measured)", "records/s", get("recovery", "replayed_per_s"), ">=", 500_000, unit="/s"),
        Goal(f"open compacted journal, {active:,} active leases", "milliseconds", None if get("recovery", "active_open_s") is None else 1e3 * (get("recovery", "active_open_s") or 0.0), "<=", 50, unit=" ms"),
        Goal("master (memory journal) / bare mpi4py, time per rt", "bare blocking recv loop", get("dispatch", "memory_over_bare_time"), "<=", 1.25),
        Goal("durable master, group commit / MPIPoolExecutor", "round trips/s", get("dispatch", "group_over_pool"), ">=", 1.0),
        Goal("model checker / TLC states per second", "same bounds, wall clock", get("verification", "model_vs_tlc", "model_over_tlc"), ">=", 0.5),
    ]  # fmt: skip


# -- the run -------------------------------------------------------------------------------


@contextlib.contextmanager
def _workdir(base: Path | None) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="leasefence-bench-", dir=base) as tmp:
        yield Path(tmp)


def run(
    sizes: Sizes,
    only: Sequence[str] = BENCHMARKS,
    *,
    directory: Path | None = None,
    out: TextIO | None = None,
) -> Report:
    """Run the chosen benchmarks; errors are recorded in the report, not raised."""
    report = Report(sizes)
    start = time.perf_counter()

    def say(text: str) -> None:
        print(text, file=out or sys.stdout, flush=True)

    say(f"leasefence bench ({sizes.name} sizes): {', '.join(only)}")
    with _workdir(directory) as where:
        for name in only:
            say(f"[{time.perf_counter() - start:6.1f} s] {name}")
            sub = where / name
            sub.mkdir()
            try:
                report.results[name] = RUNNERS[name](sizes, sub, say)
                for error in report.results[name].get("errors", []):
                    report.errors.append(f"{name}: {error}")
            except Exception as exc:
                report.errors.append(f"{name}: {type(exc).__name__}: {exc}")
                say(f"  ERROR {name}: {type(exc).__name__}: {exc}")
    report.seconds = time.perf_counter() - start
    report.goals = goals(report.results)
    say(f"[{report.seconds:6.1f} s] done. Ratios beside their goals (printed, not enforced):")
    for g in report.goals:
        say(g.line())
    extra = other_figures(report.results)
    if extra:
        say("Other figures of this run (no goal):")
        for label, value in extra:
            say(f"        {label:<58} {value}")
    return report


def other_figures(results: dict[str, Any]) -> list[tuple[str, str]]:
    """Ratios that explain the goals' figures (no goal of their own)."""
    lines: list[tuple[str, str]] = []
    d = results.get("dispatch")
    if isinstance(d, dict):
        med = d["median_round_trips_per_s"]
        lines += [
            ("master (memory journal) / bare-poll loop, time per rt", _fmt(d["memory_over_bare_poll_time"]) + "x"),
            ("bare blocking loop / bare Improbe+sleep loop, rt/s", _fmt(med["bare"] / med["bare-poll"]) + "x"),
            ("durable master, group commit / per-call sync, rt/s", _fmt(d["group_over_always"]) + "x"),
            ("durable master, per-call sync / MPIPoolExecutor, rt/s", _fmt(d["always_over_pool"]) + "x"),
            ("depth 2 / depth 1 (memory journal, generation fence), rt/s", _fmt(d["depth2_over_depth1"]) + "x"),
            ("generation / rank fence at depth 1, memory journal, rt/s", _fmt(d["generation_over_rank_fence"]) + "x"),
        ]  # fmt: skip
    v = results.get("verification")
    if isinstance(v, dict):
        for name, row in v.get("conformance", {}).get("machines", {}).items():
            lines.append((f"conformance {name}, steps/s", _fmt(row["steps_per_s"])))
    return lines
