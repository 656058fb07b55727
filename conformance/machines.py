"""Hypothesis state machines that drive the implementation and the model side by side.

Every rule draws its arguments and calls one ``do_*`` action, which applies the same action to
the model (``leasefence.model``) and to the implementation (``leasefence.impl``), compares the
two return values, then compares the implementation's abstract state (``refinement``) with the
model's, and checks the two-state properties (L3, L6's statistics, L7) on both sides. After every
step the state invariants (``type_ok``, L1, L2, L4, L5, L6, ``no_stuck_lease``) are checked on
both sides as ``@invariant()``s named like the model's functions. The ``do_*`` actions take plain
arguments, so a scenario file (``conformance.scenarios``) replays the same steps without
Hypothesis.

==================  ==========================================================================
machine             what it drives
==================  ==========================================================================
``JournalMachine``  one ``WorkLeaseJournal`` on a real file: leases, fenced and unfenced calls,
                    recovery, compaction, close/reopen, torn tails, a legacy record at start
``CoordinatorMachine``  one ``StateShardCoordinator`` with autosave: leases, fenced calls,
                    recovery, restart into a new epoch from the snapshot on disk
``MasterMachine``   the ``Master`` over the in-process transport; the machine is the network:
                    results are delivered by a rule, late, duplicated, with wrong or no IDs
``SystemMachine``   the above plus master kill and restart from disk (a new coordinator epoch),
                    torn tails, compaction, a legacy journal at start, trace validation
``Pipelined*``      ``PipelinedMasterMachine`` and ``PipelinedSystemMachine``: the two above at
                    pipeline depth 2 with generation fencing (issue 12): two dispatches per
                    rank, results presenting their generation or none, older generations
                    delivered after a re-dispatch, duplicated, reordered, across a restart
==================  ==========================================================================

Rule names are the model's action names in snake_case (``dispatch_work`` is ``DispatchWork``);
the table mapping actions to methods and trace events is in ``leasefence.impl.master``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from leasefence.conformance import strategies as gen
from leasefence.conformance.coverage import COVERAGE
from leasefence.conformance.refinement import (
    Environment,
    GenerationNames,
    TickClock,
    coordinator_state,
    journal_state,
    master_state,
)
from leasefence.conformance.tracecheck import validate
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal, encode_record, legacy_lease_line
from leasefence.impl.master import Master, RankBusy
from leasefence.impl.trace import TraceWriter
from leasefence.impl.transport import Envelope, InProcessTransport, deliver
from leasefence.impl.wire import FROM_MASTER, Rank, Result, StateTaskId, Work, WorkId, decode
from leasefence.impl.wire import encode as wire_encode
from leasefence.impl.workload import Outcome
from leasefence.model import coordinator as co
from leasefence.model import invariants as inv
from leasefence.model import journal as jo
from leasefence.model import system as sy
from leasefence.model.check import changes
from leasefence.model.rules import CLOCK_UNIX
from leasefence.model.state import Dispatch, State, get
from leasefence.model.system import Bounds

#: Where a failing step saves the steps that led to it as a scenario file (unset: nowhere).
SAVE_ENV = "LEASEFENCE_SAVE_SCENARIOS"

#: The scenario action (the TLA+ name, ``conformance.scenarios``) of each step a machine logs.
SCENARIO_ACTIONS = {
    "dispatch_work": "DispatchWork",
    "deliver_result": "DeliverResult",
    "reclaim_expired": "ReclaimExpired",
    "restart_master": "RestartMaster",
    "tick": "Tick",
    "rollback_clock": "RollbackClock",
    "reboot": "Reboot",
    "compact_journal": "CompactJournal",
    "torn_tail": "TornTail",
}


class ConformanceFailure(AssertionError):
    """The implementation and the model disagree, or one of them breaks an invariant."""


class _Conformance(RuleBasedStateMachine):
    """What every machine shares: the clock rules, the step protocol and the invariants."""

    NAME: ClassVar[str] = "base"
    BOUNDS: ClassVar[Bounds] = gen.JOURNAL_BOUNDS
    #: The invariants that say something about this machine's part of the state. L1, L2 and L6
    #: are stated over the master's active dispatches, so only the master and system machines
    #: check them; the container machines check L1/L2/L3 through return values and file bytes.
    CHECKED: ClassVar[frozenset[str]] = frozenset(inv.STATE_INVARIANTS)

    def __init__(self, start: int = gen.START) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix=f"leasefence-{self.NAME}-"))
        self.start = start
        self.clock = TickClock(start)
        self.env = Environment(wall=start, mono=start)
        self.m: State = sy.initial_state()._replace(wall=start, mono=start)
        self.opened = False
        self.rolled_back = False
        self.log: list[dict[str, Any]] = []
        self.last: object = None
        COVERAGE.runs[self.NAME] += 1

    # -- to be provided by each machine ---------------------------------------------------

    def impl_state(self) -> State:
        """The implementation's state through the refinement mapping."""
        raise NotImplementedError

    def close_impl(self) -> None:
        """Release files and locks (end of an example)."""

    # -- the step protocol ----------------------------------------------------------------

    def environment(self) -> Environment:
        """The impl side's environment: its own clock reading and the machine's network."""
        return Environment(
            wall=self.clock.now,
            mono=self.env.mono,
            net=self.env.net,
            gnet=self.env.gnet,
            dups=self.env.dups,
            reboots=self.env.reboots,
            rollbacks=self.env.rollbacks,
        )

    def case(self, name: str) -> None:
        COVERAGE.case(self.NAME, name)

    def step(
        self,
        action: str,
        args: tuple[object, ...],
        model: Callable[[], object],
        impl: Callable[[], object],
    ) -> object:
        """Apply one action to both sides and compare everything (see the module doc)."""
        COVERAGE.rule(self.NAME, action)
        self.log.append({"action": action, "args": list(args)})
        try:
            before_m, before_i = self.m, self.impl_state()
            want = model()
            got = impl()
            if got != want:
                raise ConformanceFailure(
                    f"{action}{args}: the implementation returned {got!r}, the model {want!r}"
                )
            self.compare(action, args)
            after_i = self.impl_state()
            for name, prop in inv.STEP_PROPERTIES.items():
                if not prop(before_m, self.m, self.BOUNDS):
                    raise ConformanceFailure(f"{action}{args}: the model breaks {name}")
                if not prop(before_i, after_i, self.BOUNDS):
                    raise ConformanceFailure(f"{action}{args}: the implementation breaks {name}")
        except AssertionError:
            self.save_scenario()
            raise
        self.last = got
        return got

    def compare(self, action: str, args: tuple[object, ...]) -> None:
        """The refinement check: the mapped implementation state equals the model's."""
        got = self.impl_state()
        if got != self.m:
            diff = "\n  ".join(changes(self.m, got)) or "(no leaf differs)"
            raise ConformanceFailure(
                f"after {action}{args} the implementation's state differs from the model's "
                f"(model -> implementation):\n  {diff}\nmodel: {self.m!r}"
            )

    def save_scenario(self) -> None:
        """Save the steps so far, the failing one last, as a scenario file (``SAVE_ENV``); one of
        a system machine replays with ``conformance.scenarios.replay``."""
        directory = os.environ.get(SAVE_ENV)
        if not directory:
            return
        opened = [e["args"][0] if e["args"] else None for e in self.log if e["action"] == "open"]
        doc = {
            "machine": self.NAME,
            "origin": "a failing Hypothesis example",
            "start": self.start,
            "legacy": opened[0] if opened else None,
            "steps": [
                {"action": SCENARIO_ACTIONS.get(e["action"], e["action"]), "args": e["args"]}
                for e in self.log
                if e["action"] != "open"
            ],
        }
        path = Path(directory) / f"{self.NAME}-failure.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n")

    def teardown(self) -> None:
        try:
            self.close_impl()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- clock faults (model only: the implementation reads the clock, nothing else) ---------

    def do_tick(self, seconds: int) -> None:
        """Tick, ``seconds`` times: the wall and the monotonic clock move forward together."""

        def model() -> None:
            self.m = self.m._replace(wall=self.m.wall + seconds, mono=self.m.mono + seconds)

        def impl() -> None:
            self.clock.now += seconds
            self.env.mono += seconds

        self.step("tick", (seconds,), model, impl)

    def do_rollback_clock(self, to: int) -> None:
        """RollbackClock(to): the wall clock is stepped back; monotonic time is not."""
        assert 0 <= to < self.m.wall, "RollbackClock needs a target before the current wall time"
        self.rolled_back = True
        self.case("rollback")

        def model() -> None:
            self.m = self.m._replace(wall=to, rollbacks=self.m.rollbacks + 1)

        def impl() -> None:
            self.clock.now = to
            self.env.rollbacks += 1

        self.step("rollback_clock", (to,), model, impl)

    def do_reboot(self) -> None:
        """Reboot: the monotonic clock restarts from 0; Unix time and the files are unaffected."""
        self.case("reboot")

        def model() -> None:
            self.m = self.m._replace(mono=0, reboots=self.m.reboots + 1)

        def impl() -> None:
            self.env.mono = 0
            self.env.reboots += 1

        self.step("reboot", (), model, impl)

    @rule(seconds=gen.advances)
    def tick(self, seconds: int) -> None:
        self.do_tick(seconds)

    @precondition(lambda self: self.m.wall > 0)
    @rule(back=gen.rollbacks)
    def rollback_clock(self, back: int) -> None:
        self.do_rollback_clock(max(0, self.m.wall - back))

    @rule()
    def reboot(self) -> None:
        self.do_reboot()

    def recovering(self) -> None:
        """Book a recovery: after a rollback it is the case F314's clock rule is about."""
        if self.rolled_back:
            self.case("rollback followed by recover")
            self.rolled_back = False

    def future_dated(self, leases: tuple[tuple[str, Any], ...], gone: tuple[str, ...]) -> None:
        ttl = self.BOUNDS.ttl
        for w, x in leases:
            unix = getattr(x, "clock", CLOCK_UNIX) == CLOCK_UNIX
            current = getattr(x, "epoch", 0) in (0, self.m.coordinator.epoch)
            if w in gone and unix and current and x.updated - self.m.wall > ttl:
                self.case("future-dated lease reclaimed")

    # -- the invariants, on both sides ----------------------------------------------------

    def holds(self, name: str, check: Callable[[State, Bounds], bool]) -> None:
        if not self.opened or name not in self.CHECKED:
            return
        if not check(self.m, self.BOUNDS):
            raise ConformanceFailure(f"the model breaks {name} in {self.m!r}")
        mapped = self.impl_state()
        if not check(mapped, self.BOUNDS):
            raise ConformanceFailure(f"the implementation breaks {name} in {mapped!r}")

    # Every variable holds a value of its type and range.
    @invariant()
    def type_ok(self) -> None:
        self.holds("TypeOK", inv.type_ok)

    # L1: A local work/state ID has at most one active worker at any moment.
    @invariant()
    def l1_single_owner(self) -> None:
        self.holds("L1_SingleOwner", inv.l1_single_owner)

    # L2: complete, abandon and discard change state only when the worker is the current owner.
    @invariant()
    def l2_owner_fenced(self) -> None:
        self.holds("L2_OwnerFenced", inv.l2_owner_fenced)

    # L4: Persisted expiry uses a Unix clock, comparable across reboots, and records its clock domain.
    @invariant()
    def l4_unix_clock_domain(self) -> None:
        self.holds("L4_UnixClockDomain", inv.l4_unix_clock_domain)

    # L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
    @invariant()
    def l5_legacy_migratable(self) -> None:
        self.holds("L5_LegacyMigratable", inv.l5_legacy_migratable)

    # L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
    @invariant()
    def l6_no_inherited_ownership(self) -> None:
        self.holds("L6_NoInheritedOwnership", inv.l6_no_inherited_ownership)

    # Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
    @invariant()
    def no_stuck_lease(self) -> None:
        self.holds("NoStuckLease", inv.no_stuck_lease)

    def check_invariants_now(self) -> None:
        """Every invariant once (scenario replay, which runs without Hypothesis)."""
        for check in (
            self.type_ok,
            self.l1_single_owner,
            self.l2_owner_fenced,
            self.l4_unix_clock_domain,
            self.l5_legacy_migratable,
            self.l6_no_inherited_ownership,
            self.no_stuck_lease,
        ):
            check()


