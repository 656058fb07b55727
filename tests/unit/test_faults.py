"""The faults plug into impl's hooks from outside: the duplicate-candidate policy, the in-job
restart through ``Master.restart_in_job``, and the plain run's hooks as a no-op twin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from leasefence.harness.faults import DuplicateCandidates, Injection, WorkerFaults
from leasefence.impl.master import CandidatePolicy, Master, pending_only
from leasefence.impl.mpirun import RunHooks
from leasefence.impl.transport import ManualClock, respond
from leasefence.impl.wire import Rank, Result, StateTaskId, WorkId
from leasefence.impl.workload import generate

TTL = 10.0


def _second_rank_after_a_dispatch(tmp_path: Path, policy: CandidatePolicy) -> tuple[Master, Any]:
    """A master whose rank 1 runs the first item; then one round for rank 2."""
    items = generate(6, 0)
    tmp_path.mkdir()
    m = Master.open(
        tmp_path / "j.jsonl", None, items, ttl=TTL, clock=ManualClock(), candidates=policy
    )
    assert m.dispatch(items[0].work_id, Rank(1)).ok
    sent = m.dispatch_pending([Rank(2)])
    m.close()
    return m, sent


def test_a_duplicate_candidate_is_offered_first_and_the_master_refuses_it(
    tmp_path: Path,
) -> None:
    # The plain candidates through the policy path: ``pending_only`` itself takes the master's
    # fast path, which passes over an item whose state task is leased instead of trying it.
    plain, plain_sent = _second_rank_after_a_dispatch(
        tmp_path / "plain", lambda pending, running: pending_only(pending, running)
    )
    faulty, sent = _second_rank_after_a_dispatch(tmp_path / "dup", DuplicateCandidates(1.0, 0))
    assert sent == plain_sent  # the running item was refused; rank 2 got the same work
    assert faulty.counters.refused_leases == plain.counters.refused_leases + 1


def test_an_in_job_restart_carries_the_runs_counters_failures_and_candidate_policy(
    tmp_path: Path,
) -> None:
    items = generate(4, 0)
    policy = DuplicateCandidates(0.0, seed=0)
    m = Master.open(
        tmp_path / "j.jsonl",
        tmp_path / "s.json",
        items,
        ttl=TTL,
        clock=ManualClock(),
        candidates=policy,
    )
    ((rank, work),) = m.dispatch_pending([Rank(1)])
    m.handle_result(rank, Result(work.work_id, work.state_task_id, False, 0.25, {}))
    new = m.restart_in_job()
    new.close()
    assert new.candidates is policy
    assert new.counters.failed == m.counters.failed == 1
    assert new.counters.dispatched == m.counters.dispatched == 1
    assert new.failures[work.work_id] == 1
    assert not new.dispatches()  # its memory of dispatches is what a restart loses


def test_the_plain_runs_hooks_inject_nothing() -> None:
    hooks = RunHooks()
    result = Result(WorkId("a" * 64), StateTaskId("s"), True, 0.5, {})
    pending, running = [WorkId("b" * 64)], [WorkId("c" * 64)]
    assert hooks.candidates(pending, running) == pending_only(pending, running) == pending
    assert list(hooks.respond(result, 1, 0)) == respond(result, 1, 0)
    assert not hooks.restart_due(None, [])  # type: ignore[arg-type]
    faults = WorkerFaults(Injection(frozenset({"dup", "late"}), rate=1.0), late_s=3.0)
    assert [r.hold for r in faults.respond(result, 1, 0)] == [3.0, 3.0]


def test_a_run_without_duplicate_candidates_opens_its_master_on_the_lazy_queue() -> None:
    # Only ``pending_only`` itself takes the master's lazy queue (``dispatch_pending``); a run
    # whose hooks merely forwarded it walked the whole catalogue on every round (issue 19).
    from leasefence.harness.runjob import FaultConfig, FaultHooks
    from leasefence.impl.mpirun import RunConfig

    class Skipping(RunHooks):
        def candidates(self, pending: list[WorkId], running: list[WorkId]) -> list[WorkId]:
            return pending[1:]

    assert RunHooks().candidate_policy() is pending_only
    assert FaultHooks(RunConfig(), FaultConfig()).candidate_policy() is pending_only
    skipping = Skipping().candidate_policy()
    assert skipping is not pending_only
    assert skipping([WorkId("a"), WorkId("b")], []) == [WorkId("b")]
    hooks = FaultHooks(RunConfig(), FaultConfig(duplicate_candidates=0.5))
    policy = hooks.candidate_policy()
    assert policy is not pending_only
    assert policy == hooks.candidates
