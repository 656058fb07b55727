"""The coordinator machine: ``StateShardCoordinator`` (autosave on) against ``model.coordinator``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines.base import ConformanceFailure, ConformanceMachine, file_bytes
from leasefence.conformance.refinement import coordinator_state
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.model import coordinator as co
from leasefence.model.state import State, get


class CoordinatorMachine(ConformanceMachine):
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
        file_before = file_bytes(self.path)

        def model() -> bool:
            ok, c = model_fn()
            self.m = self.m._replace(coordinator=c)
            return ok

        def impl() -> bool:
            ok = impl_fn()
            if not ok and file_bytes(self.path) != file_before:
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

    # Steering to the two cases of a lease from an older epoch (the plain rules reached them
    # on some seeds only: seed 6 never voided one; voiding alone, seeds 1, 2 and 9 then never
    # replaced one): a restart while a lease is active makes it stale; then a recovery voids it
    # or a new lease of its task replaces it. Each rule is gated by the state it needs, the
    # lease too (the pinned seed drew lease_state 32 times in 2,098 steps: voided 1, replaced
    # 1; with idle_lease_state 63 and 46, seeds 1-6 23-66 and 15-66).

    def stale_tasks(self) -> list[str]:
        """State tasks whose lease on record is from an older epoch."""
        c = self.m.coordinator
        return [t for t, x in c.leases if x.epoch != c.epoch]

    def active_tasks(self) -> list[str]:
        """State tasks whose lease on record is active (taken in the current epoch)."""
        c = self.m.coordinator
        return [t for t, x in c.leases if x.epoch == c.epoch]

    @precondition(lambda self: not self.active_tasks() and not self.stale_tasks())
    @rule(task=gen.tasks, data=st.data())
    def idle_lease_state(self, task: str, data: st.DataObject) -> None:
        """LeaseState while no lease is on record in this epoch or an older one: the first
        step towards a stale lease (the pinned seed drew lease_state 32 times in 2,098 steps,
        so a restart with a lease active, and each stale-lease case, came once)."""
        worker = data.draw(gen.candidates(self.past_owners.get(task, set())), label="worker")
        self.do_lease_state(task, worker)

    @precondition(lambda self: bool(self.active_tasks()))
    @rule()
    def leased_restart_coordinator(self) -> None:
        """RestartCoordinator while a state lease is active: it is stale in the new epoch."""
        self.do_restart_coordinator()

    @precondition(lambda self: bool(self.stale_tasks()))
    @rule(ttl=gen.ttls)
    def stale_recover_states(self, ttl: int) -> None:
        """RecoverStates while a lease of an older epoch is on record: it is voided whatever the
        TTL."""
        self.do_recover_states(ttl)

    @precondition(lambda self: bool(self.stale_tasks()))
    @rule(data=st.data())
    def stale_lease_state(self, data: st.DataObject) -> None:
        """LeaseState of a task whose lease on record is from an older epoch: it is replaced."""
        task = data.draw(st.sampled_from(self.stale_tasks()), label="task")
        worker = data.draw(gen.candidates(self.past_owners.get(task, set())), label="worker")
        self.do_lease_state(task, worker)

    @rule()
    def restart_coordinator(self) -> None:
        self.do_restart_coordinator()