def _bytes(path: Path) -> bytes:
    return path.read_bytes() if path.exists() else b""


# ==============================================================================================
# The work journal


class JournalMachine(_Conformance):
    """``WorkLeaseJournal`` against ``model.journal``, on a real file in a temporary directory."""

    NAME = "journal"
    BOUNDS = gen.JOURNAL_BOUNDS
    CHECKED = frozenset({"TypeOK", "L4_UnixClockDomain", "L5_LegacyMigratable", "NoStuckLease"})

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

    @initialize(legacy=gen.maybe_legacy(gen.journal_works))
    def open(self, legacy: tuple[str, int, int] | None) -> None:
        self.do_open(legacy)

    def _unchanged_on_refusal(self, refused: bool, before: bytes, action: str) -> None:
        if refused and _bytes(self.path) != before:
            raise ConformanceFailure(f"L3/L2 on disk: a refused {action} changed the journal file")

    def do_lease_work(self, work: str, worker: int) -> None:
        """LeaseWork(w, r): ``WorkLeaseJournal.lease``."""
        held = get(self.m.journal.leases, work)
        if held is not None:
            self.case("refused duplicate lease")
        file_before = _bytes(self.path)

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
        file_before = _bytes(self.path)

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
        file_before = _bytes(self.path)

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
            lines = _bytes(self.path).splitlines()
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


