"""The ``scale`` benchmark: the master's time and memory per item against the size of the run.

Issue 19 asks for a cost per item that does not grow with the run. One in-process run per size
(``Sizes.scale``) drives ``Master`` over the in-memory journal and a coordinator without a
snapshot (no MPI, no disk: the master's own decisions), three ranks answering every WORK at
once, until every item is completed; it prints items per second and the peak of the memory
Python allocated during the run (``tracemalloc``, measured in a second run of the same size,
since tracing slows the first: about 85 s of the 10⁵-item size), per size and per item. Flat
means the largest size's items per second is close to the smallest's.
"""

from __future__ import annotations

import gc
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.harness.bench.common import Sizes, fmt
from leasefence.harness.bench.memory_journal import MemoryJournal
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.master import Master
from leasefence.impl.wire import Rank, Result
from leasefence.impl.workload import generate

RANKS = (Rank(1), Rank(2), Rank(3))


def _drive(items: int) -> int:
    """Complete ``items`` work items through a master; returns the round trips it took."""
    clock = time.time
    master = Master(
        MemoryJournal(clock),
        StateShardCoordinator(None, clock=clock),
        generate(items, seed=0),
        ttl=3600.0,
        clock=clock,
    )
    trips = 0
    while not master.finished:
        sends = master.dispatch_pending(RANKS)
        if not sends:
            raise RuntimeError(f"the master stopped dispatching with {items} items unfinished")
        for rank, work in sends:
            master.handle_result(
                rank, Result(work.work_id, work.state_task_id, True, 0.0, {}, work.generation)
            )
            trips += 1
    return trips


def _timed(items: int) -> float:
    start = time.perf_counter()
    _drive(items)
    return time.perf_counter() - start


def _peak(items: int) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        _drive(items)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_scale(sizes: Sizes, where: Path, say: Callable[[str], None]) -> dict[str, Any]:
    del where  # nothing is written
    rows = []
    for n in sizes.scale:
        seconds = _timed(n)
        peak = _peak(n)
        rows.append(
            {
                "items": n,
                "seconds": seconds,
                "items_per_s": n / seconds,
                "peak_bytes": peak,
                "peak_bytes_per_item": peak / n,
            }
        )
        say(
            f"  {n:>9,} items: {seconds:7.2f} s, {fmt(n / seconds)} items/s; "
            f"peak {peak / 2**20:7.1f} MiB ({fmt(peak / n)} bytes/item)"
        )
    first, last = rows[0], rows[-1]
    return {
        "sizes": rows,
        "largest_over_smallest_items_per_s": last["items_per_s"] / first["items_per_s"],
        "largest_over_smallest_bytes_per_item": last["peak_bytes_per_item"]
        / first["peak_bytes_per_item"],
    }
