"""How a rank waits for its next MPI message: spin, yield, sleep or block, chosen for its node.

A round trip costs whatever the two waiting sides add to the work, so the wait is a schedule
of what to do after each empty ``Improbe``: poll again at once (spin), give the core away for
a moment (``os.sched_yield``), or sleep a growing pause. ``PollPolicy.wait`` is that schedule as
a plain function of the time waited so far (tests drive it without a clock); ``receive`` runs it.

Modes (``leasefence run --poll``):

``auto``   the default. With at most one rank per core on this node: spin 2 ms, yield polls for
           20 ms more, then sleep 0.1 ms doubling to 2 ms (a reply that comes quickly is caught
           spinning; a long task costs a core only briefly). With more ranks than cores, a
           waiting rank leaves the cores to the ranks that compute (yielding polls made a z3 run
           2.7x slower on 2 cores with 4 ranks: a yielding rank is runnable, and keeps taking its
           share) and still wakes soon after its message came: with frames (``wire.frames``) a
           rank waits for a whole frame, and a 2 ms sleep left the others idle (20,000 trivial
           tasks on 3 ranks and 2 cores: 0.57-0.70 s with sleeps up to 0.2 ms, 1.7-2.0 s up to
           2 ms). There the master (rank 0) spins 50 µs, never yields, then sleeps 20 µs
           doubling to 0.2 ms; a worker never spins and sleeps 20 µs doubling to 50 µs. The
           master decides every dispatch and result one after the other, so it is the pipeline's
           narrowest part whenever tasks are quick: a worker spinning for its next WORK took the
           core the master needed to send it, and the master then waited for the RESULTs of
           workers that slept (issue 19, 20,000 trivial tasks, 3 ranks on 2 cores, median of 3
           runs of each interleaved, compiled: 14.3-17.7 us a round trip with the workers'
           spin, 10.8-11.6 without it and with their sleeps capped at 50 µs; the master waited
           for results 3.7-6.1 us a round trip, then 0.8-1.1). A worker that waits long wakes
           about 7,000 to 10,000 times a second (a 20-50 µs sleep lasts 0.1-0.13 ms with the
           kernel's timer slack), and on the 2-core VM each wake costs about 20 µs of CPU
           (``/proc/self/schedstat``, 3,000 sleeps in a loop; 33 µs after a 0.2 ms sleep): a
           fifth of a core for each waiting worker (rank 0 pinned alone on a core ran no faster
           for it: the scheduler already leaves the master a core of its own). Sleeps up
           to 0.2 ms woke less often, but the master then waited for results longer (10.1-10.3 ->
           11.4-12.3 us a round trip, medians of 3); nor did a first sleep of half the last
           wait help (measured beside a busy core only).
``spin``   poll without pause (lowest latency; a waiting rank holds a core).
``yield``  ``os.sched_yield`` between polls.
``sleep``  the old schedule: sleep 0.2 ms doubling to 5 ms.
``block``  a wait with no deadline (a worker waiting for its next WORK) blocks in ``Probe``;
           a wait with a deadline follows ``auto`` (MPI has no timed blocking probe). MPICH
           busy-polls inside a blocking call, so this too holds a core while waiting.

Whether a node has more ranks than cores is asked once, collectively (``node_policy``: the
ranks of ``COMM_TYPE_SHARED`` against the cores this process may run on).
"""

from __future__ import annotations

import functools
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

POLL_MODES = ("auto", "spin", "yield", "sleep", "block")


@functools.cache
def mpi() -> Any:
    """The ``mpi4py.MPI`` module, imported on first use (this package imports without MPI) and
    then returned at once: a ``from mpi4py import MPI`` in a function costs a call into
    ``importlib`` each time, and the loops take several per message (issue 19)."""
    from mpi4py import MPI

    return MPI


#: ``PollPolicy.wait``'s answers besides a sleep in seconds.
AGAIN, YIELD = -1.0, 0.0