# ==============================================================================================
# The state-shard coordinator


class CoordinatorMachine(_Conformance):
    """``StateShardCoordinator`` (autosave on) against ``model.coordinator``."""

    NAME = "coordinator"
    BOUNDS = gen.COORDINATOR_BOUNDS
    CHECKED = frozenset({"TypeOK", "NoStuckLease"})

    def __init__(self, start: int = gen.START) -> None:
        super().__init__(start)
        self.path = self.dir / "state.json"
        self.c: StateShardCoordinator | None = None
        self.past_owners: dict[str, set[int]] = {}

    def coordinator(self) -> StateShardCoordinator:
        assert self.c is not None
        return self.c

    def impl_state(self) -> State:
        return self.environment().state(coordinator=coordinator_state(self.coordinator()))

    @initialize()
    def open(self) -> None:
        self.log.append({"action": "open", "args": []})
        self.c = StateShardCoordinator(self.path, clock=self.clock)
        self.opened = True
        self.compare("open", ())

    def _fenced_case(self, task: str, worker: int) -> None:
        held = co.active_lease(self.m.coordinator, task)
        if held is None or held.owner == worker:
            return
        self.case("wrong-owner state call refused")
        if worker in self.past_owners.get(task, set()):
            self.case("late complete after reclaim and re-lease")

    def _call(
        self,
        action: str,
        args: tuple[object, ...],
        model_fn: Callable[[], tuple[bool, Any]],
        impl_fn: Callable[[], bool],
    ) -> bool:
        file_before = _bytes(self.path)

        def model() -> bool:
            ok, c = model_fn()
            self.m = self.m._replace(coordinator=c)
            return ok

        def impl() -> bool:
            ok = impl_fn()
            if not ok and _bytes(self.path) != file_before:
                raise ConformanceFailure(f"L3/L2 on disk: a refused {action} rewrote the snapshot")
            return ok

        return bool(self.step(action, args, model, impl))

    def do_lease_state(self, task: str, worker: int) -> None:
        """LeaseState(s, r): ``StateShardCoordinator.lease``."""
        c = self.m.coordinator
        if co.active_lease(c, task) is not None:
            self.case("refused duplicate state lease")
        elif get(c.leases, task) is not None:
            self.case("stale lease replaced")
        ok = self._call(
            "lease_state",
            (task, worker),
            lambda: co.lease_state(self.m.coordinator, task, worker, self.m.wall, self.m.mono),
            lambda: self.coordinator().lease(task, worker),
        )
        if ok:
            self.past_owners.setdefault(task, set()).add(worker)

    def do_complete_state(self, task: str, worker: int, reward: int, cost: int) -> None:
        """CompleteState(s, r): ``StateShardCoordinator.complete`` (amounts passed explicitly)."""
        self._fenced_case(task, worker)
        self._call(
            "complete_state",
            (task, worker, reward, cost),
            lambda: co.complete_state(self.m.coordinator, task, worker, reward, cost),
            lambda: self.coordinator().complete(task, worker, reward=reward, cost=cost),
        )

    def do_abandon_state(self, task: str, worker: int, cost: int) -> None:
        """AbandonState(s, r): ``StateShardCoordinator.abandon``."""
        self._fenced_case(task, worker)
        self._call(
            "abandon_state",
            (task, worker, cost),
            lambda: co.abandon_state(self.m.coordinator, task, worker, cost),
            lambda: self.coordinator().abandon(task, worker, cost=cost),
        )

    def do_discard_state(self, task: str, worker: int) -> None:
        """DiscardState(s, r): ``StateShardCoordinator.discard``."""
        self._fenced_case(task, worker)
        self._call(
            "discard_state",
            (task, worker),
            lambda: co.discard_state(self.m.coordinator, task, worker),
            lambda: self.coordinator().discard(task, worker),
        )

    def do_recover_states(self, ttl: int) -> None:
        """RecoverStates: ``StateShardCoordinator.recover_expired(ttl)``."""
        self.recovering()
        c = self.m.coordinator

        def model() -> list[str]:
            gone, after = co.recover_states(self.m.coordinator, ttl, self.m.wall, self.m.mono)
            self.m = self.m._replace(coordinator=after)
            return list(gone)

        gone = self.step(
            "recover_states", (ttl,), model, lambda: self.coordinator().recover_expired(ttl)
        )
        assert isinstance(gone, list)
        if any(x.epoch != c.epoch for t, x in c.leases if t in gone):
            self.case("stale lease voided")
        if ttl > 0:
            self.future_dated(c.leases, tuple(gone))

    def do_restart_coordinator(self) -> None:
        """RestartCoordinator: a new coordinator loads the snapshot on disk into the next epoch."""
        self.case("restart into a new epoch")

        def model() -> int:
            self.m = self.m._replace(coordinator=co.restart_coordinator(self.m.coordinator))
            return self.m.coordinator.epoch

        def impl() -> int:
            self.c = StateShardCoordinator(self.path, clock=self.clock)
            return self.c.epoch

        self.step("restart_coordinator", (), model, impl)

    def _worker(self, data: st.DataObject, task: str) -> int:
        held = co.active_lease(self.m.coordinator, task)
        past = self.past_owners.get(task, set())
        fence = gen.fences_for(None if held is None else held.owner, past, maintenance=False)
        worker = data.draw(fence, label="worker")
        assert worker is not None
        return worker

    @rule(task=gen.tasks, data=st.data())
    def lease_state(self, task: str, data: st.DataObject) -> None:
        worker = data.draw(gen.candidates(self.past_owners.get(task, set())), label="worker")
        self.do_lease_state(task, worker)

    @rule(task=gen.tasks, data=st.data(), reward=gen.amounts, cost=gen.amounts)
    def complete_state(self, task: str, data: st.DataObject, reward: int, cost: int) -> None:
        self.do_complete_state(task, self._worker(data, task), reward, cost)

    @rule(task=gen.tasks, data=st.data(), cost=gen.amounts)
    def abandon_state(self, task: str, data: st.DataObject, cost: int) -> None:
        self.do_abandon_state(task, self._worker(data, task), cost)

    @rule(task=gen.tasks, data=st.data())
    def discard_state(self, task: str, data: st.DataObject) -> None:
        self.do_discard_state(task, self._worker(data, task))

    def late_callers(self) -> list[tuple[str, int]]:
        """(task, rank) pairs where the rank held the task before and another rank holds it now."""
        out = []
        for t, x in self.m.coordinator.leases:
            if x.epoch == self.m.coordinator.epoch:
                out += [(t, r) for r in sorted(self.past_owners.get(t, set()) - {x.owner})]
        return out

    @precondition(lambda self: bool(self.late_callers()))
    @rule(data=st.data(), reward=gen.amounts, cost=gen.amounts)
    def late_complete_state(self, data: st.DataObject, reward: int, cost: int) -> None:
        """CompleteState by a former owner after its lease ended and another rank took the task."""
        task, worker = data.draw(st.sampled_from(self.late_callers()), label="late caller")
        self.do_complete_state(task, worker, reward, cost)

    @rule(ttl=gen.ttls)
    def recover_states(self, ttl: int) -> None:
        self.do_recover_states(ttl)

    @rule()
    def restart_coordinator(self) -> None:
        self.do_restart_coordinator()


