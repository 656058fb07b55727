"""The ``recovery`` benchmark: journal open time against length, before and after compaction."""

from __future__ import annotations

import random
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import T0, Sizes, fmt, interleave, median, work_ids
from leasefence.impl.journal import WorkLeaseJournal, encode_batch, encode_record
from leasefence.impl.records import unix_stamp

#: Records per batch line of the journal written as a run writes it (``_write_journal``).
BATCH = 32


def _write_journal(path: Path, records: int, *, done: bool = True, batch: int = 0) -> None:
    """A journal of ``records`` records: lease+done pairs (or leases only), as the journal
    writes them, one a line and stamped ``T0 + i`` (a done half a second later); with
    ``batch``, as a run writes them: group commits of ``batch`` records a line, stamped as the
    journal stamps clock readings (``unix_stamp``) 5 to 50 µs apart."""
    ids = work_ids(records // 2 if done else records, "r")
    rng = random.Random(records)
    reading = T0
    lines = []
    for i, w in enumerate(ids):
        stamps = [T0 + i, T0 + i + 0.5]
        if batch:
            for k in range(2):
                reading += rng.uniform(5e-6, 5e-5)
                stamps[k] = unix_stamp(reading)
        body = {"event": "lease", "work_id": w, "worker": 1 + i % 7, "updated": stamps[0]}
        lines.append(encode_record({**body, "clock": "unix", "attempt": 1}))
        if done:
            end = {**body, "event": "done", "updated": stamps[1]}
            lines.append(encode_record({**end, "clock": "unix", "attempt": 1}))
    if batch:
        lines = [encode_batch(lines[k : k + batch]) for k in range(0, len(lines), batch)]
    path.write_bytes(b"".join(lines))


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
        batched = where / f"batched-{n}.jsonl"
        _write_journal(raw, n)
        _write_journal(batched, n, batch=BATCH)
        kept = _compacted_copy(raw, compact)

        def best_of(p: Path) -> Callable[[int], float]:
            return lambda rep: min(_open_seconds(p) for _ in range(sizes.opens))

        contenders = {"before": best_of(raw), "after": best_of(compact)}
        runs = interleave({**contenders, "batched": best_of(batched)}, sizes.repeats)
        before, after = median(runs["before"]), median(runs["after"])
        in_batches = median(runs["batched"])
        rows.append(
            {
                "records": n,
                "records_after_compaction": kept,
                "open_s_before": before,
                "open_s_after": after,
                "replayed_per_s": n / before,
                "open_s_batched": in_batches,
                "batched_replayed_per_s": n / in_batches,
            }
        )
        say(
            f"  {n:>9,} records: open {before * 1e3:8.1f} ms ({fmt(n / before)} records/s); "
            f"compacted to {kept:,}: {after * 1e3:8.1f} ms; as a run writes them (batch lines "
            f"of {BATCH}, stamps to 10 us): {in_batches * 1e3:8.1f} ms "
            f"({fmt(n / in_batches)} records/s)"
        )
        for p in (raw, compact, batched):
            p.unlink()
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
        "batched_replayed_per_s": rows[-1]["batched_replayed_per_s"] if rows else None,
        "active_leases": sizes.active,
        "active_open_s": active_s,
    }
