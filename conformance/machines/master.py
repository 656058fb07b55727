"""The master machine: the ``Master`` over the in-process transport against ``model.system``;
the machine is the network."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines.base import ConformanceFailure, ConformanceMachine, file_bytes
from leasefence.conformance.refinement import GenerationNames, master_state
from leasefence.impl.master import Master, RankBusy
from leasefence.impl.trace import TraceWriter
from leasefence.impl.transport import Envelope, InProcessTransport, deliver
from leasefence.impl.wire import FROM_MASTER, Rank, Result, StateTaskId, Work, WorkId, decode
from leasefence.impl.wire import encode as wire_encode
from leasefence.impl.workload import Outcome
from leasefence.model import system as sy
from leasefence.model.state import Dispatch, State, get


def _result_worker(work: Work) -> Outcome:
    """What every worker computes: success, one second of CPU (the model's cost of one)."""
    return Outcome(True, 1.0, {})


#: A result in flight: (rank, work, model generation). The generation is 0 under rank fencing
#: (the model's ``net`` holds ``(rank, work)``) and the dispatch's under generation fencing (the
#: model's ``gnet`` holds the triple itself).
Message = tuple[int, str, int]

#: The depth-2 case of a result overtaking the result of its rank's older dispatch.
REORDERED = "result reordered on one rank"


class MasterMachine(ConformanceMachine):
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
        self.transport = InProcessTransport(_result_worker, self.BOUNDS.ranks)
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
            ttl=self.BOUNDS.ttl,
            clock=self.clock,
            trace=self.trace,
            reservation_limits=gen.RESERVATION_LIMITS,
            pipeline=self.BOUNDS.pipeline,
            fence=self.BOUNDS.fence,
        )

    def compare(self, action: str, args: tuple[object, ...]) -> None:
        super().compare(action, args)
        reservations = self.master_().reservations
        held = reservations.held()
        expected: dict[tuple[str, str], int] = {}
        for _, d in self.master_().dispatches():
            for key in d.reservations:
                if reservations.limits.get(key[0]) is not None:  # (only a limited pool counts)
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
        return [
            r for r in self.BOUNDS.ranks if len(sy.dispatches_of(self.m, r)) < self.BOUNDS.pipeline
        ]

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
        journal_before, snapshot_before = (
            file_bytes(self.journal_path),
            file_bytes(self.snapshot_path),
        )
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
            elif (file_bytes(self.journal_path), file_bytes(self.snapshot_path)) != (
                journal_before,
                snapshot_before,
            ):
                raise ConformanceFailure(f"L3 on disk: a dispatch refused at {out.refused} wrote")
            if out.refused == "lease_state" and file_bytes(self.snapshot_path) != snapshot_before:
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
            [out] = deliver(self.master_(), env)  # one message, one outcome
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
        token = self.names.tokens[(rank, model_gen)]
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


class SteeredMasterMachine(MasterMachine):
    """The master machine as ``master`` runs: ``MasterMachine`` with rules that steer to two of
    its required cases (the plain rules reached them on some seeds only: seed 2 never refused a
    reservation nor delivered a stale result). They live in this leaf, not in ``MasterMachine``,
    because even a rule that is never enabled changes what a seed draws for the system and
    pipelined machines built on it."""

    def full_target(self) -> list[tuple[str, int]]:
        """(work, free rank) pairs whose dispatch the reservation pool refuses: the work's
        target admits no more dispatches, and the work is neither leased nor completed (so the
        journal does not refuse it first)."""
        target = {str(i.work_id): i.target for i in gen.CATALOGUE}
        held = [target[d.work] for _, d in self.m.active]
        return [
            (w, r)
            for w in sorted(target)
            if held.count(target[w]) >= gen.TARGET_LIMIT
            and get(self.m.journal.leases, w) is None
            and w not in self.m.journal.completed
            for r in self.free_ranks()
        ]

    @precondition(lambda self: bool(self.full_target()))
    @rule(data=st.data())
    def full_target_dispatch_work(self, data: st.DataObject) -> None:
        """DispatchWork of a work ID whose target's pool is full: refused at the reservation."""
        work, rank = data.draw(st.sampled_from(self.full_target()), label="work and rank")
        self.do_dispatch_work(work, rank)

    def moved_on(self) -> list[tuple[str, int]]:
        """(work, rank) pairs: ``rank`` is idle with a result of its ended dispatch still in
        flight, ``work`` another free work ID; dispatching it makes that result stale."""
        idle = [r for r in self.free_ranks() if not sy.dispatches_of(self.m, r)]
        flying = {r: {w for q, w, _ in self.in_flight() if q == r} for r in idle}
        free = [
            w
            for w in sorted(str(i.work_id) for i in gen.CATALOGUE)
            if get(self.m.journal.leases, w) is None and w not in self.m.journal.completed
        ]
        return [(w, r) for r in idle if flying[r] for w in free if w not in flying[r]]

    @precondition(lambda self: bool(self.moved_on()))
    @rule(data=st.data())
    def moved_on_dispatch_work(self, data: st.DataObject) -> None:
        """DispatchWork of another work ID to a rank whose earlier result is still in flight."""
        work, rank = data.draw(st.sampled_from(self.moved_on()), label="work and rank")
        self.do_dispatch_work(work, rank)

    def stale_results(self) -> list[Message]:
        """Results in flight from a rank whose every slot holds a dispatch of other work."""
        stale = []
        for r, w, g in self.in_flight():
            mine = sy.dispatches_of(self.m, r)
            if len(mine) >= self.BOUNDS.pipeline and all(d.work != w for d in mine):
                stale.append((r, w, g))
        return stale

    @precondition(lambda self: bool(self.stale_results()))
    @rule(data=st.data())
    def stale_deliver_result(self, data: st.DataObject) -> None:
        """DeliverResult of a result whose rank has moved on to other work: dropped unread."""
        rank, work, g = data.draw(st.sampled_from(self.stale_results()), label="stale result")
        reported = data.draw(gen.reports_for(self.BOUNDS.task(work)), label="reported")
        ok = data.draw(st.booleans(), label="ok")
        self.do_deliver_result(rank, work, reported, ok, False, g, g)