# ==============================================================================================
# The master over the in-process transport


def _result_worker(work: Work) -> Outcome:
    """What every worker computes: success, one second of CPU (the model's cost of one)."""
    return Outcome(True, 1.0, {})


#: A result in flight: (rank, work, model generation). The generation is 0 under rank fencing
#: (the model's ``net`` holds ``(rank, work)``) and the dispatch's under generation fencing (the
#: model's ``gnet`` holds the triple itself).
Message = tuple[int, str, int]

#: The depth-2 case of a result overtaking the result of its rank's older dispatch.
REORDERED = "result reordered on one rank"


class MasterMachine(_Conformance):
    """The ``Master`` (journal, coordinator, reservations) against ``model.system``.

    The machine is the network: a dispatched WORK goes through ``InProcessTransport`` (encoded,
    decoded, run by the worker function) and its RESULT is held; a ``deliver_result`` rule hands
    any result in flight to the master through ``transport.deliver``, possibly late, again
    (duplicated), failed, or reporting another state ID or none.

    ``BOUNDS.pipeline`` and ``BOUNDS.fence`` set the master's depth and owner token (F314's
    one dispatch per rank fenced by the rank here; ``PipelinedMasterMachine`` runs depth 2 with
    generations). Under generation fencing a result in flight is ``(rank, work, generation)``,
    and it presents its generation or none (an old-protocol worker); ``names`` pairs each
    implementation token with the model generation of the same dispatch, bound as the dispatch
    succeeds, so that both sides' states compare.
    """

    NAME = "master"
    BOUNDS = gen.MASTER_BOUNDS

    def __init__(self, start: int = gen.START) -> None:
        super().__init__(start)
        self.journal_path = self.dir / "journal.jsonl"
        self.snapshot_path = self.dir / "snapshot.json"
        self.master: Master | None = None
        self.transport = InProcessTransport(_result_worker, gen.RANKS)
        self.names = GenerationNames()
        self.outbox: dict[Message, Envelope] = {}
        self.sent_attempt: dict[Message, int] = {}
        self.sent_epoch: dict[Message, int] = {}
        self.delivered: set[Message] = set()
        #: Results in flight from a rank that held two dispatches when the master restarted.
        self.pipelined_at_restart: set[Message] = set()
        #: The newest model generation each work ID was dispatched with.
        self.newest: dict[str, int] = {}
        self.trace: TraceWriter | None = None

    # -- plumbing --------------------------------------------------------------------------

    def master_(self) -> Master:
        assert self.master is not None
        return self.master

    def impl_state(self) -> State:
        return master_state(self.master_(), self.environment(), self.names)

    def close_impl(self) -> None:
        if self.master is not None:
            self.master.close()
            self.master = None
        if self.trace is not None:
            self.trace.close()
            self.trace = None

    def open_master(self) -> Master:
        return Master.open(
            self.journal_path,
            self.snapshot_path,
            gen.CATALOGUE,
            ttl=gen.TTL,
            clock=self.clock,
            trace=self.trace,
            reservation_limits=gen.RESERVATION_LIMITS,
            pipeline=self.BOUNDS.pipeline,
            fence=self.BOUNDS.fence,
        )

    def compare(self, action: str, args: tuple[object, ...]) -> None:
        super().compare(action, args)
        held = self.master_().reservations.held()
        expected: dict[tuple[str, str], int] = {}
        for _, d in self.master_().dispatches():
            for key in d.reservations:
                expected[key] = expected.get(key, 0) + 1
        if held != expected:
            raise ConformanceFailure(
                f"after {action}{args} the master holds reservations {held}, its active "
                f"dispatches account for {expected}"
            )

    def in_flight(self) -> list[Message]:
        """The model's results in flight, sorted: ``net`` (generation 0), then ``gnet``."""
        return [(r, w, 0) for r, w in sorted(self.m.net)] + sorted(self.m.gnet)

    def free_ranks(self) -> list[int]:
        """The ranks with a free dispatch slot (at depth 1: the idle ranks)."""
        return [r for r in gen.RANKS if len(sy.dispatches_of(self.m, r)) < self.BOUNDS.pipeline]

    def consulted(self, rank: int, work: str, presented: int) -> Dispatch | None:
        """The rank's dispatch the master checks a result against (the model's lookup): the one
        of the presented generation, or with none presented of the result's work ID; failing
        that, on a rank whose every slot is taken, its oldest (the result is stale). At depth 1:
        the rank's one active dispatch."""
        mine = sy.dispatches_of(self.m, rank)
        for d in mine:
            if (d.gen == presented) if presented else (d.work == work):
                return d
        return mine[0] if len(mine) >= self.BOUNDS.pipeline else None

    @initialize()
    def open(self) -> None:
        self.do_open(None)

    def do_open(self, legacy: tuple[str, int, int] | None) -> None:
        """Start the master on fresh files (Init)."""
        assert legacy is None, "the master machine starts on fresh files"
        self.log.append({"action": "open", "args": [None]})
        self.master = self.open_master()
        self.opened = True
        self.compare("open", ())

    # -- DispatchWork ----------------------------------------------------------------------

    def _reservation_refusal(self, work: str) -> str | None:
        """The environment's reservation pools: a target admits TARGET_LIMIT dispatches."""
        target = {str(i.work_id): i.target for i in gen.CATALOGUE}
        held = [target[d.work] for _, d in self.m.active]
        return "reserve_target" if held.count(target[work]) >= gen.TARGET_LIMIT else None

    def do_dispatch_work(self, work: str, rank: int) -> None:
        """DispatchWork(w, r): ``Master.dispatch``, then the WORK goes out on the transport."""
        journal_before, snapshot_before = _bytes(self.journal_path), _bytes(self.snapshot_path)
        refuse = self._reservation_refusal(work)

        def model() -> object:
            if len(sy.dispatches_of(self.m, rank)) >= self.BOUNDS.pipeline:
                return "RankBusy"
            out, self.m = sy.dispatch_work(self.m, work, rank, self.BOUNDS, refuse)
            return (out.ok, out.taken, out.refused, out.undone)

        def impl() -> object:
            try:
                out = self.master_().dispatch(WorkId(work), Rank(rank))
            except RankBusy:
                return "RankBusy"
            if out.refused in (None, "lease_state"):
                pass
            elif (_bytes(self.journal_path), _bytes(self.snapshot_path)) != (
                journal_before,
                snapshot_before,
            ):
                raise ConformanceFailure(f"L3 on disk: a dispatch refused at {out.refused} wrote")
            if out.refused == "lease_state" and _bytes(self.snapshot_path) != snapshot_before:
                raise ConformanceFailure("L3 on disk: a refused state lease rewrote the snapshot")
            if out.ok:
                self.send(rank, work)
            return (out.ok, out.taken, out.refused, out.undone)

        got = self.step("dispatch_work", (work, rank), model, impl)
        if isinstance(got, tuple):
            refused = got[2]
            name = {
                "lease_work": "refused duplicate work lease",
                "lease_state": "refused duplicate state lease",
                "reserve_target": "refused reservation",
            }.get(str(refused))
            if name:
                self.case(name)
            if got[0] and len(sy.dispatches_of(self.m, rank)) > 1:
                self.case("two dispatches on one rank")
        else:
            self.case("rank busy")

    def send(self, rank: int, work: str) -> None:
        """Pair the new dispatch's generations (implementation and model), send its WORK over
        the in-process transport and hold its RESULT in the network."""
        stored = next(d for d in sy.dispatches_of(self.m, rank) if d.work == work)
        ours = next(d for r, d in self.master_().dispatches(Rank(rank)) if d.work_id == work)
        self.names.bind(rank, ours.generation, stored.gen)
        self.newest[work] = max(self.newest.get(work, 0), stored.gen)
        message = self.master_().work_message(Rank(rank), WorkId(work))
        self.transport.send(Rank(rank), message)
        replies = [e for _, e in self.transport.queue if e.source == rank]
        self.transport.queue = [(t, e) for t, e in self.transport.queue if e.source != rank]
        assert len(replies) == 1, replies
        key = (rank, work, stored.gen)
        self.outbox[key] = replies[0]
        if self.BOUNDS.generations:
            self.env.gnet = self.env.gnet | {key}
        else:
            self.env.net = self.env.net | {(rank, work)}
        self.sent_attempt[key] = get(self.m.journal.attempts, work) or 0
        self.sent_epoch[key] = self.m.coordinator.epoch
        # The WORK message carries the task the master stored (what a v1 worker echoes) and the
        # dispatch's generation (none under rank fencing).
        sent = decode(*wire_encode(message), FROM_MASTER)
        assert isinstance(sent, Work)
        assert sent.state_task_id == stored.task
        assert self.names.name(rank, sent.generation) == stored.gen

    # -- DeliverResult ---------------------------------------------------------------------

    def do_deliver_result(
        self,
        rank: int,
        work: str,
        reported: str | None,
        ok: bool,
        keep: bool,
        generation: int = 0,
        presented: int | None = None,
    ) -> None:
        """DeliverResult(r, w, g, t, ok, keep, p): a result in flight reaches the master (through
        ``transport.deliver``, which decodes it); with ``keep`` it stays in flight (duplicated).
        ``generation`` is the message's (0 under rank fencing); it presents ``presented``
        (default: its own; 0: none, an old-protocol worker)."""
        p = generation if presented is None else presented
        key = (rank, work, generation)
        assert key in self.in_flight(), f"no result of {key} is in flight"
        disp = self.consulted(rank, work, p)
        lease = get(self.m.journal.leases, work)
        if disp is not None and reported is not None and reported != disp.task:
            self.case("wrong-ID result")
        if reported is None:
            self.case("old-protocol result")
        if keep or key in self.delivered:
            self.case("duplicated result")
        attempts = get(self.m.journal.attempts, work) or 0
        if lease is not None and attempts > self.sent_attempt.get(key, attempts):
            self.case("late result after reclaim and re-lease")
        if self.sent_epoch.get(key, self.m.coordinator.epoch) < self.m.coordinator.epoch:
            self.case("late result across a restart")
            if key in self.pipelined_at_restart:
                self.case("late result across a restart with two dispatches on its rank")
        if not ok:
            self.case("failed result")
        pipelined = self.pipelined_cases(key, p)

        def model() -> object:
            out, self.m = sy.deliver_result(
                self.m, rank, work, reported, ok, self.BOUNDS, keep, generation, p
            )
            return (out.stale, out.task, out.mismatch, out.work_ok, out.state_ok)

        def impl() -> object:
            original = self.outbox.get(key)
            env: Envelope
            if (
                original is not None
                and ok
                and reported == self.BOUNDS.task(work)
                and p == generation
            ):
                env = original  # the bytes the worker sent
            else:
                result = Result(
                    WorkId(work),
                    StateTaskId(reported) if reported else None,
                    ok,
                    1.0,
                    generation=self.impl_generation(rank, p),
                )
                env = Envelope(rank, *wire_encode(result))
            out = deliver(self.master_(), env)
            assert out is not None, "a well-formed RESULT was dropped as malformed"
            if keep:
                self.env.dups += 1
            elif self.BOUNDS.generations:
                self.env.gnet = self.env.gnet - {key}
            else:
                self.env.net = self.env.net - {(rank, work)}
            return (out.stale, out.task, out.mismatch, out.work_ok, out.state_ok)

        args: tuple[object, ...] = (rank, work, reported, ok, keep)
        if self.BOUNDS.generations:
            args += (generation, p)
        got = self.step("deliver_result", args, model, impl)
        assert isinstance(got, tuple)
        stale, work_ok = got[0], got[3]
        if stale:
            self.case("stale result")
        for name in pipelined:
            if name == REORDERED:
                if not stale:
                    self.case(name)
            elif stale or not work_ok:
                self.case(f"{name} refused")
        self.delivered.add(key)

    def impl_generation(self, rank: int, model_gen: int) -> tuple[int, int] | None:
        """The implementation's generation of ``rank`` named ``model_gen`` (0: none)."""
        if not model_gen:
            return None
        token = self.names.tokens[model_gen]
        assert token[0] == rank, f"model generation {model_gen} is rank {token[0]}'s, not {rank}'s"
        return (token[1], token[2])

    def pipelined_cases(self, key: Message, presented: int) -> list[str]:
        """The depth-2 cases a delivery of ``key`` presenting ``presented`` is; the caller books
        each once it sees the outcome (a reordered result must be taken, the others refused)."""
        if not self.BOUNDS.generations:
            return []
        rank, work, generation = key
        mine = sy.dispatches_of(self.m, rank)
        names = []
        own = Dispatch(work, self.BOUNDS.task(work), generation)
        if own in mine and any(d.gen < generation for d in mine):
            names.append(REORDERED)
        if not presented:
            self.case("result without a generation")
            return names
        if any(d.work == work and d.gen > generation for d in mine):
            names.append("older-generation result after re-dispatch to the same rank")
        if key in self.delivered and self.newest.get(work, 0) > generation:
            names.append("duplicated result across generations")
        return names

    # -- ReclaimExpired --------------------------------------------------------------------

    def do_reclaim_expired(self) -> None:
        """ReclaimExpired: ``Master.reclaim_expired`` (journal and coordinator recovery)."""
        self.recovering()
        leases = self.m.journal.leases

        def model() -> list[str]:
            works, self.m = sy.reclaim_expired(self.m, self.BOUNDS)
            return list(works)

        gone = self.step("reclaim_expired", (), model, lambda: self.master_().reclaim_expired())
        assert isinstance(gone, list)
        if gone:
            self.case("lease reclaimed")
        self.future_dated(leases, tuple(gone))

    # -- rules -----------------------------------------------------------------------------

    @rule(data=st.data())
    def dispatch_work(self, data: st.DataObject) -> None:
        # Bias: a work ID whose earlier lease ended while its result is still in flight, sent to
        # a rank with a free slot other than the one that will deliver it late (beyond depth 1
        # also to that very rank: its old result then has an older generation than its work).
        flying = self.in_flight()
        orphans = sorted(
            {w for _, w, _ in flying if get(self.m.journal.leases, w) is None}
            - self.m.journal.completed
        )
        works = (
            st.one_of(st.sampled_from(orphans), gen.master_works) if orphans else gen.master_works
        )
        work = data.draw(works, label="work")
        free = self.free_ranks()
        sent = {r for r, w, _ in flying if w == work}
        groups = [[r for r in free if r not in sent], free]
        if self.BOUNDS.pipeline > 1:
            groups.insert(0, [r for r in free if r in sent])
        choices = [st.sampled_from(x) for x in groups if x]
        rank = data.draw(st.one_of(*choices, gen.ranks), label="rank")
        self.do_dispatch_work(work, rank)

    def draw_presented(self, data: st.DataObject, key: Message) -> int:
        """The generation the result ``key`` presents: under rank fencing its own (0, nothing is
        drawn); under generation fencing its own or none (an old-protocol worker)."""
        generation = key[2]
        if not self.BOUNDS.generations:
            return generation
        return data.draw(gen.presented_for(generation), label="presented")

    @precondition(lambda self: bool(self.m.net or self.m.gnet))
    @rule(data=st.data())
    def deliver_result(self, data: st.DataObject) -> None:
        rank, work, g = data.draw(st.sampled_from(self.in_flight()), label="in flight")
        right = self.BOUNDS.task(work)
        reported = data.draw(gen.reports_for(right), label="reported")
        ok = data.draw(st.booleans(), label="ok")
        keep = data.draw(st.sampled_from((False, False, True)), label="keep")
        presented = self.draw_presented(data, (rank, work, g))
        self.do_deliver_result(rank, work, reported, ok, keep, g, presented)

    def late_results(self) -> list[Message]:
        """Results in flight that are late: their lease ended and another dispatch holds their
        work now, or their own dispatch has ended while their rank holds another (at depth 1:
        their rank has moved on to other work, a stale result)."""
        late = []
        for r, w, g in self.in_flight():
            relet = get(self.m.journal.leases, w) is not None and (
                get(self.m.journal.attempts, w) or 0
            ) > self.sent_attempt.get((r, w, g), 1 << 30)
            mine = sy.dispatches_of(self.m, r)
            own = any(d.work == w and d.gen == g for d in mine)
            if relet or (mine and not own):
                late.append((r, w, g))
        return late

    @precondition(lambda self: bool(self.late_results()))
    @rule(data=st.data())
    def late_deliver_result(self, data: st.DataObject) -> None:
        """DeliverResult of a result whose lease was reclaimed and given to another dispatch."""
        rank, work, g = data.draw(st.sampled_from(self.late_results()), label="late result")
        reported = data.draw(gen.reports_for(self.BOUNDS.task(work)), label="reported")
        ok = data.draw(st.booleans(), label="ok")
        presented = self.draw_presented(data, (rank, work, g))
        self.do_deliver_result(rank, work, reported, ok, False, g, presented)

    @rule()
    def reclaim_expired(self) -> None:
        self.do_reclaim_expired()


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


