"""Pipelined dispatch (issue 12): rank fencing is not enough beyond one dispatch per rank, the
generation token ``(rank, dispatch_generation)`` is; in the model and in the implementation."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from leasefence.cli import main
from leasefence.conformance.tracecheck import validate
from leasefence.harness.faults import Injection, in_process
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.errors import ProtocolError
from leasefence.impl.journal import WorkLeaseJournal, parse_line
from leasefence.impl.master import Master, RankBusy, ResultOutcome
from leasefence.impl.trace import TraceWriter
from leasefence.impl.transport import ManualClock, master_dispatch
from leasefence.impl.wire import (
    FROM_MASTER,
    FROM_WORKER,
    Rank,
    Result,
    StateTaskId,
    Tag,
    Work,
    WorkId,
    decode,
    encode,
)
from leasefence.impl.workload import WorkItem, generate, trivial_worker
from leasefence.model.check import explore, format_label
from leasefence.model.flavours import Flavour, expected_violations
from leasefence.model.system import Bounds

# The CI constants (MCLeaseFence.cfg) at depth 2.
PIPELINED = Bounds(max_wall=1, max_dups=0, pipeline=2)


def test_depth_one_rank_fencing_explores_exactly_f314s_graph() -> None:
    result = explore(Bounds(max_wall=1, max_dups=0))
    assert result.ok
    assert result.states == 10718  # as MCLeaseFence.cfg (9,176 before the crash actions)


def test_rank_fencing_at_depth_two_lets_a_forgotten_result_take_a_newer_dispatchs_state() -> None:
    result = explore(replace(PIPELINED, fence="rank"))
    assert result.violated == ["L2_OwnerFenced"]
    assert [format_label(s.label) for s in result.trace] == [
        "Init",
        "DispatchWork('w1', 1)",
        "RestartMaster()",
        "DispatchWork('w2', 1)",
        "DeliverResult(1, 'w1', 's1', True, False)",
    ]
    assert expected_violations(Flavour.FIXED, 2, "rank") == {"L2_OwnerFenced"}


def test_generation_fencing_at_depth_two_holds_every_invariant() -> None:
    result = explore(replace(PIPELINED, fence="generation", max_reboots=0, max_rollbacks=0))
    assert result.ok, result.violated
    assert result.action_counts["DeliverResult"] > 0
    assert expected_violations(Flavour.FIXED, 2, "generation") == frozenset()


def test_generation_fencing_at_depth_one_holds_too() -> None:
    result = explore(replace(PIPELINED, pipeline=1, fence="generation"))
    assert result.ok, result.violated


@pytest.mark.parametrize(("fence", "status"), [("rank", 1), ("generation", 0)])
def test_model_check_command_pipeline_flags(
    fence: str, status: int, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["model", "check", "--quiet", "--pipeline", "2", "--fence", fence]
    args += ["--dups", "0", "--reboots", "0", "--rollbacks", "0"]
    assert main(args) == status
    out = capsys.readouterr().out
    assert "pipeline 2, fence " + fence in out
    if status:
        assert "VIOLATED: L2_OwnerFenced" in out
        assert "matched: ['L2_OwnerFenced']" in out
        assert "RestartMaster()" in out
    else:
        assert "OK: TypeOK, L1-L7" in out


def test_pipeline_zero_is_refused() -> None:
    with pytest.raises(SystemExit):
        main(["model", "check", "--pipeline", "0"])


# -- the implementation ----------------------------------------------------------------------

TTL = 10.0
W1, W2, W3 = (WorkId(c * 64) for c in "abc")
S1, S2 = StateTaskId("s1"), StateTaskId("s2")
R1, R2 = Rank(1), Rank(2)
# W1 and W2 share state task S1 (as in the model's default bounds); W3 has its own.
CATALOGUE = [
    WorkItem(W1, S1, "t1", "bound=16", "smt"),
    WorkItem(W2, S1, "t1", "bound=256", "qf-nia"),
    WorkItem(W3, S2, "t2", "bound=16", "smt"),
]


def open_master(tmp_path: Path, clock: ManualClock, **kw: Any) -> Master:
    return Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", CATALOGUE, ttl=TTL, clock=clock, **kw
    )


def result_of(work: Work, ok: bool = True, *, generation: bool = True) -> Result:
    """The worker's RESULT for ``work``: echoes its task and (unless old protocol) generation."""
    gen = work.generation if generation else None
    return Result(work.work_id, work.state_task_id, ok, 0.1, {}, gen)


