"""Issue 17, points 2 and 3 in process: what a hostile or broken worker sends is bounded and
cannot crash the master or keep it running for ever; a failed save leaves memory as on disk; the
run's expected failures map to their exit statuses; the trace waits for the journal's lock."""

from __future__ import annotations

import errno
import json
import math
import stat
from collections.abc import Sequence
from pathlib import Path

import pytest

from leasefence.impl import coordinator as coordinator_module
from leasefence.impl.coordfile import decode as decode_snapshot
from leasefence.impl.coordinator import MAX_AMOUNT, StateShardCoordinator
from leasefence.impl.errors import (
    CoordinatorError,
    InvalidArgument,
    JournalCorrupt,
    JournalLocked,
    JournalUnusable,
    ProtocolError,
    SnapshotError,
)
from leasefence.impl.master import Master
from leasefence.impl.mpirun import (
    EXIT_FILES,
    EXIT_LOCKED,
    RunConfig,
    expected_failure,
    make_parents,
)
from leasefence.impl.trace import TraceWriter
from leasefence.impl.transport import (
    DispatchHooks,
    InProcessTransport,
    ManualClock,
    Reply,
    encode_result,
    master_dispatch,
    result_of,
    stop_workers,
)
from leasefence.impl.wire import (
    FROM_MASTER,
    FROM_WORKER,
    MAX_CPU_S,
    Result,
    StateTaskId,
    Stop,
    Tag,
    Work,
    WorkId,
    claimed_work_id,
    decode,
    encode,
)
from leasefence.impl.workload import Outcome, generate, trivial_worker

W = "0" * 64


def _result(**change: object) -> bytes:
    doc: dict[str, object] = {
        "v": 1, "type": "result", "work_id": W, "ok": True, "cpu_s": 1.0, "output": {},
    }  # fmt: skip
    doc.update(change)
    return json.dumps(doc).encode()


# -- the wire: every number finite and bounded --------------------------------------------------


@pytest.mark.parametrize("cpu", [8.98e307, 1.7976931348623157e308, 10**20, MAX_CPU_S * 2])
def test_a_cpu_time_beyond_the_documented_bound_is_a_protocol_error(cpu: float) -> None:
    with pytest.raises(ProtocolError, match=r"cpu_s must be a finite number in 0\.\.1e\+12"):
        decode(Tag.RESULT, _result(cpu_s=cpu), FROM_WORKER)
    assert decode(Tag.RESULT, _result(cpu_s=MAX_CPU_S), FROM_WORKER)


def test_a_number_in_the_output_that_overflows_to_infinity_is_a_protocol_error() -> None:
    data = _result().replace(b'"output": {}', b'"output": {"x": 1e999}')
    with pytest.raises(ProtocolError, match="must be finite"):
        decode(Tag.RESULT, data, FROM_WORKER)


def test_a_bye_count_beyond_a_signed_64_bit_integer_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="BYE results"):
        decode(Tag.BYE, b'{"v":1,"type":"bye","results":9223372036854775808}', FROM_WORKER)


@pytest.mark.parametrize("task", ["", " ", "a b", "\x00", "x" * 257, 7, None, ["s"]])
def test_an_empty_or_malformed_state_task_id_in_a_result_is_a_protocol_error(
    task: object,
) -> None:
    data = _result(state_task_id=task)
    if task is None:  # JSON null: old protocol, no report
        assert decode(Tag.RESULT, data, FROM_WORKER)
        return
    with pytest.raises(ProtocolError, match="state_task_id"):
        decode(Tag.RESULT, data, FROM_WORKER)


def test_stop_carries_the_exit_status_within_0_to_255() -> None:
    assert encode(Stop()) == (Tag.STOP, b'{"type":"stop","v":1}')  # unchanged when 0
    tag, data = encode(Stop(3))
    assert decode(tag, data, FROM_MASTER) == Stop(3)
    with pytest.raises(ProtocolError, match="STOP status"):
        decode(Tag.STOP, b'{"v":1,"type":"stop","status":256}', FROM_MASTER)


def test_a_refused_message_names_the_work_it_claims_only_when_it_is_a_work_id() -> None:
    assert claimed_work_id(_result(cpu_s=1e308)) == W
    assert claimed_work_id(_result(work_id="not-hex")) is None
    assert claimed_work_id(b"\x80\x04 a pickle") is None
    assert claimed_work_id(b"[1, 2]") is None


# -- the coordinator: statistics finite, memory as on disk ---------------------------------------