# ==============================================================================================
# Pipelined dispatch (issue 12): the same machines at depth 2 with generation fencing


class _PipelinedRules(MasterMachine):
    """What only the pipelined machines add: depth 2 with generation fencing, and rules that
    steer towards its cases, each one model action (named ``<when>_<action>`` like
    ``late_deliver_result``). They live here, not in ``MasterMachine``, because even a rule that
    is never enabled changes which examples a seed draws, and the depth-1 machines must run
    exactly as before."""

    BOUNDS = gen.PIPELINED_BOUNDS

    def orphans(self) -> list[Message]:
        """Results in flight whose dispatch has ended, with their work free again (neither
        leased nor completed) and their rank with a free slot."""
        free = self.free_ranks()
        return [
            (r, w, g)
            for r, w, g in self.in_flight()
            if r in free
            and get(self.m.journal.leases, w) is None
            and w not in self.m.journal.completed
        ]

    @precondition(lambda self: bool(self.orphans()))
    @rule(data=st.data())
    def same_rank_dispatch_work(self, data: st.DataObject) -> None:
        """DispatchWork of a work ID to the rank whose result of its ended dispatch is still in
        flight: that result now has an older generation than its work's new dispatch."""
        rank, work, _ = data.draw(st.sampled_from(self.orphans()), label="orphan")
        self.do_dispatch_work(work, rank)

    def second_slots(self) -> list[tuple[str, int]]:
        """(work, rank) pairs for filling a rank's second slot: ranks holding one dispatch, and
        work IDs neither leased nor completed whose state task no active lease holds."""
        half = [r for r in gen.RANKS if len(sy.dispatches_of(self.m, r)) == 1]
        busy = {t for t, x in self.m.coordinator.leases if x.epoch == self.m.coordinator.epoch}
        works = [
            w
            for w in self.BOUNDS.works
            if get(self.m.journal.leases, w) is None
            and w not in self.m.journal.completed
            and self.BOUNDS.task(w) not in busy
        ]
        return [(w, r) for r in half for w in works]

    @precondition(lambda self: bool(self.second_slots()))
    @rule(data=st.data())
    def second_slot_dispatch_work(self, data: st.DataObject) -> None:
        """DispatchWork to a rank that already holds a dispatch: it then holds two."""
        work, rank = data.draw(st.sampled_from(self.second_slots()), label="second slot")
        self.do_dispatch_work(work, rank)

    def overtaking(self) -> list[Message]:
        """Results in flight of a rank's newer dispatch while its older one is still active."""
        out = []
        for r, w, g in self.in_flight():
            mine = sy.dispatches_of(self.m, r)
            if Dispatch(w, self.BOUNDS.task(w), g) in mine and any(d.gen < g for d in mine):
                out.append((r, w, g))
        return out

    @precondition(lambda self: bool(self.overtaking()))
    @rule(data=st.data())
    def reordered_deliver_result(self, data: st.DataObject) -> None:
        """DeliverResult of a rank's newer dispatch before the result of its older one."""
        rank, work, g = data.draw(st.sampled_from(self.overtaking()), label="overtaking")
        reported = data.draw(gen.reports_for(self.BOUNDS.task(work)), label="reported")
        ok = data.draw(st.booleans(), label="ok")
        keep = data.draw(st.sampled_from((False, False, True)), label="keep")
        presented = self.draw_presented(data, (rank, work, g))
        self.do_deliver_result(rank, work, reported, ok, keep, g, presented)

    def copies(self) -> list[Message]:
        """Results in flight that were delivered before (the copies of duplicated results)."""
        return [k for k in self.in_flight() if k in self.delivered]

    @precondition(lambda self: bool(self.copies()))
    @rule(data=st.data())
    def duplicated_deliver_result(self, data: st.DataObject) -> None:
        """DeliverResult of the copy of a duplicated result, often after its work was
        dispatched again with a newer generation."""
        key = data.draw(st.sampled_from(self.copies()), label="copy")
        rank, work, g = key
        reported = data.draw(gen.reports_for(self.BOUNDS.task(work)), label="reported")
        ok = data.draw(st.booleans(), label="ok")
        presented = self.draw_presented(data, key)
        self.do_deliver_result(rank, work, reported, ok, False, g, presented)

    def from_before_restart(self) -> list[Message]:
        """Results in flight from a rank that held two dispatches when the master restarted."""
        return [k for k in self.in_flight() if k in self.pipelined_at_restart]

    @precondition(lambda self: bool(self.from_before_restart()))
    @rule(data=st.data())
    def across_restart_deliver_result(self, data: st.DataObject) -> None:
        """DeliverResult of a result sent before a restart that ended two dispatches of its
        rank (in the master machine, which never restarts, never enabled)."""
        key = data.draw(st.sampled_from(self.from_before_restart()), label="from before restart")
        rank, work, g = key
        reported = data.draw(gen.reports_for(self.BOUNDS.task(work)), label="reported")
        ok = data.draw(st.booleans(), label="ok")
        presented = self.draw_presented(data, key)
        self.do_deliver_result(rank, work, reported, ok, False, g, presented)


class PipelinedMasterMachine(_PipelinedRules, MasterMachine):
    """``MasterMachine`` at pipeline depth 2 with generation fencing: a rank holds two
    dispatches at once, results present their generation (or none), and a result of an older
    generation, duplicated or delivered after its work went to the same rank again, is refused."""

    NAME = "master-pipelined"


class PipelinedSystemMachine(_PipelinedRules, SystemMachine):
    """``SystemMachine`` at pipeline depth 2 with generation fencing: restarts with two
    dispatches in flight on one rank, whose results arrive late; the trace is validated at
    depth 2."""

    NAME = "system-pipelined"


MACHINES: dict[str, type[_Conformance]] = {
    m.NAME: m
    for m in (
        JournalMachine,
        CoordinatorMachine,
        MasterMachine,
        SystemMachine,
        PipelinedMasterMachine,
        PipelinedSystemMachine,
    )
}
