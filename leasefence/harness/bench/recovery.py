"""The ``recovery`` benchmark: journal open time against length, before and after compaction."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import T0, Sizes, fmt, interleave, median, work_ids
from leasefence.impl.journal import WorkLeaseJournal, encode_record


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
            f"  {n:>9,} records: open {before * 1e3:8.1f} ms ({fmt(n / before)} records/s); "
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
