"""The system machine: the master machine plus crashes and restarts from disk, and trace
validation at the end of every run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar, TypeVar

from hypothesis.stateful import initialize, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.actions import snake
from leasefence.conformance.coverage import COVERAGE
from leasefence.conformance.machines.base import ConformanceFailure
from leasefence.conformance.machines.master import MasterMachine
from leasefence.conformance.refinement import Reads, coordinator_fields, persisted_differences
from leasefence.conformance.tracecheck import validate
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal, encode_record, legacy_lease_line
from leasefence.impl.trace import TraceWriter
from leasefence.impl.wire import Generation, Rank, WorkId
from leasefence.model import journal as jo
from leasefence.model import system as sy
from leasefence.model.rules import CLOCK_UNIX
from leasefence.model.state import State, get
from leasefence.model.system import Bounds

M = TypeVar("M", bound="SystemMachine")


def kw(generation: Generation | None) -> dict[str, Generation]:
    """``generation=`` for a container call, only when there is one (as the master calls them)."""
    return {} if generation is None else {"generation": generation}


#: A memory file system, when there is one: the transition replay's files go there (fsync is
#: then free; every write, rename and fsync call still runs).
MEMORY_DIR = "/dev/shm"


def bounded(machine: type[M], bounds: Bounds, workdir: str | None = None) -> type[M]:
    """``machine`` running under ``bounds`` (its ranks, TTL, depth, fence and limits; the work
    IDs must be the catalogue's), its files in ``workdir``: the transition replay's and a
    bounded scenario's machine."""
    attrs = {
        "NAME": f"{machine.NAME} at bounds",  # its own coverage counts, apart from Hypothesis's
        "BOUNDS": replace(bounds),
        "WORKDIR": workdir,
        "READS": {},
        "__doc__": bounded.__doc__,
    }
    return type(f"{machine.__name__}Bounded", (machine,), attrs)


class SystemMachine(MasterMachine):
    """The whole system on real files: the master machine plus crashes and restarts from disk
    (master kill and restart into a new coordinator epoch, torn tails, compaction, a legacy
    journal at start); at the end the run's NDJSON trace is validated against the model."""

    NAME = "system"
    BOUNDS = gen.MASTER_BOUNDS
    #: A memo of fresh reads of the files by their bytes (``persisted_differences``): a bounded
    #: machine, which replays many runs through the same states, keeps one; None reads afresh.
    READS: ClassVar[Reads | None] = None

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
            ttl=self.BOUNDS.ttl,
            ranks=self.BOUNDS.ranks,
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

    def compare(self, action: str, args: tuple[object, ...]) -> None:
        """The master machine's comparison, then every persisted field: what the journal and
        snapshot files hold, read afresh, equals the objects in memory."""
        super().compare(action, args)
        wrong = persisted_differences(self.master_(), reads=self.READS)
        if wrong:
            raise ConformanceFailure(
                f"after {action}{args} the files differ from memory:\n  " + "\n  ".join(wrong)
            )

    def surviving(self) -> dict[str, object]:
        """What a restart must keep exactly: every task's statistics (zero ones included) and
        the journal's completed IDs and attempts."""
        coordinator = self.master_().coordinator
        assert isinstance(coordinator, StateShardCoordinator)
        journal = self.master_().journal
        assert isinstance(journal, WorkLeaseJournal)
        return {
            "stats": coordinator_fields(coordinator)["stats"],
            "completed": journal.completed,
            "attempts": dict(journal.attempts),
        }

    def check_survived(self, before: dict[str, object]) -> None:
        after = self.surviving()
        lost = [f"{k}: {before[k]!r} -> {after[k]!r}" for k in before if before[k] != after[k]]
        if lost:
            raise ConformanceFailure("a restart did not keep " + "; ".join(lost))

    def killing(self) -> None:
        """Book a master kill: the results in flight of ranks holding two dispatches (beyond
        depth 1) will be late across the restart."""
        full = [r for r in self.BOUNDS.ranks if len(sy.dispatches_of(self.m, r)) > 1]
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
            before = self.surviving()
            self.master = self.master_().restart_master()
            self.check_survived(before)
            coordinator = self.master.coordinator
            assert isinstance(coordinator, StateShardCoordinator)
            return coordinator.epoch

        self.step("restart_master", (), model, impl)

    def crash(
        self, name: str, args: tuple[object, ...], model: State, first: Callable[[], None]
    ) -> None:
        """A Crash action: the model's successor is ``model``; on the implementation ``first()``
        writes the journal's part of the step straight to the running master's journal (no
        trace line: the step never finished), then the master is killed and opened again on
        the same files (its restart traces what it read: trace validation names the crash)."""
        self.case(f"crash: {name}")
        self.recovering()
        self.killing()

        def on_model() -> None:
            self.m = model

        def impl() -> None:
            before = self.surviving()
            first()
            self.master_().close()
            self.master = None
            self.master = self.open_master()
            survived = self.surviving()
            assert survived["stats"] == before["stats"], "a crash changed the statistics"

        self.step(snake(name), args, on_model, impl)

    def do_crash_dispatch_work(self, work: str, rank: int) -> None:
        """CrashDispatchWork(w, r): the master is killed after ``journal.lease`` of a dispatch
        (before the state lease), then restarted."""
        model = sy.crash_dispatch_work(self.m, work, rank, self.BOUNDS)
        assert model is not None, f"CrashDispatchWork({work}, {rank}) is not enabled"
        model_gen = sy.next_generation(self.m, rank, self.BOUNDS)

        def first() -> None:
            master = self.master_()
            generation = master.next_generation(Rank(rank))
            self.names.bind(rank, generation, model_gen)
            assert master.journal.lease(WorkId(work), rank, **kw(generation))

        self.crash("CrashDispatchWork", (work, rank), model, first)

    def do_crash_deliver_result(
        self,
        rank: int,
        work: str,
        reported: str | None,
        ok: bool,
        generation: int = 0,
        presented: int | None = None,
    ) -> None:
        """CrashDeliverResult(r, w, reported, ok, withgen): a result in flight is received, its
        journal part (``complete`` or ``abandon`` with the master's token) is written, and the
        master is killed before the coordinator's, then restarted; the message is consumed."""
        p = generation if presented is None else presented
        key = (rank, work, generation)
        assert key in self.in_flight(), f"no result of {key} is in flight"
        model = sy.crash_deliver_result(
            self.m, rank, work, reported, ok, self.BOUNDS, generation, p
        )
        assert model is not None, f"CrashDeliverResult{key} is not enabled"
        found = sy.found_dispatches(self.m, rank, work, p)
        token = self.impl_generation(rank, sy.result_token(found, p))

        def first() -> None:
            journal = self.master_().journal
            call = journal.complete if ok else journal.abandon
            assert call(WorkId(work), worker=rank, **kw(token))
            if self.BOUNDS.generations:
                self.env.gnet = self.env.gnet - {key}
            else:
                self.env.net = self.env.net - {(rank, work)}

        args: tuple[object, ...] = (rank, work, reported, ok)
        if self.BOUNDS.generations:
            args += (generation, p)
        self.crash("CrashDeliverResult", args, model, first)
        self.delivered.add(key)

    def do_crash_reclaim_expired(self) -> None:
        """CrashReclaimExpired: ``journal.recover(ttl)`` reaches disk, the master is killed
        before the coordinator's recovery, then restarted."""
        model = sy.crash_reclaim_expired(self.m, self.BOUNDS)
        assert model is not None, "CrashReclaimExpired is not enabled"

        def first() -> None:
            assert self.master_().journal.recover(self.BOUNDS.ttl)

        self.crash("CrashReclaimExpired", (), model, first)

    def do_legacy_record(self, work: str, worker: int) -> None:
        """LegacyRecord(w, r) on a running master (enabled while the journal holds no record):
        its journal is closed, given one line in F314's original format stamped
        ``BOUNDS.legacy_stamp``, and opened again; nothing else restarts. The trace cannot
        explain the record, so the run's trace is not validated."""
        self.case("legacy record while running")
        self.legacy_start = True
        stamp = self.BOUNDS.legacy_stamp

        def model() -> bool:
            ok, journal = jo.legacy_record(self.m.journal, work, worker, stamp)
            self.m = self.m._replace(journal=journal)
            return ok

        def impl() -> bool:
            master = self.master_()
            journal = master.journal
            assert isinstance(journal, WorkLeaseJournal)
            if journal.attempts:
                return False
            journal.close()
            with self.journal_path.open("ab") as fh:
                fh.write(legacy_lease_line(work, worker, stamp))
            master.journal = WorkLeaseJournal(self.journal_path, clock=master.clock)
            return True

        self.step("legacy_record", (work, worker), model, impl)

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
            before = self.surviving()
            self.master_().close()
            self.master = None
            with self.journal_path.open("ab") as fh:
                fh.write(record[:cut])
            self.master = self.open_master()
            self.check_survived(before)

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
