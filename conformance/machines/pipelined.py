"""The pipelined machines (issue 12): the master and system machines at pipeline depth 2 with
generation fencing, and the rules that steer towards its cases."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines.master import MasterMachine, Message
from leasefence.conformance.machines.system import SystemMachine
from leasefence.model import system as sy
from leasefence.model.state import Dispatch, get


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

    def doubled(self) -> list[int]:
        """Ranks holding two dispatches (the pipeline is full)."""
        return [r for r in gen.RANKS if len(sy.dispatches_of(self.m, r)) >= 2]

    @precondition(lambda self: bool(self.doubled()))
    @rule()
    def pipelined_restart_master(self) -> None:
        """RestartMaster while a rank holds two dispatches: both end, and their results, still
        in flight, arrive across the restart (steered to, not left to the seed: the plain
        restart rule reached this case on some seeds only, issue 20)."""
        self.do_restart_master()
