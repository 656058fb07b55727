"""The system machine: the master machine plus crashes and restarts from disk, and trace
validation at the end of every run."""

from __future__ import annotations

from typing import Any

from hypothesis.stateful import initialize, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.coverage import COVERAGE
from leasefence.conformance.machines.base import ConformanceFailure
from leasefence.conformance.machines.master import MasterMachine
from leasefence.conformance.tracecheck import validate
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal, encode_record, legacy_lease_line
from leasefence.impl.trace import TraceWriter
from leasefence.model import journal as jo
from leasefence.model import system as sy
from leasefence.model.rules import CLOCK_UNIX
from leasefence.model.state import get


class SystemMachine(MasterMachine):
    """The whole system on real files: the master machine plus crashes and restarts from disk
    (master kill and restart into a new coordinator epoch, torn tails, compaction, a legacy
    journal at start); at the end the run's NDJSON trace is validated against the model."""

    NAME = "system"
    BOUNDS = gen.MASTER_BOUNDS

    def __init__(self, start: int = gen.START) -> None:
        super().__init__(start)
        self.trace_path = self.dir / "trace.ndjson"
        self.legacy_start = False

    @initialize(legacy=gen.maybe_legacy(gen.master_works))
    def open(self, legacy: tuple[str, int, int] | None) -> None:
        self.do_open(legacy)

    def do_open(self, legacy: tuple[str, int, int] | None) -> None:
        """Start the master. With ``legacy`` the files are those of a master that ran before
        F314: a snapshot of epoch 1 and a journal holding one record in the original format
        (LegacyRecord(w, r)); opening them is RestartMaster."""
        self.log.append({"action": "open", "args": [list(legacy) if legacy else None]})
        task_of = {str(i.work_id): str(i.state_task_id) for i in gen.CATALOGUE}
        self.trace = TraceWriter(
            self.trace_path,
            ttl=gen.TTL,
            ranks=gen.RANKS,
            task_of=task_of,
            pipeline=self.BOUNDS.pipeline,
            fence=self.BOUNDS.fence,
        )
        if legacy is not None:
            work, worker, stamp = legacy
            StateShardCoordinator(self.snapshot_path, clock=self.clock)  # epoch 1, saved
            self.journal_path.write_bytes(legacy_lease_line(work, worker, stamp))
            ok, journal = jo.legacy_record(self.m.journal, work, worker, stamp)
            assert ok
            self.m = sy.restart_master(self.m._replace(journal=journal), self.BOUNDS)
            self.case("legacy record at start")
            self.legacy_start = True
        self.master = self.open_master()
        self.opened = True
        self.compare("open", (legacy,))

    def killing(self) -> None:
        """Book a master kill: the results in flight of ranks holding two dispatches (beyond
        depth 1) will be late across the restart."""
        full = [r for r in gen.RANKS if len(sy.dispatches_of(self.m, r)) > 1]
        if full:
            self.case("master restart with two dispatches on one rank")
        mine = {(r, d.work, d.gen) for r in full for d in sy.dispatches_of(self.m, r)}
        self.pipelined_at_restart |= mine & set(self.in_flight())

    def do_restart_master(self) -> None:
        """RestartMaster: ``Master.restart_master`` closes the master (its memory is lost) and
        opens a new one on the same journal and snapshot: a new epoch, then recovery."""
        self.recovering()
        self.killing()
        if self.m.active:
            self.case("master restart with active dispatches")

        def model() -> int:
            self.m = sy.restart_master(self.m, self.BOUNDS)
            return self.m.coordinator.epoch

        def impl() -> int:
            self.master = self.master_().restart_master()
            coordinator = self.master.coordinator
            assert isinstance(coordinator, StateShardCoordinator)
            return coordinator.epoch

        self.step("restart_master", (), model, impl)

    def would_be_record(self, work: str, worker: int) -> bytes:
        body: dict[str, Any] = {
            "event": "lease",
            "work_id": work,
            "worker": worker,
            "updated": float(self.clock.now),
            "clock": CLOCK_UNIX,
            "attempt": (get(self.m.journal.attempts, work) or 0) + 1,
        }
        if self.BOUNDS.generations:
            # Any generation of this epoch: the record never completes, only its shape matters.
            body["generation"] = [self.m.coordinator.epoch, 1]
        return encode_record(body)

    def do_torn_tail(self, work: str, worker: int, cut: int) -> None:
        """The master is killed in the middle of appending a record it never acknowledged (the
        first ``cut`` bytes reach the file), then restarted: exactly RestartMaster."""
        self.case("torn tail")
        self.recovering()
        self.killing()
        record = self.would_be_record(work, worker)
        assert 0 < cut < len(record) - 1

        def model() -> None:
            self.m = sy.restart_master(self.m, self.BOUNDS)

        def impl() -> None:
            self.master_().close()
            self.master = None
            with self.journal_path.open("ab") as fh:
                fh.write(record[:cut])
            self.master = self.open_master()

        self.step("torn_tail", (work, worker, cut), model, impl)

    def do_compact_journal(self) -> None:
        """CompactJournal: the master's journal is compacted while the master runs."""
        self.case("compaction")

        def model() -> None:
            self.m = self.m._replace(journal=jo.compact_journal(self.m.journal))

        def impl() -> None:
            journal = self.master_().journal
            assert isinstance(journal, WorkLeaseJournal)
            journal.compact()

        self.step("compact_journal", (), model, impl)

    def teardown(self) -> None:
        try:
            if self.trace is not None:
                self.trace.close()
                self.trace = None
                # A legacy journal was written before the trace began: the trace cannot explain
                # the record the restarted master reads, so such a run is not validated.
                if self.legacy_start:
                    COVERAGE.hit(self.NAME, "trace:not validated (legacy journal at start)")
                elif self.trace_path.exists():
                    with self.trace_path.open(encoding="utf-8") as fh:
                        report = validate(fh)
                    if not report.ok:
                        raise ConformanceFailure(
                            f"the run's trace does not validate at line {report.line}: "
                            f"{report.divergence}"
                        )
                    COVERAGE.hit(self.NAME, f"trace:validated, steps {report.steps > 0}")
        finally:
            super().teardown()

    @rule()
    def restart_master(self) -> None:
        self.do_restart_master()

    @rule(work=gen.master_works, worker=gen.ranks, fraction=gen.cut_fractions)
    def torn_tail(self, work: str, worker: int, fraction: float) -> None:
        record = self.would_be_record(work, worker)
        self.do_torn_tail(work, worker, gen.cut_offset(len(record), fraction))

    @rule()
    def compact_journal(self) -> None:
        self.do_compact_journal()
