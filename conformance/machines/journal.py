"""The journal machine: ``WorkLeaseJournal`` on a real file against ``model.journal``."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines.base import ConformanceFailure, ConformanceMachine, file_bytes
from leasefence.conformance.refinement import journal_state
from leasefence.impl.journal import WorkLeaseJournal, encode_record, legacy_lease_line
from leasefence.model import journal as jo
from leasefence.model.rules import CLOCK_UNIX
from leasefence.model.state import State, get


class JournalMachine(ConformanceMachine):
    """``WorkLeaseJournal`` against ``model.journal``, on a real file in a temporary directory."""

    NAME = "journal"
    BOUNDS = gen.JOURNAL_BOUNDS
    CHECKED = frozenset({"TypeOK", "L5_LegacyMigratable", "NoStuckLease"})

    def __init__(self, start: int = gen.START) -> None:
        super().__init__(start)
        self.path = self.dir / ".work_leases.jsonl"
        self.j: WorkLeaseJournal | None = None
        self.past_owners: dict[str, set[int]] = {}

    def journal(self) -> WorkLeaseJournal:
        assert self.j is not None
        return self.j

    def impl_state(self) -> State:
        return self.environment().state(journal_state(self.journal()))

    def close_impl(self) -> None:
        if self.j is not None:
            self.j.close()
            self.j = None

    def do_open(self, legacy: tuple[str, int, int] | None) -> None:
        """Open the journal; with ``legacy``, the file first holds one record in F314's original
        format (LegacyRecord(w, r) with a monotonic stamp from an earlier boot)."""
        self.log.append({"action": "open", "args": [list(legacy) if legacy else None]})
        if legacy is not None:
            work, worker, stamp = legacy
            self.path.write_bytes(legacy_lease_line(work, worker, stamp))
            ok, journal = jo.legacy_record(self.m.journal, work, worker, stamp)
            assert ok
            self.m = self.m._replace(journal=journal)
            self.past_owners.setdefault(work, set()).add(worker)
            self.case("legacy record at start")
        self.j = WorkLeaseJournal(self.path, clock=self.clock)
        self.opened = True
        self.compare("open", (legacy,))

    # A legacy record at start one time in two (``gen.maybe_legacy``: one in three, and far
    # fewer than that on some seeds, 5 of 66 examples on seed 6): the journal machine is where
    # a legacy lease must be reclaimed.
    @initialize(legacy=st.none() | st.tuples(gen.journal_works, gen.ranks, gen.legacy_stamps))
    def open(self, legacy: tuple[str, int, int] | None) -> None:
        self.do_open(legacy)

    def _unchanged_on_refusal(self, refused: bool, before: bytes, action: str) -> None:
        if refused and file_bytes(self.path) != before:
            raise ConformanceFailure(f"L3/L2 on disk: a refused {action} changed the journal file")

    def do_lease_work(self, work: str, worker: int) -> None:
        """LeaseWork(w, r): ``WorkLeaseJournal.lease``."""
        held = get(self.m.journal.leases, work)
        if held is not None:
            self.case("refused duplicate lease")
        file_before = file_bytes(self.path)

        def model() -> bool:
            ok, journal = jo.lease_work(self.m.journal, work, worker, self.m.wall, self.m.mono)
            self.m = self.m._replace(journal=journal)
            return ok

        def impl() -> bool:
            ok = self.journal().lease(work, worker)
            self._unchanged_on_refusal(not ok, file_before, "lease")
            return ok

        if self.step("lease_work", (work, worker), model, impl):
            self.past_owners.setdefault(work, set()).add(worker)

    def _fenced_case(self, work: str, worker: int | None) -> None:
        held = get(self.m.journal.leases, work)
        if worker is None or held is None or held.owner == worker:
            return
        self.case("wrong-owner complete or abandon refused")
        if worker in self.past_owners.get(work, set()):
            self.case("late complete after reclaim and re-lease")

    def do_complete_work(self, work: str, worker: int | None) -> None:
        """CompleteWork(w, r): ``WorkLeaseJournal.complete`` (``worker=None``: maintenance)."""
        self._fenced_case(work, worker)
        file_before = file_bytes(self.path)

        def model() -> bool:
            ok, journal = jo.complete_work(self.m.journal, work, worker)
            self.m = self.m._replace(journal=journal)
            return ok

        def impl() -> bool:
            ok = self.journal().complete(work, worker)
            self._unchanged_on_refusal(not ok, file_before, "complete")
            return ok

        self.step("complete_work", (work, worker), model, impl)

    def do_abandon_work(self, work: str, worker: int | None) -> None:
        """AbandonWork(w, r): ``WorkLeaseJournal.abandon``."""
        self._fenced_case(work, worker)
        file_before = file_bytes(self.path)

        def model() -> bool:
            ok, journal = jo.abandon_work(self.m.journal, work, worker)
            self.m = self.m._replace(journal=journal)
            return ok

        def impl() -> bool:
            ok = self.journal().abandon(work, worker)
            self._unchanged_on_refusal(not ok, file_before, "abandon")
            return ok

        self.step("abandon_work", (work, worker), model, impl)

    def do_recover_work(self, ttl: int) -> None:
        """RecoverWork: ``WorkLeaseJournal.recover(ttl)``."""
        self.recovering()
        leases = self.m.journal.leases

        def model() -> list[str]:
            gone, journal = jo.recover_work(self.m.journal, ttl, self.m.wall, self.m.mono)
            self.m = self.m._replace(journal=journal)
            return list(gone)

        def impl() -> list[str]:
            return self.journal().recover(ttl)

        gone = self.step("recover_work", (ttl,), model, impl)
        assert isinstance(gone, list)
        if any(x.clock != CLOCK_UNIX for w, x in leases if w in gone):
            self.case("legacy lease reclaimed")
        if ttl > 0:
            self.future_dated(leases, tuple(gone))

    def do_compact_journal(self) -> None:
        """CompactJournal: ``WorkLeaseJournal.compact``; one record per ID ever leased after it."""
        if self.m.journal.leases:
            self.case("compaction with active leases")

        def model() -> None:
            self.m = self.m._replace(journal=jo.compact_journal(self.m.journal))

        def impl() -> None:
            j = self.journal()
            j.compact()
            known = j.completed | j.leases.keys() | j.attempts.keys()
            lines = file_bytes(self.path).splitlines()
            if len(lines) != len(known):
                raise ConformanceFailure(
                    f"compaction wrote {len(lines)} records for {len(known)} known work IDs"
                )

        self.step("compact_journal", (), model, impl)

    def do_reopen(self) -> None:
        """Close and reopen from disk: the abstract state is what the file says."""
        self.case("reopen")

        def model() -> None:
            pass

        def impl() -> None:
            self.journal().close()
            self.j = WorkLeaseJournal(self.path, clock=self.clock)

        self.step("reopen", (), model, impl)

    def would_be_record(self, work: str, worker: int) -> bytes:
        attempt = (get(self.m.journal.attempts, work) or 0) + 1
        return encode_record(
            {
                "event": "lease",
                "work_id": work,
                "worker": worker,
                "updated": float(self.clock.now),
                "clock": CLOCK_UNIX,
                "attempt": attempt,
            }
        )

    def do_torn_tail(self, work: str, worker: int, cut: int) -> None:
        """A crash in the middle of an unacknowledged append: the first ``cut`` bytes of a would-be
        record reach the file, then the journal is reopened. Nothing changes (F314 §3.2 (4))."""
        self.case("torn tail")
        record = self.would_be_record(work, worker)
        assert 0 < cut < len(record) - 1
        torn = record[:cut]

        def model() -> None:
            pass

        def impl() -> None:
            self.journal().close()
            with self.path.open("ab") as fh:
                fh.write(torn)
            self.j = WorkLeaseJournal(self.path, clock=self.clock)
            if not self.j.torn_tail.endswith(torn):
                raise ConformanceFailure(f"reopen did not see the torn tail {torn!r}")

        self.step("torn_tail", (work, worker, cut), model, impl)

    def _holder(self, work: str) -> int | None:
        held = get(self.m.journal.leases, work)
        return None if held is None else held.owner

    @rule(work=gen.journal_works, data=st.data())
    def lease_work(self, work: str, data: st.DataObject) -> None:
        worker = data.draw(gen.candidates(self.past_owners.get(work, set())), label="worker")
        self.do_lease_work(work, worker)

    @rule(work=gen.journal_works, data=st.data())
    def complete_work(self, work: str, data: st.DataObject) -> None:
        past = self.past_owners.get(work, set())
        worker = data.draw(gen.fences_for(self._holder(work), past), label="worker")
        self.do_complete_work(work, worker)

    @rule(work=gen.journal_works, data=st.data())
    def abandon_work(self, work: str, data: st.DataObject) -> None:
        past = self.past_owners.get(work, set())
        worker = data.draw(gen.fences_for(self._holder(work), past), label="worker")
        self.do_abandon_work(work, worker)

    def late_callers(self) -> list[tuple[str, int]]:
        """(work, rank) pairs where the rank held the work before and another rank holds it now."""
        return [
            (w, r)
            for w, x in self.m.journal.leases
            for r in sorted(self.past_owners.get(w, set()) - {x.owner})
        ]

    @precondition(lambda self: bool(self.late_callers()))
    @rule(data=st.data(), complete=st.booleans())
    def late_complete_work(self, data: st.DataObject, complete: bool) -> None:
        """CompleteWork/AbandonWork by a former owner after its lease ended and another rank
        leased the work."""
        work, worker = data.draw(st.sampled_from(self.late_callers()), label="late caller")
        if complete:
            self.do_complete_work(work, worker)
        else:
            self.do_abandon_work(work, worker)

    @rule(ttl=gen.ttls)
    def recover_work(self, ttl: int) -> None:
        self.do_recover_work(ttl)

    def future_leases(self) -> list[str]:
        """Work IDs whose Unix lease is dated more than the TTL after the wall clock (it was
        stepped back after the lease)."""
        ttl = self.BOUNDS.ttl
        return [
            w
            for w, x in self.m.journal.leases
            if x.clock == CLOCK_UNIX and x.updated - self.m.wall > ttl
        ]

    def unix_leases(self) -> list[str]:
        """Work IDs whose Unix lease a wall-clock rollback can date more than the TTL ahead."""
        ttl = self.BOUNDS.ttl
        return [
            w
            for w, x in self.m.journal.leases
            if x.clock == CLOCK_UNIX and 0 <= x.updated - ttl - 1 < self.m.wall
        ]

    @precondition(lambda self: bool(self.unix_leases()) and not self.future_leases())
    @rule(data=st.data())
    def leased_rollback_clock(self, data: st.DataObject) -> None:
        """RollbackClock far enough that an active lease is dated more than the TTL ahead."""
        work = data.draw(st.sampled_from(self.unix_leases()), label="work")
        lease = get(self.m.journal.leases, work)
        assert lease is not None
        self.do_rollback_clock(lease.updated - self.BOUNDS.ttl - 1)

    @precondition(lambda self: bool(self.future_leases()))
    @rule()
    def future_recover_work(self) -> None:
        """RecoverWork(TTL) while a lease is dated more than the TTL in the future: it is
        reclaimed (steered to, not left to the seed: seeds 1 and 3 never recovered then)."""
        self.do_recover_work(self.BOUNDS.ttl)

    @precondition(lambda self: any(x.clock != CLOCK_UNIX for _, x in self.m.journal.leases))
    @rule(ttl=gen.ttls)
    def legacy_recover_work(self, ttl: int) -> None:
        """RecoverWork while a legacy lease (no clock tag) is active: it is reclaimed whatever
        the TTL (steered to: seed 3 never recovered while one was active)."""
        self.do_recover_work(ttl)

    @rule()
    def compact_journal(self) -> None:
        self.do_compact_journal()

    @rule()
    def reopen(self) -> None:
        self.do_reopen()

    @rule(work=gen.journal_works, worker=gen.ranks, fraction=gen.cut_fractions)
    def torn_tail(self, work: str, worker: int, fraction: float) -> None:
        record = self.would_be_record(work, worker)
        self.do_torn_tail(work, worker, gen.cut_offset(len(record), fraction))
