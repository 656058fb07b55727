"""The ``journal`` benchmark: durable lease+complete pairs per second against SQLite and the disk's fdatasync limit."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import T0, Sizes, fmt, interleave, median, work_ids
from leasefence.impl.journal import WorkLeaseJournal, encode_record


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
            f"  {mode:<8} journal {fmt(med['journal'])} pairs/s, SQLite {fmt(med['sqlite'])}, "
            f"limit {fmt(limit)} (append {fmt(med['append_fdatasync'])}, overwrite "
            f"{fmt(med['overwrite_fdatasync'])})"
        )
        for p in where.iterdir():
            if p.is_file():
                p.unlink()
    return out