def _disk(path: Path) -> dict[str, object]:
    """The leases and statistics the snapshot file holds (its checkpoint and its log)."""
    doc = decode_snapshot(path, path.read_bytes())
    return {
        "leases": sorted(doc.leases),
        "stats": {
            t: {
                "completions": s.completions,
                "failures": s.failures,
                "reward": s.reward,
                "cost": s.cost,
            }
            for t, s in doc.stats.items()
        },
    }


def _memory(c: StateShardCoordinator) -> dict[str, object]:
    return {
        "leases": sorted(c.leases),
        "stats": {
            t: {"completions": s.completions, "failures": s.failures, "reward": s.reward,
                "cost": s.cost}
            for t, s in c.statistics.items()
        },
    }  # fmt: skip


def test_costs_that_would_overflow_the_statistics_are_refused_and_memory_stays_as_on_disk(
    tmp_path: Path,
) -> None:
    # The reproduction: lease and complete(cost=1e308), twice.
    path = tmp_path / "s.json"
    c = StateShardCoordinator(path)
    for _ in range(2):
        assert c.lease("s1", 1) or c.active_owner("s1") == 1
        with pytest.raises(InvalidArgument, match="cost must be a finite number"):
            c.complete("s1", 1, cost=1e308)
        assert _memory(c) == _disk(path)
    assert c.active_owner("s1") == 1
    assert all(math.isfinite(s.cost) and math.isfinite(s.reward) for s in c.statistics.values())
    assert c.complete("s1", 1, reward=-MAX_AMOUNT, cost=MAX_AMOUNT)
    assert _memory(c) == _disk(path)


def test_a_mutation_whose_save_fails_is_undone_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.json"
    c = StateShardCoordinator(path)
    assert c.lease("s1", 1)
    before = _disk(path)

    def full_disk(target: Path, *_: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(target))

    # a change appends to the snapshot's log; a checkpoint replaces the file: both fail
    monkeypatch.setattr(coordinator_module, "_atomic_write", full_disk)
    monkeypatch.setattr(coordinator_module, "append_records", full_disk)
    leases = c.leases
    with pytest.raises(CoordinatorError, match="No space left on device"):
        c.complete("s1", 1, reward=1.0, cost=2.0)
    assert _memory(c) == before == _disk(path)
    assert c.active_owner("s1") == 1
    assert leases == c.leases  # the live view still shows the coordinator's state
    with pytest.raises(CoordinatorError, match="refused"):
        c.lease("s2", 2)  # the failure is fatal, as the journal's
    assert _memory(c) == before


# -- the master: an item answered only invalidly is given up, never retried for ever --------------


class Garbage:
    """A worker that answers every WORK with a message the wire refuses (cpu_s out of range)."""

    def __call__(self, result: Result, rank: int, attempt: int) -> Sequence[Reply]:
        doc = {"v": 1, "type": "result", "work_id": result.work_id, "ok": True,
               "cpu_s": 1e308, "output": {}}  # fmt: skip
        return [Reply(Tag.RESULT, json.dumps(doc).encode())]


class Bounded(DispatchHooks):
    """Fails the test instead of looping for ever."""

    def __init__(self, turns: int) -> None:
        self.turns = turns

    def on_progress(self, master: Master) -> None:
        self.turns -= 1
        assert self.turns > 0, "the master loop did not end: an item is retried for ever"


@pytest.mark.parametrize("max_invalid", [1, 3])
def test_an_item_answered_only_invalidly_is_given_up_after_max_invalid_dispatches(
    tmp_path: Path, max_invalid: int
) -> None:
    items = generate(4, 0)
    clock = ManualClock()
    m = Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", items, ttl=5.0, clock=clock,
        max_invalid=max_invalid,
    )  # fmt: skip
    transport = InProcessTransport(trivial_worker, (1, 2), respond=Garbage(), clock=clock)
    m = master_dispatch(m, transport, poll=1.0, hooks=Bounded(10_000))
    c = m.counters
    assert c.completed == 0
    assert c.given_up == len(items)
    assert c.invalid_results == c.dispatched == max_invalid * len(items)
    assert all(m.given_up(i.work_id) for i in items)
    assert transport.stopped == {1, 2}
    m.close()


def test_a_garbage_message_followed_by_the_real_result_charges_nothing(tmp_path: Path) -> None:
    items = generate(6, 0)
    clock = ManualClock()
    m = Master.open(tmp_path / "j.jsonl", tmp_path / "s.json", items, ttl=5.0, clock=clock)

    def garbage_first(result: Result, rank: int, attempt: int) -> Sequence[Reply]:
        return [*Garbage()(result, rank, attempt), Reply(*encode(result))]

    transport = InProcessTransport(trivial_worker, (1, 2), respond=garbage_first, clock=clock)
    m = master_dispatch(m, transport, poll=1.0, hooks=Bounded(10_000))
    assert m.counters.completed == len(items)
    assert m.counters.malformed_messages == len(items)
    assert (m.counters.invalid_results, m.counters.given_up) == (0, 0)
    m.close()