@dataclass(frozen=True)
class PollPolicy:
    """One rank's waiting schedule: ``spin`` seconds of tight polls, then ``yield_for`` seconds of
    polls separated by ``os.sched_yield``, then sleeps from ``first_sleep`` doubling up to
    ``max_sleep``; ``block``: an untimed wait blocks in ``Probe``."""

    mode: str
    spin: float
    yield_for: float
    first_sleep: float
    max_sleep: float
    block: bool = False

    @classmethod
    def of(cls, mode: str, oversubscribed: bool, worker: bool = False) -> PollPolicy:
        """The schedule of ``mode`` (one of ``POLL_MODES``) on a node with more ranks than cores
        (``oversubscribed``) or not, for a worker rank or the master (module doc)."""
        if mode == "spin":
            return cls(mode, math.inf, 0.0, 0.0, 0.0)
        if mode == "yield":
            return cls(mode, 0.0, math.inf, 0.0, 0.0)
        if mode == "sleep":
            return cls(mode, 0.0, 0.0, 0.0002, 0.005)
        if mode not in ("auto", "block"):
            raise ValueError(f"poll mode {mode!r}: expected one of {', '.join(POLL_MODES)}")
        if oversubscribed and worker:
            return cls(mode, 0.0, 0.0, 0.00002, 0.00005, block=mode == "block")
        if oversubscribed:
            return cls(mode, 0.00005, 0.0, 0.00002, 0.0002, block=mode == "block")
        return cls(mode, 0.002, 0.02, 0.0001, 0.002, block=mode == "block")

    def wait(self, waited: float, last_sleep: float) -> float:
        """After an empty poll ``waited`` seconds into a wait whose last sleep was
        ``last_sleep`` (0: none yet): ``AGAIN`` (poll at once), ``YIELD``, or seconds to sleep."""
        if waited < self.spin:
            return AGAIN
        if waited < self.spin + self.yield_for:
            return YIELD
        if last_sleep <= 0.0:
            return self.first_sleep
        return min(last_sleep * 2, self.max_sleep)


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, bounded by a cgroup CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cores


def guess_policy(comm: Any, mode: str = "auto") -> PollPolicy:
    """The policy of ``mode`` for this rank of ``comm`` (rank 0 the master, any other a worker)
    without asking the other ranks: every rank of ``comm`` is taken to share this node (the
    conservative guess; ``node_policy`` knows)."""
    return PollPolicy.of(mode, comm.Get_size() > usable_cores(), comm.Get_rank() != 0)


def node_policy(comm: Any, mode: str = "auto") -> PollPolicy:
    """The policy of ``mode`` for this rank of ``comm`` (rank 0 the master, any other a worker)
    on its node: oversubscribed when the ranks of ``comm`` on this node (``COMM_TYPE_SHARED``)
    outnumber its usable cores. Collective: every rank of ``comm`` calls it at the same point."""
    lib = mpi()
    local = comm.Split_type(lib.COMM_TYPE_SHARED)
    try:
        ranks_here = local.Get_size()
    finally:
        local.Free()
    return PollPolicy.of(mode, ranks_here > usable_cores(), comm.Get_rank() != 0)


#: ``Improbe`` calls a check for a message already waiting makes before it answers None (the
#: master drains its results so: MPICH often matches a message that has arrived only on the
#: second call, as each call drives its progress engine once).
READY_POLLS = 4
#: The policy of such a check: ``receive(comm, source, 0.0, READY)`` polls ``READY_POLLS`` times.
READY = PollPolicy("ready", 0.0, 0.0, 0.0, 0.0)


def receive(comm: Any, source: int, timeout: float | None, policy: PollPolicy) -> Any:
    """``(message, status)`` of the next message from ``source`` (``MPI.ANY_SOURCE``: any), an
    ``MPI.Message`` to ``Recv``; None after ``timeout`` seconds (None: wait for ever)."""
    lib = mpi()
    status = lib.Status()
    for _ in range(READY_POLLS if policy is READY else 1):
        message = comm.improbe(source=source, tag=lib.ANY_TAG, status=status)
        if message is not None:
            return message, status
    if policy is READY:
        return None
    if timeout is None and policy.block:
        return comm.mprobe(source=source, tag=lib.ANY_TAG, status=status), status
    start = time.monotonic()
    deadline = math.inf if timeout is None else start + timeout
    slept = 0.0
    while True:
        now = time.monotonic()
        if now >= deadline:
            return None
        step = policy.wait(now - start, slept)
        if step > 0:
            slept = step
            time.sleep(min(step, deadline - now))
        elif step == YIELD:
            os.sched_yield()
        message = comm.improbe(source=source, tag=lib.ANY_TAG, status=status)
        if message is not None:
            return message, status
