"""Every fault leasefence injects, each plugged into a hook of ``impl`` from outside.

``impl`` knows no fault (hooks, not fields: etcd's raft). What ``leasefence run --inject`` and the
campaign inject, and the hook each one plugs into:

- ``WorkerFaults``: late (held 1.5 x TTL), duplicated, malformed (garbage first), wrong-ID and
  missing-ID results, made by a worker (``transport.Respond``: ``worker_execute`` under MPI,
  ``InProcessTransport`` in process);
- ``Reorder``: any ready result next, not the oldest (``InProcessTransport``'s ``pick``; MPI's
  any-source receive reorders on its own);
- ``RestartFault``: the master restarts inside the running job (``DispatchHooks.restart_due``,
  ``Master.restart_in_job``);
- ``DuplicateCandidates``: an idle rank is first offered work another rank is running (the
  master's ``CandidatePolicy``);
- ``Compaction``: the journal compacted every N accepted completions (``DispatchHooks.on_result``);
- ``InjectedClock`` and ``simulate_reboot``: clock steps and a simulated host reboot (the
  master's clock, passed in).
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from leasefence.harness.injection import INJECTIONS as INJECTIONS
from leasefence.harness.injection import MASTER_INJECTIONS as MASTER_INJECTIONS
from leasefence.harness.injection import WORKER_INJECTIONS as WORKER_INJECTIONS
from leasefence.harness.injection import Injection as Injection
from leasefence.impl.transport import (
    DispatchHooks,
    InProcessTransport,
    ManualClock,
    Reply,
    encode_result,
)
from leasefence.impl.transport import (
    respond as honest_respond,
)
from leasefence.impl.wire import Rank, Result, StateTaskId, Tag, Work, WorkId
from leasefence.impl.workload import WorkerFn

if TYPE_CHECKING:  # a worker rank never loads the master's modules (``impl/mpirun.py``)
    from leasefence.impl.master import Master, ResultOutcome

log = logging.getLogger("leasefence.faults")


# Messages a "malformed" injection sends before the real result, in turn.
_GARBAGE: tuple[tuple[int, bytes], ...] = (
    (Tag.RESULT, b"\x80\x04\x95 not JSON, a pickle header"),
    (Tag.RESULT, b'{"v":1,"type":"result","work_id":"not-hex","ok":true,"cpu_s":0,"output":{}}'),
    (Tag.RESULT, b'{"v":2,"type":"result"}'),
    (99, b'{"v":1,"type":"mystery"}'),
    (Tag.WORK, b'{"v":1,"type":"work"}'),
)


# -- the workers' faults -------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkerFaults:
    """A worker's ``Respond`` with the injected faults: a wrong state task reported
    (``wrong-id``) or none and no generation (``missing-id``: an old-protocol worker); a garbage
    message first (``malformed``); the result held ``late_s`` seconds (``late``) and sent twice
    (``dup``)."""

    inject: Injection
    late_s: float = 0.0

    def respond(self, result: Result, rank: int, attempt: int) -> list[Reply]:
        """The messages a worker sends for ``result`` (its ``attempt``-th WORK of that ID):
        the honest worker's (``transport.respond``) when no fault is injected at all (a plain
        ``leasefence run``: no fault to draw for each result, issue 19)."""
        if not self.inject.kinds:
            return honest_respond(result, rank, attempt)
        hits = self.inject.hits
        w = result.work_id
        reported = result.state_task_id
        if hits("wrong-id", w, rank, attempt):
            reported = StateTaskId(hashlib.sha256(f"wrong:{reported}".encode()).hexdigest())
            result = replace(result, state_task_id=reported)
        elif hits("missing-id", w, rank, attempt):
            result = replace(result, state_task_id=None, generation=None)
        tag, data = encode_result(result)
        replies: list[Reply] = []
        if hits("malformed", w, rank, attempt):
            bad_tag, bad = _GARBAGE[int(w[:8], 16) % len(_GARBAGE)]
            replies.append(Reply(bad_tag, bad))
        hold = self.late_s if hits("late", w, rank, attempt) else 0.0
        replies.append(Reply(tag, data, hold))
        if hits("dup", w, rank, attempt):
            replies.append(Reply(tag, data, hold))
        return replies


class Reorder:
    """``reorder``: which of ``n`` ready messages goes next, at random (seeded)."""

    def __init__(self, seed: int) -> None:
        self._rng = random.Random(seed)

    def __call__(self, n: int) -> int:
        return self._rng.randrange(n)


def in_process(
    worker_fn: WorkerFn,
    ranks: Iterable[int] = (1, 2, 3),
    *,
    inject: Injection | None = None,
    clock: ManualClock | None = None,
    late_s: float = 0.0,
) -> InProcessTransport:
    """An ``InProcessTransport`` whose workers inject ``inject``'s faults (late ones held
    ``late_s`` seconds of ``clock``) and, with ``reorder``, hand over any ready reply next; they
    answer in frames of RESULTs, as a real worker does (``frame_results``)."""
    inject = inject or Injection()
    return InProcessTransport(
        worker_fn,
        ranks,
        respond=WorkerFaults(inject, late_s).respond,
        pick=Reorder(inject.seed) if "reorder" in inject.kinds else None,
        clock=clock,
        frame_results=True,  # as ``worker_execute`` answers a frame of quick items
    )


# -- the master's faults -------------------------------------------------------------------------

#: A dispatch as the restart fault remembers it: (rank, work, generation or None).
Dispatched = tuple[Rank, str, object]


@dataclass
class RestartFault(DispatchHooks):
    """``leasefence run --inject restart``: the master restarts inside the running job.

    ``Master.restart_in_job`` closes the master and opens a new one on the same journal,
    snapshot and trace (a new coordinator epoch, recovery with the TTL, its memory of
    dispatches lost, a ``RestartMaster`` trace event) while the workers keep running, so every
    result in flight reaches the new master. (A SIGKILL of rank 0 cannot show that: the whole
    ``mpiexec`` job dies with it, and the results with their workers.)

    When: armed once ``every`` results have been handled since the last (re)start, it fires
    right after the next round of dispatches that gave a rank its last free slot while that
    rank still held another dispatch (at depth 1: after any dispatch). That is where the model's
    counterexample of rank fencing at depth 2 starts (``leasefence model check --pipeline 2
    --fence rank``): a restart forgets a dispatch whose rank then gets another. No clock and no
    randomness: the points depend only on the order of the results.

    It also counts what crossed: results for a dispatch made before the last restart
    (``crossed``), of which the new master refused as stale or whose state commit it refused
    (``crossed_refused``), and of which committed a state task that a live dispatch of another
    work item on the same rank held (``state_taken``: the damage the model predicts for rank
    fencing; generation fencing keeps it at 0).
    """

    every: int = 10
    handled: int = 0
    restarts: int = 0
    crossed: int = 0
    crossed_refused: int = 0
    state_taken: int = 0
    in_flight: set[Dispatched] = field(default_factory=set, repr=False)

    def restart_due(self, master: Master, sent: Sequence[tuple[Rank, Work]]) -> bool:
        """Whether to restart now, right after ``sent`` went out."""
        if self.handled < self.every:
            return False
        return any(len(master.dispatches(rank)) >= master.pipeline for rank, _ in sent)

    def on_restart(self, old: Master, new: Master) -> None:
        """Remember what was in flight when ``old`` was restarted."""
        self.in_flight |= {(r, d.work_id, d.generation) for r, d in old.dispatches()}
        self.handled = 0
        self.restarts += 1

    def on_result(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        """Count one handled result."""
        self.handled += 1
        gen = result.generation  # None: rank fencing, or an old-protocol result
        if not any(
            (r, w) == (rank, result.work_id) and (gen is None or g in (None, gen))
            for r, w, g in self.in_flight
        ):
            return
        self.crossed += 1
        if outcome.stale or (outcome.task is not None and not outcome.state_ok):
            self.crossed_refused += 1
        if outcome.state_ok and any(
            d.task_id == outcome.task and d.work_id != result.work_id
            for _, d in master.dispatches(rank)
        ):
            self.state_taken += 1
            log.error(
                "rank %d: a result of work %s from before the restart completed state task %s, "
                "held by its live dispatch of another work item",
                rank,
                result.work_id[:12],
                str(outcome.task)[:12],
            )

    def summary(self) -> list[tuple[str, str]]:
        """The lines ``leasefence run`` prints about the restarts."""
        return [
            ("master restarts", f"{self.restarts} in the job (every {self.every} results)"),
            (
                "results across a restart",
                f"{self.crossed} ({self.crossed_refused} refused or stale, "
                f"{self.state_taken} took the state task of another live dispatch)",
            ),
        ]


class DuplicateCandidates:
    """``--duplicate-candidates RATE``, a ``CandidatePolicy``: with probability ``rate`` an idle
    rank is first offered a work item another rank is running, a concurrent candidate for the
    same work and state task that F314 must refuse."""

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = random.Random(f"{seed}/duplicate-candidates")

    def __call__(self, pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
        if running and self.rng.random() < self.rate:
            return [self.rng.choice(running), *pending]
        return pending


class Compaction(DispatchHooks):
    """``--compact-every N``: the journal compacted after every N accepted completions;
    ``compacted`` is told after each compaction."""

    def __init__(self, every: int, compacted: Callable[[], None] = lambda: None) -> None:
        self.every = every
        self.compacted = compacted
        self.done = 0

    def on_result(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        if not (outcome.work_ok and result.ok):
            return
        self.done += 1
        if self.every and self.done % self.every == 0:
            compact = getattr(master.journal, "compact", None)
            if compact is not None:
                compact()
                self.compacted()


# -- the clock -----------------------------------------------------------------------------------


class InjectedClock:
    """The master's Unix clock with faults read from a JSON file at each reading (``--clock-file``).

    ``{"wall_offset": S, "mono_origin": M}``: ``wall_offset`` seconds are added to ``time.time()``
    (a step forward or back of the wall clock); ``mono_origin`` is a reading of the host's
    monotonic clock taken at a simulated reboot, applied once when the master starts (see
    ``simulate_reboot``). A missing or unreadable file is no fault.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read(self) -> dict[str, float]:
        try:
            doc = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {}
        if not isinstance(doc, dict):
            return {}
        return {k: float(v) for k, v in doc.items() if isinstance(v, int | float)}

    def __call__(self) -> float:
        return time.time() + self.read().get("wall_offset", 0.0)


def simulate_reboot(origin: float) -> None:
    """A host reboot as this process sees it: ``time.monotonic()`` counts from ``origin`` (a
    monotonic reading taken at the simulated boot), as if the machine had booted then. The offset
    is constant for the life of the process, so the clock stays monotonic; only code that
    persists monotonic readings (F314 defect 3) can tell."""
    real = time.monotonic
    if origin <= 0 or origin > real():
        return
    time.monotonic = lambda: real() - origin