def test_run_takes_max_invalid_and_documents_its_exit_statuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from leasefence.cli import build_parser

    args = build_parser("run").parse_args(["run", "--max-invalid", "5"])
    assert args.max_invalid == 5
    assert RunConfig().max_invalid == 3
    with pytest.raises(SystemExit):
        build_parser("run").parse_args(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for fragment in ("--max-invalid", "exit status", "3 a file could not be used", "4 the journal"):
        assert fragment in text


def test_run_s_defaults_are_the_run_config_s() -> None:
    """``leasefence run`` with no options runs ``RunConfig()``: fails if a default is changed in
    one place only (the pipeline's, 128 since issue 19, is written in both)."""
    import dataclasses

    from leasefence.cli import build_parser

    args = build_parser("run").parse_args(["run"])
    shared = [f.name for f in dataclasses.fields(RunConfig) if hasattr(args, f.name)]
    assert "pipeline" in shared
    assert len(shared) >= 10
    assert {n: getattr(args, n) for n in shared} == {n: getattr(RunConfig(), n) for n in shared}


# -- run's expected failures and their exit statuses --------------------------------------------


@pytest.mark.parametrize(
    ("exc", "status", "fragment"),
    [
        (JournalLocked("journal j is locked by another writer"), EXIT_LOCKED, "another master"),
        (JournalCorrupt("journal j is corrupt: line 2"), EXIT_FILES, "line 2"),
        (JournalUnusable("journal j: a failed write failed: ENOSPC"), EXIT_FILES, "ENOSPC"),
        (SnapshotError("coordinator snapshot s: not JSON"), EXIT_FILES, "not JSON"),
        (OSError(errno.ENOSPC, "No space left on device", "t.nd"), EXIT_FILES, "t.nd: No space"),
        (PermissionError(errno.EACCES, "Permission denied", "run"), EXIT_FILES, "run: Permission"),
    ],
)
def test_each_expected_failure_of_run_has_its_exit_status_and_one_line(
    exc: BaseException, status: int, fragment: str
) -> None:
    found = expected_failure(exc)
    assert found is not None
    assert found[0] == status
    assert fragment in found[1]
    assert "\n" not in found[1]


def test_a_failed_save_is_a_file_failure_but_a_bug_is_not_expected() -> None:
    save = CoordinatorError("saving the snapshot s failed: [Errno 28] No space left on device")
    save.__cause__ = OSError(errno.ENOSPC, "No space left on device")
    assert expected_failure(save) == (EXIT_FILES, str(save))
    assert expected_failure(InvalidArgument("cost")) is None
    assert expected_failure(RuntimeError("a bug")) is None


def test_the_trace_touches_no_file_before_its_first_event_and_creates_it_0600(
    tmp_path: Path,
) -> None:
    path = tmp_path / "t.ndjson"
    trace = TraceWriter(path, ttl=1.0, ranks=[1], task_of={})
    assert not path.exists()
    trace.reclaim_expired(5.0, [])
    trace.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [json.loads(x)["event"] for x in path.read_text().splitlines()] == [
        "Header", "ReclaimExpired",
    ]  # fmt: skip


def test_a_trace_write_that_fails_names_the_trace(tmp_path: Path) -> None:
    trace = TraceWriter(tmp_path / "gone" / "t.ndjson", ttl=1.0, ranks=[1], task_of={})
    with pytest.raises(FileNotFoundError) as err:
        trace.reclaim_expired(5.0, [])
    assert expected_failure(err.value) == (
        EXIT_FILES, f"{tmp_path / 'gone' / 't.ndjson'}: No such file or directory",
    )  # fmt: skip


def test_missing_parent_directories_are_made_0700(tmp_path: Path) -> None:
    make_parents(tmp_path / "a" / "b" / "j.jsonl", None)
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o700


def test_stop_workers_sends_the_status_and_waits_for_every_bye() -> None:
    transport = InProcessTransport(trivial_worker, (1, 2, 3))
    assert stop_workers(transport, EXIT_FILES)
    assert transport.stopped == {1, 2, 3}


@pytest.mark.parametrize(
    "work_id", ["", "0" * 63, "0" * 65, "G" * 64, "A" * 64, " " + "0" * 63, 7, None, ["0" * 64]]
)
@pytest.mark.parametrize("tag", [Tag.RESULT, Tag.WORK])
def test_a_result_or_work_with_a_malformed_work_id_is_a_protocol_error(
    tag: Tag, work_id: object
) -> None:
    accept = FROM_WORKER if tag is Tag.RESULT else FROM_MASTER
    doc = json.loads(_result(work_id=work_id))
    if tag is Tag.WORK:
        doc = {"v": 1, "type": "work", "work_id": work_id, "state_task_id": "s1", "payload": {}}
    with pytest.raises(ProtocolError, match="work_id"):
        decode(tag, json.dumps(doc).encode(), accept)


class _Fraction:
    """A number that is not a float but has one (``float()`` of it is 0.25)."""

    def __float__(self) -> float:
        return 0.25


class _Duck:
    ok, cpu_s, output = True, 0.0, {}


#: A worker function's outcome no RESULT can carry, made inside the worker function (compiled,
#: ``Outcome`` refuses some of these itself: a failed result either way).
BAD_OUTCOMES = {
    "ok-int": lambda: Outcome(1, 0.0, {}),  # type: ignore[arg-type]
    "ok-none": lambda: Outcome(None, 0.0, {}),  # type: ignore[arg-type]
    "cpu-str": lambda: Outcome(True, "1.5", {}),  # type: ignore[arg-type]
    "cpu-none": lambda: Outcome(True, None, {}),  # type: ignore[arg-type]
    "cpu-nan": lambda: Outcome(True, math.nan, {}),
    "cpu-inf": lambda: Outcome(True, math.inf, {}),
    "cpu-negative": lambda: Outcome(True, -1.0, {}),
    "cpu-past-the-bound": lambda: Outcome(True, MAX_CPU_S * 2, {}),
    "cpu-huge-int": lambda: Outcome(True, 10**400, {}),
    "output-none": lambda: Outcome(True, 0.0, None),  # type: ignore[arg-type]
    "output-list": lambda: Outcome(True, 0.0, [1, 2]),  # type: ignore[arg-type]
    "output-str": lambda: Outcome(True, 0.0, "done"),  # type: ignore[arg-type]
    "not-an-outcome": lambda: _Duck(),
    "none": lambda: None,
}


def _work() -> Work:
    return Work(WorkId(W), StateTaskId("task-1"), {"n": 1}, (2, 5))


@pytest.mark.parametrize("name", sorted(BAD_OUTCOMES))
def test_an_outcome_no_result_can_carry_is_a_failed_result_that_says_why(name: str) -> None:
    """Fails if a worker function's odd outcome stops the worker (an exception out of
    ``result_of`` or ``encode_result``: the worker rank died and the master waited for ever,
    output None and cpu_s NaN among them) or reaches the master as anything but a valid failed
    RESULT of its own work and generation."""
    result = result_of(_work(), lambda work: BAD_OUTCOMES[name]())
    assert result.ok is False
    assert "error" in result.output
    tag, data = encode_result(result)
    got = decode(tag, data, FROM_WORKER)
    assert isinstance(got, Result)
    assert (got.work_id, got.state_task_id, got.ok, got.generation) == (W, "task-1", False, (2, 5))
    assert got.cpu_s == 0.0


@pytest.mark.parametrize(
    ("cpu", "seconds"),
    [(3, 3.0), (0.5, 0.5), (_Fraction(), 0.25), (True, 1.0), (MAX_CPU_S, MAX_CPU_S)],
)
def test_an_outcomes_cpu_time_is_float_of_it_in_either_engine(cpu: object, seconds: float) -> None:
    # Compiled, ``Outcome`` stores ``float()`` of it; interpreted, ``result_of`` reads it so.
    result = result_of(_work(), lambda work: Outcome(True, cpu, {"k": 1}))  # type: ignore[arg-type]
    assert (result.ok, result.cpu_s, type(result.cpu_s), result.output) == (
        True,
        seconds,
        float,
        {"k": 1},
    )
    tag, data = encode_result(result)
    assert decode(tag, data, FROM_WORKER) == result


def test_an_output_that_json_cannot_carry_is_a_failed_result_keeping_its_cpu_time() -> None:
    result = result_of(_work(), lambda work: Outcome(True, 0.5, {"s": {1, 2}}))
    assert result.ok is True  # a mapping: only writing it can tell
    got = decode(*encode_result(result), FROM_WORKER)
    assert isinstance(got, Result)
    assert (got.ok, got.cpu_s) == (False, 0.5)
    assert "cannot encode" in got.output["error"]
