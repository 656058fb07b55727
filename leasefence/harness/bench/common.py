"""What every benchmark shares: the sizes, medians of interleaved contenders, the figures' format."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Unix time stamped into generated records (any fixed value: replay does not read the clock).
T0 = 1_767_225_600.25
#: How a benchmark prints a line of progress.
Say = Callable[[str], None]


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
    #: Work items per in-process master run (``scale``): 10³ to 10⁵, as issue 19 asks.
    scale: tuple[int, ...] = (1_000, 10_000, 100_000)
    ranks: int = 3  # MPI processes of each dispatch job (``leasefence bench --ranks``)
    #: Tasks of each whole job (``jobs``): issue 19's 2,000 and 20,000, each size's two
    #: contenders run ``job_repeats`` times on ``mpiexec -n job_ranks`` (``--ranks`` sets it too).
    jobs: tuple[int, ...] = (2_000, 20_000)
    job_repeats: int = 3
    job_ranks: int = 4

    @classmethod
    def named(cls, name: str) -> Sizes:
        return SIZES[name]


SIZES = {
    "tiny": Sizes(
        "tiny",
        1,
        5,
        4,
        2,
        (100, 1_000),
        200,
        1,
        30,
        20,
        1,
        2,
        1,
        (100, 300),
        jobs=(40,),
        job_repeats=1,
    ),
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


def fmt(v: float) -> str:
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
        # the fast JSON library the messages' objects are read with (impl/wire.py), if any
        "orjson": _version("orjson"),
        # sources every process compiles again (no current cache, none written: issue 19)
        "uncached_sources": uncached_count(package_folders(), not sys.flags.dont_write_bytecode),
    }


def uncached_sources(folders: Iterable[Path]) -> list[Path]:
    """The Python sources under ``folders`` (symlinked folders followed, each file once) whose
    bytecode cache Python would not use: none in ``__pycache__``, another Python's, or one made
    from another version of the source (by size and time, or by a hash it checks: PEP 552)."""
    found: dict[str, Path] = {}
    for folder in folders:
        for root, _, files in os.walk(folder, followlinks=True):
            for name in files:
                if name.endswith(".py"):
                    found.setdefault(os.path.realpath(os.path.join(root, name)), Path(root, name))
    return [path for real, path in sorted(found.items()) if not _cache_is_current(real)]


def _cache_is_current(source: str) -> bool:
    """Whether ``source``'s cache in ``__pycache__`` matches it (PEP 552's header)."""
    try:
        with open(importlib.util.cache_from_source(source), "rb") as fh:
            header = fh.read(16)
        st = os.stat(source)
    except OSError:
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    flags = int.from_bytes(header[4:8], "little")
    if flags == 0b01:  # by hash, never checked: Python uses it whatever the source says
        return True
    if flags == 0b11:  # by hash, checked against the source
        try:
            with open(source, "rb") as fh:
                return header[8:16] == importlib.util.source_hash(fh.read())
        except OSError:  # unreadable: Python could not check it either
            return False
    if flags:
        return False  # a header this Python would refuse
    mtime, size = int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")
    return mtime == int(st.st_mtime) & 0xFFFFFFFF and size == st.st_size & 0xFFFFFFFF


def uncached_count(folders: Iterable[Path], caches_written: bool) -> int:
    """How many sources under ``folders`` every process compiles again: those without a current
    cache (``uncached_sources``) when no process writes one (``caches_written`` false:
    ``PYTHONDONTWRITEBYTECODE``); 0 when the first process to import one writes its cache."""
    return 0 if caches_written else len(uncached_sources(folders))


def bytecode_note(uncached: int) -> str | None:
    """A line saying that the processes the benchmarks start compile ``uncached`` of
    leasefence's sources first (``uncached_count``); None when there is nothing to say."""
    if not uncached:
        return None
    n = uncached
    return (
        f"  note: {n} source file{'s' if n != 1 else ''} of leasefence "
        f"{'have' if n != 1 else 'has'} no current bytecode cache, and PYTHONDONTWRITEBYTECODE "
        "keeps processes from writing one: every process the benchmarks start compiles "
        f"{'them' if n != 1 else 'it'} first, and the figures include that "
        "(`make bytecode` writes the caches)"
    )


def package_folders() -> list[Path]:
    """The folders leasefence's sources are in: its package's (the subpackages are below it, in
    a checkout through the symlinks ``uncached_sources`` follows)."""
    import leasefence

    return [Path(leasefence.__file__).resolve().parent]


def _version(distribution: str) -> str | None:
    """The installed version of ``distribution``, or None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


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


def whole_job(cmd: list[str], timeout: float = 600.0) -> tuple[float, str]:
    """Run ``cmd`` (an ``mpiexec`` job) to its end: its wall time in seconds and its standard
    output. A job that exits non-zero raises, naming the command and the end of what it
    printed."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}: " + " | ".join(tail))
    return seconds, proc.stdout