def test_wire_carries_the_generation_and_an_old_protocol_result_has_none() -> None:
    work = Work(W1, S1, {}, (3, 17))
    assert decode(*encode(work), FROM_MASTER) == work
    res = Result(W1, S1, True, 0.0, {}, (3, 17))
    assert decode(*encode(res), FROM_WORKER) == res
    old = Result(W1, None, True)
    assert b"generation" not in encode(old)[1]
    assert decode(*encode(old), FROM_WORKER).generation is None  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", ["[1]", "[1, -2]", '"3.17"', "[true, 1]", "[1, 2, 3]", "[1, 1.5]"])
def test_a_malformed_generation_is_a_protocol_error(bad: str) -> None:
    data = (
        '{"v":1,"type":"result","work_id":"' + "a" * 64 + '","ok":true,"cpu_s":0,'
        '"output":{},"generation":' + bad + "}"
    ).encode()
    with pytest.raises(ProtocolError, match="generation"):
        decode(Tag.RESULT, data, FROM_WORKER)


def test_journal_records_the_whole_owner_token_and_completion_must_match_it_exactly(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    with WorkLeaseJournal(tmp_path / "j.jsonl", clock=clock) as j:
        assert j.lease(W1, 1, generation=(1, 1))
        assert j.lease(W2, 1)  # a rank-only owner (F314, old protocol)
        assert not j.complete(W1, worker=1)  # rank alone: not the owner
        assert not j.complete(W1, worker=1, generation=(1, 2))  # another generation
        assert not j.abandon(W1, worker=1, generation=(2, 1))
        assert not j.complete(W2, worker=1, generation=(1, 1))  # a generation never matches
        assert j.leases[W1].generation == (1, 1)
    lines = (tmp_path / "j.jsonl").read_text().splitlines()
    assert '"generation":[1,1]' in lines[0]
    assert "generation" not in lines[1]  # the default path writes F314's format
    with WorkLeaseJournal(tmp_path / "j.jsonl", clock=clock) as j:
        assert j.leases[W1].generation == (1, 1)  # replayed
        j.compact()
    with WorkLeaseJournal(tmp_path / "j.jsonl", clock=clock) as j:
        assert j.leases[W1].generation == (1, 1)  # kept by compaction
        assert j.complete(W1, worker=1, generation=(1, 1))
        assert j.complete(W2, worker=1)
    assert '"generation":[1,1]' in (tmp_path / "j.jsonl").read_text().splitlines()[-2]


def test_coordinator_fences_by_the_whole_token_and_its_snapshot_keeps_it(tmp_path: Path) -> None:
    clock = ManualClock()
    c = StateShardCoordinator(tmp_path / "s.json", clock=clock)
    assert c.lease(S1, 1, generation=(1, 2))
    assert not c.complete(S1, 1)
    assert not c.complete(S1, 1, generation=(1, 1))
    assert not c.discard(S1, 2, generation=(1, 2))
    assert '"generation": [' in (tmp_path / "s.json").read_text()
    c2 = StateShardCoordinator(tmp_path / "s.json", clock=clock)  # next epoch: stale
    assert c2.leases[S1].generation == (1, 2)
    assert not c2.complete(S1, 1, generation=(1, 2))
    assert c2.lease(S2, 2)  # rank-only: F314's snapshot format
    # S2's lease is persisted as the last record of the snapshot's log (the file's last line)
    assert '"generation"' not in json.dumps(
        json.loads((tmp_path / "s.json").read_text().splitlines()[-1])
    )
    assert c2.complete(S2, 2)


def test_generations_increase_per_rank_and_never_repeat_across_restarts(tmp_path: Path) -> None:
    clock = ManualClock()
    m = open_master(tmp_path, clock, pipeline=2)
    assert m.fence == "generation"
    assert m.dispatch(W1, R1).ok
    assert m.dispatch(W3, R1).ok
    gens = [d.generation for _, d in m.dispatches(R1)]
    assert gens == [(1, 1), (1, 2)]
    with pytest.raises(RankBusy):
        m.dispatch(W2, R1)
    m2 = m.restart_master()
    assert m2.dispatch(W2, R1).ok
    assert m2.dispatches(R1)[0][1].generation == (2, 1)  # the epoch moved on
    m2.close()


def test_the_generation_counter_advances_on_a_granted_lease_and_restarts_with_the_epoch(
    tmp_path: Path,
) -> None:
    # Issue 21: the spec's and model's Bump(r) and Resume(j, e), on the implementation.
    clock = ManualClock()
    m = open_master(tmp_path, clock, pipeline=2)
    assert m.next_generation(R1) == (1, 1)
    assert m.next_generation(R1) == (1, 1)  # drawing a generation spends nothing
    assert m.dispatch(W1, R1).ok
    assert m.generation_counters() == {R1: 1}
    assert not m.dispatch(W1, R2).ok  # the journal refuses W1's second lease: no counter moves
    assert not m.dispatch(W2, R1).ok  # the journal grants W2, the coordinator refuses S1
    assert m.generation_counters() == {R1: 2}  # the refused dispatch's lease was granted
    assert m.dispatch(W3, R1).ok
    assert [d.generation for _, d in m.dispatches(R1)] == [(1, 1), (1, 3)]
    m2 = m.restart_master()
    assert m2.generation_counters() == {}  # no lease on disk is of the new epoch
    assert m2.next_generation(R1) == (2, 1)  # the counter repeats; the epoch does not
    m2.close()


def _trace_writer(tmp_path: Path, fence: str, items: list[WorkItem] = CATALOGUE) -> TraceWriter:
    """The trace of a depth-2 master over ``items`` on ranks 1 and 2, at ``tmp_path``."""
    return TraceWriter(
        tmp_path / "trace.ndjson",
        ttl=TTL,
        ranks=(1, 2),
        task_of={i.work_id: i.state_task_id for i in items},
        pipeline=2,
        fence=fence,
    )


def _restart_scenario(tmp_path: Path, fence: str) -> tuple[Master, ResultOutcome, TraceWriter]:
    """The model's counterexample of rank fencing at depth 2, on the implementation:
    DispatchWork(w1, 1), RestartMaster, DispatchWork(w2, 1), DeliverResult(1, w1, s1, ok).
    The master traces every step to ``tmp_path / "trace.ndjson"``."""
    clock = ManualClock()
    trace = _trace_writer(tmp_path, fence)
    m = open_master(tmp_path, clock, pipeline=2, fence=fence, trace=trace)
    assert m.dispatch(W1, R1).ok
    late = result_of(m.work_message(R1, W1))
    m = m.restart_master()  # within the TTL: w1's work lease survives, s1's is voided
    assert m.dispatch(W2, R1).ok  # w2 shares s1, and rank 1 has a free slot
    return m, m.handle_result(R1, late), trace


def _trace_check(tmp_path: Path) -> Any:
    return validate((tmp_path / "trace.ndjson").read_text().splitlines())


def test_rank_fencing_at_depth_two_lets_the_forgotten_result_take_the_newer_state_lease(
    tmp_path: Path,
) -> None:
    m, out, trace = _restart_scenario(tmp_path, "rank")
    trace.close()
    assert (out.stale, out.work_ok, out.state_ok) == (False, True, True)  # the model's L2 bug
    assert m.coordinator.active_owner(S1) is None  # w2's live dispatch lost its state lease
    assert m.dispatches(R1)[0][1].work_id == W2
    m.close()
    # The model allows this step under rank fencing, and trace validation names what it breaks.
    report = _trace_check(tmp_path)
    assert not report.ok
    assert report.divergence.startswith("DeliverResult is a step the model allows, but it breaks")
    assert "L2_OwnerFenced" in report.divergence
    assert report.counts == {"DispatchWork": 2, "RestartMaster": 1}


def test_generation_fencing_at_depth_two_refuses_the_forgotten_results_state_commit(
    tmp_path: Path,
) -> None:
    m, out, trace = _restart_scenario(tmp_path, "generation")
    trace.close()
    report = _trace_check(tmp_path)
    assert report.ok, report.divergence
    assert report.counts == {"DispatchWork": 2, "RestartMaster": 1, "DeliverResult": 1}
    assert out.work_ok  # it still owns w1's own lease, token (1, epoch 1, 1)
    assert not out.state_ok  # s1 belongs to (1, epoch 2, 1)
    assert m.counters.state_rejections == 1
    assert m.coordinator.active_owner(S1) == R1
    w2 = m.work_message(R1, W2)
    m.trace = None
    assert m.handle_result(R1, result_of(w2)).state_ok
    m.close()


def test_an_old_protocol_result_of_a_forgotten_dispatch_commits_nothing(tmp_path: Path) -> None:
    clock = ManualClock()
    m = open_master(tmp_path, clock, pipeline=2)
    assert m.dispatch(W1, R1).ok
    late = result_of(m.work_message(R1, W1), generation=False)
    m = m.restart_master()
    assert m.dispatch(W2, R1).ok
    out = m.handle_result(R1, late)  # no generation, no stored dispatch: rank-only token
    assert (out.work_ok, out.state_ok) == (False, False)
    assert m.counters.wrong_owner_rejections == 1
    m.close()


def test_a_late_result_of_an_earlier_generation_is_refused_after_a_redispatch_to_the_same_rank(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    m = open_master(tmp_path, clock, pipeline=2)
    assert m.dispatch(W1, R1).ok
    first = m.work_message(R1, W1)
    clock.advance(TTL)
    assert m.reclaim_expired() == [W1]
    assert m.dispatch(W1, R1).ok  # the same work, the same rank, a newer generation
    second = m.work_message(R1, W1)
    assert first.generation != second.generation
    out = m.handle_result(R1, result_of(first))  # reordered: the old one arrives
    assert not out.work_ok
    assert m.counters.wrong_owner_rejections == 1
    assert m.handle_result(R1, result_of(second)).work_ok
    assert not m.handle_result(R1, result_of(second)).work_ok  # duplicated: refused
    assert m.counters.duplicate_completions == 0
    m.close()


def _wrong_owner_commits(journal: Path) -> int:
    """Accepted completions (``done``/``reclaim`` records with an owner) whose owner token is
    not the one of the lease they ended, read back from the journal file."""
    owner: dict[str, tuple[object, object]] = {}
    bad = 0
    for line in journal.read_text().splitlines():
        rec = json.loads(line)
        token = (rec.get("worker"), rec.get("generation"))
        if rec["event"] == "lease":
            owner[rec["work_id"]] = token
        elif rec.get("worker") is not None:
            bad += owner.pop(rec["work_id"], token) != token
    return bad


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_an_in_process_depth_two_run_with_reordered_late_and_duplicated_results(
    tmp_path: Path, seed: int
) -> None:
    items = generate(30, seed)
    kinds = frozenset({"late", "dup", "reorder", "missing-id", "wrong-id", "malformed"})
    inject = Injection(kinds, 0.3, seed)
    clock = ManualClock()
    trace_path = tmp_path / "trace.ndjson"
    trace = TraceWriter(
        trace_path,
        ttl=TTL,
        ranks=(1, 2, 3),
        task_of={i.work_id: i.state_task_id for i in items},
        pipeline=2,
        fence="generation",
    )
    m = Master.open(
        tmp_path / "j.jsonl",
        tmp_path / "s.json",
        items,
        ttl=TTL,
        clock=clock,
        pipeline=2,
        trace=trace,
    )
    transport = in_process(trivial_worker, (1, 2, 3), inject=inject, clock=clock, late_s=2 * TTL)
    master_dispatch(m, transport, poll=1.0)
    m.close()
    trace.close()
    report = validate(trace_path.read_text().splitlines())
    assert report.ok, f"line {report.line}: {report.divergence}"
    assert report.counts["DispatchWork"] >= len(items)
    c = m.counters
    assert c.duplicate_completions == 0
    assert c.completed == len(items)
    assert c.wrong_owner_rejections > 0  # late and duplicated results were refused
    assert _wrong_owner_commits(tmp_path / "j.jsonl") == 0
    assert max(transport.attempts.values()) >= 1


def test_the_documented_generation_records_parse_and_replay(tmp_path: Path) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "journal-format.md"
    (block,) = re.findall(r"```jsonl\n(.*?)\n```", docs.read_text(), re.S)
    lines = block.splitlines()
    parsed = [parse_line(line.encode(), i) for i, line in enumerate(lines, 1)]
    assert [getattr(p, "generation", p) for p in parsed] == [(2, 41), (2, 41)]
    (tmp_path / "j.jsonl").write_text(lines[0] + "\n")
    with WorkLeaseJournal(tmp_path / "j.jsonl") as j:
        assert j.leases["3f" * 32].generation == (2, 41)


def _traced(tmp_path: Path, clock: ManualClock) -> tuple[Master, TraceWriter]:
    trace = _trace_writer(tmp_path, "generation")
    return open_master(tmp_path, clock, pipeline=2, trace=trace), trace


def _old(result: Result) -> Result:
    return replace(result, generation=None)


def test_a_duplicated_result_whose_copy_presents_no_generation_replays(tmp_path: Path) -> None:
    clock = ManualClock()
    m, trace = _traced(tmp_path, clock)
    assert m.dispatch(W1, R1).ok
    res = result_of(m.work_message(R1, W1), ok=False)
    assert m.handle_result(R1, res).work_ok
    assert not m.handle_result(R1, _old(res)).work_ok  # the network's copy, old protocol
    trace.close()
    m.close()
    report = _trace_check(tmp_path)
    assert report.ok, report.divergence


def test_an_old_protocol_copy_after_its_work_went_to_the_rank_again_replays(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    m, trace = _traced(tmp_path, clock)
    assert m.dispatch(W2, R1).ok
    first = _old(result_of(m.work_message(R1, W2), ok=False))
    assert m.handle_result(R1, first).work_ok
    assert m.dispatch(W2, R1).ok
    assert m.handle_result(R1, result_of(m.work_message(R1, W2), ok=False)).work_ok
    assert not m.handle_result(R1, first).work_ok  # the first one's copy, late
    trace.close()
    m.close()
    report = _trace_check(tmp_path)
    assert report.ok, report.divergence


def test_an_older_generation_arriving_after_a_newer_old_protocol_result_replays(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    m, trace = _traced(tmp_path, clock)
    assert m.dispatch(W1, R1).ok
    older = result_of(m.work_message(R1, W1))
    clock.advance(TTL)
    assert m.reclaim_expired() == [W1]
    assert m.dispatch(W1, R1).ok
    assert m.handle_result(R1, _old(result_of(m.work_message(R1, W1), ok=False))).work_ok
    assert m.dispatch(W1, R1).ok
    assert not m.handle_result(R1, older).work_ok  # generation 1 of 3: refused
    trace.close()
    m.close()
    report = _trace_check(tmp_path)
    assert report.ok, report.divergence


def _deep_master(tmp_path: Path, clock: ManualClock, ttl: float, **kw: Any) -> Master:
    """A depth-16 master (``leasefence run``'s default depth was 16, now 64) over 40 items of
    their own tasks."""
    items = [
        WorkItem(WorkId(f"{i:064x}"), StateTaskId(f"s{i}"), f"t{i}", "bound=16", "smt")
        for i in range(40)
    ]
    return Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", items, ttl=ttl, clock=clock, pipeline=16, **kw
    )


def _answer_oldest(m: Master, rank: Rank) -> None:
    (_, disp), *_ = m.dispatches(rank)
    work = m.work_message(rank, disp.work_id)
    assert m.handle_result(rank, result_of(work)).task is not None


def test_depth_by_ttl_gives_a_rank_as_many_dispatches_as_its_gap_between_results_allows(
    tmp_path: Path,
) -> None:
    clock = ManualClock()
    m = _deep_master(tmp_path, clock, ttl=40.0, depth_by_ttl=True)
    assert len(m.dispatch_pending([R1])) == 2  # no gap known yet: depth 2
    _answer_oldest(m, R1)  # the first result: still no gap
    assert m.depth(R1) == 2
    clock.advance(1.0)
    _answer_oldest(m, R1)  # a 1 s gap: 40 / (4 * 1) = 10 dispatches wait at most ttl / 4
    assert m.depth(R1) == 10
    assert len(m.dispatch_pending([R1])) == 10
    for _ in range(10):
        _answer_oldest(m, R1)  # no time passes: the mean gap shrinks by a quarter each time
    assert m.depth(R1) == 16  # never beyond the pipeline
    assert len(m.dispatch_pending([R1])) == 16
    for _ in range(12):
        clock.advance(20.0)
        _answer_oldest(m, R1)
    assert m.depth(R1) == 2  # slow results: never below 2
    assert m.dispatch_pending([R1]) == []  # 4 still held, more than 2: none given
    assert m.depth(R2) == 2  # a rank never heard from
    m.close()


def test_without_depth_by_ttl_every_rank_is_given_the_whole_pipeline(tmp_path: Path) -> None:
    clock = ManualClock()
    m = _deep_master(tmp_path, clock, ttl=40.0)
    assert m.depth(R1) == 16
    assert len(m.dispatch_pending([R1])) == 16
    clock.advance(30.0)
    _answer_oldest(m, R1)
    _answer_oldest(m, R1)
    assert m.depth(R1) == 16
    m.close()


def test_one_call_fills_every_free_slot_of_every_rank_however_unequal(tmp_path: Path) -> None:
    """``dispatch_pending`` serves the ranks round by round, one slot each a round, for as many
    rounds as the rank with the most free slots has: fails if it stopped at the fewest (a rank
    left with free slots until the next turn) or one round short of the most."""
    clock = ManualClock()
    m = _deep_master(tmp_path, clock, ttl=40.0)
    first = m.dispatch_pending([R1, R2])
    assert [rank for rank, _ in first[:4]] == [R1, R2, R1, R2]  # round by round
    assert len(first) == 32
    for _ in range(3):
        _answer_oldest(m, R1)
    _answer_oldest(m, R2)
    again = m.dispatch_pending([R1, R2])
    assert sorted(rank for rank, _ in again) == [R1, R1, R1, R2]
    assert len(m.dispatches(R1)) == len(m.dispatches(R2)) == 16
    m.close()
