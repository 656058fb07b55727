"""``leasefence run`` with its faults: the hooks of ``harness.faults`` assembled around impl's run."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from leasefence.harness.faults import (
    Compaction,
    DuplicateCandidates,
    InjectedClock,
    Injection,
    RestartFault,
    WorkerFaults,
    simulate_reboot,
)
from leasefence.impl.durable import open_nofollow
from leasefence.impl.mpirun import RunConfig, RunHooks, make_parents
from leasefence.impl.mpirun import run as run_job
from leasefence.impl.transport import Reply
from leasefence.impl.wire import Rank, Result, Work, WorkId
from leasefence.impl.workload import reached

if TYPE_CHECKING:  # a worker rank never loads the master's modules (``impl/mpirun.py``)
    from leasefence.impl.master import CandidatePolicy, Master, ResultOutcome


@dataclass(frozen=True)
class FaultConfig:
    """The faults of one run (``leasefence run --inject ...`` and the campaign's flags); all
    off by default."""

    inject: Injection = field(default_factory=Injection)
    late_s: float | None = None  # default: 1.5 x ttl
    clock_file: Path | None = None
    compact_every: int = 0
    events: Path | None = None
    duplicate_candidates: float = 0.0
    # ``--inject restart``: results handled between in-job master restarts (``RestartFault``).
    restart_every: int = 10


class EventLog:
    """The campaign's measurement log (``--events``): one NDJSON line per master start, dispatch
    sent, result handled and compaction, stamped with the real (uninjected) Unix time."""

    def __init__(self, path: Path) -> None:
        make_parents(path)
        fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        self._fh = os.fdopen(fd, "a", encoding="utf-8")

    def write(self, kind: str, **fields: Any) -> None:
        fields.update(kind=kind, t=time.time())
        self._fh.write(json.dumps(fields, separators=(",", ":")) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class FaultHooks(RunHooks):
    """The run's hooks with ``faults`` plugged in: the workers' faults, the injected clock and
    reboot, the duplicate candidates, the in-job restart, compaction and the event log."""

    def __init__(self, config: RunConfig, faults: FaultConfig) -> None:
        self.faults = faults
        late_s = faults.late_s if faults.late_s is not None else 1.5 * config.ttl
        self.workers = WorkerFaults(faults.inject, late_s)
        self.injected = InjectedClock(faults.clock_file) if faults.clock_file else None
        self.policy = DuplicateCandidates(faults.duplicate_candidates, config.seed)
        self.restart = (
            RestartFault(faults.restart_every) if "restart" in faults.inject.kinds else None
        )
        self.compaction = Compaction(faults.compact_every, self._compacted)
        self.events: EventLog | None = None

    @property
    def _inject(self) -> frozenset[str]:
        return self.faults.inject.kinds

    def on_start(self) -> None:
        if self.injected is not None:
            simulate_reboot(self.injected.read().get("mono_origin", 0.0))
        if self.faults.events is not None:
            self.events = EventLog(self.faults.events)

    def clock(self) -> float:
        return self.injected() if self.injected is not None else time.time()

    def candidates(self, pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
        return self.policy(pending, running)

    def candidate_policy(self) -> CandidatePolicy:
        # Without duplicate candidates the policy offers the pending work unchanged: the
        # master's own ``pending_only`` then (its lazy queue; issue 19).
        from leasefence.impl.master import pending_only  # rank 0 only

        return pending_only if self.faults.duplicate_candidates == 0 else self.candidates

    def respond(self, result: Result, rank: int, attempt: int) -> Sequence[Reply]:
        return self.workers.respond(result, rank, attempt)

    def on_open(self, master: Master, restarting: bool) -> None:
        if self.events is not None:
            self.events.write("start", pid=os.getpid(), restart=restarting)

    def on_dispatch(self, master: Master, rank: Rank, work: Work) -> None:
        if self.events is not None:
            self.events.write("dispatch", r=int(rank), w=work.work_id)

    def on_result(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        if self.restart is not None:
            self.restart.on_result(master, rank, result, outcome)
        if self.events is None:
            return  # compaction, as the event log, is the campaign's: only with --events
        self._log_result(master, result, outcome)
        self.compaction.on_result(master, rank, result, outcome)

    def _log_result(self, master: Master, result: Result, outcome: ResultOutcome) -> None:
        assert self.events is not None
        item = master.catalogue.get(result.work_id)
        accepted = not outcome.stale and outcome.work_ok and result.ok
        self.events.write(
            "result",
            w=result.work_id,
            ok=result.ok,
            cpu_s=result.cpu_s,
            stale=outcome.stale,
            work_ok=outcome.work_ok,
            state_ok=outcome.state_ok,
            reached=item.target
            if accepted and item is not None and reached(item, result.output)
            else None,
        )

    def _compacted(self) -> None:
        if self.events is not None:
            self.events.write("compact")

    def restart_due(self, master: Master, sent: Sequence[tuple[Rank, Work]]) -> bool:
        return self.restart is not None and self.restart.restart_due(master, sent)

    def on_restart(self, old: Master, new: Master) -> None:
        if self.restart is not None:
            self.restart.on_restart(old, new)
        if self.events is not None:
            epoch = getattr(new.coordinator, "epoch", None)
            self.events.write("restart", epoch=epoch, in_flight=len(old.dispatches()))

    def on_end(self, master: Master) -> None:
        if self.events is not None:
            # unsettled: items neither completed nor given up (EveryItemSettled; 0 in a good run).
            self.events.write(
                "end", unsettled=len(master.unfinished()), **master.counters.as_dict()
            )

    def close(self) -> None:
        if self.events is not None:
            self.events.close()

    def describe(self) -> str:
        return f", inject {','.join(sorted(self._inject))}" if self._inject else ""

    def summary(self) -> list[tuple[str, str]]:
        return self.restart.summary() if self.restart is not None else []


def run(config: RunConfig, faults: FaultConfig) -> int:
    """``leasefence run`` on this rank with ``faults`` injected; the rank's exit status."""
    return run_job(config, FaultHooks(config, faults))
