"""Trace validation replays a recorded run through the model and names the first divergence."""

from __future__ import annotations

import argparse
import ast
import gc
import json
import math
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path, PurePosixPath

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasefence.cli import COMMANDS, build_parser, main
from leasefence.cli.cmd_trace import trace_path
from leasefence.conformance.tracecheck import TraceFormatError, validate

W1, W2, W3 = "a" * 64, "b" * 64, "c" * 64
HEADER = {
    "event": "Header",
    "version": 1,
    "ttl": 5.0,
    "ranks": [1, 2],
    "task_of": {W1: "s1", W2: "s1", W3: "s2"},
}


def _lines(*events: dict[str, object]) -> list[str]:
    return [json.dumps(e) for e in (HEADER, *events)]


def _deliver(r: int, w: str, now: float, **kw: object) -> dict[str, object]:
    base: dict[str, object] = {
        "event": "DeliverResult",
        "r": r,
        "w": w,
        "reported": "s1",
        "ok": True,
        "now": now,
    }
    base.update({"stale": False, "task": "s1", "work_ok": True, "state_ok": True})
    base.update(kw)
    return base


GOOD = _lines(
    {"event": "DispatchWork", "w": W1, "r": 1, "now": 100.0, "ok": True, "refused": None},
    {"event": "DispatchWork", "w": W2, "r": 2, "now": 100.1, "ok": False, "refused": "lease_state"},
    {"event": "DispatchWork", "w": W3, "r": 2, "now": 100.2, "ok": True, "refused": None},
    _deliver(1, W1, 101.0),
    # a duplicate of the same result: the work is completed, the journal refuses it
    _deliver(1, W1, 101.5, work_ok=False, state_ok=False),
    {"event": "ReclaimExpired", "now": 106.0, "reclaimed": [W3]},
    # a late result from rank 2 after its lease was reclaimed: refused by the fence
    _deliver(2, W3, 106.5, reported="s2", task="s2", work_ok=False, state_ok=False),
    {"event": "RestartMaster", "now": 107.0},
    {"event": "DispatchWork", "w": W2, "r": 1, "now": 107.5, "ok": True, "refused": None},
)


def test_a_trace_that_the_model_allows_validates_step_by_step() -> None:
    report = validate(GOOD)
    assert report.ok, report.divergence
    assert report.steps == len(GOOD) - 1
    assert report.counts == {
        "DispatchWork": 4,
        "DeliverResult": 3,
        "ReclaimExpired": 1,
        "RestartMaster": 1,
    }


def test_a_completion_the_model_refuses_is_reported_with_its_line() -> None:
    bad = list(GOOD)
    bad[5] = json.dumps(_deliver(1, W1, 101.5))  # the duplicate "completes" a second time
    report = validate(bad)
    assert not report.ok
    assert report.line == 6
    assert "DeliverResult" in (report.divergence or "")


def test_a_dispatch_to_a_busy_rank_is_a_divergence() -> None:
    bad = _lines(
        {"event": "DispatchWork", "w": W1, "r": 1, "now": 1.0, "ok": True, "refused": None},
        {"event": "DispatchWork", "w": W3, "r": 1, "now": 2.0, "ok": True, "refused": None},
    )
    report = validate(bad)
    assert not report.ok
    assert "busy" in (report.divergence or "")


def test_a_torn_last_line_is_ignored_and_reported() -> None:
    report = validate([*GOOD, '{"event": "DispatchW'])
    assert report.ok
    assert report.torn_tail


def test_validate_pauses_the_cyclic_collector_and_leaves_it_as_it_found_it() -> None:
    enabled = gc.isenabled()
    try:
        for before in (True, False):
            (gc.enable if before else gc.disable)()
            assert validate(GOOD).ok
            assert gc.isenabled() is before
            with pytest.raises(TraceFormatError):
                validate([GOOD[0], "{not json", *GOOD[1:]])
            assert gc.isenabled() is before  # restored after an error too
    finally:
        (gc.enable if enabled else gc.disable)()


@pytest.mark.parametrize(
    "line",
    [
        '{"event":"X","now":1.5}',
        '{"event":"X","now":1.5}\n',
        '{"event":"X","now":1.5}  \t',
        '  {"event":"X"}',  # leading blanks: json.loads skips them
        '{"event":"X"} {"event":"Y"}',  # two values: extra data
        '{"event":"X"}x',
        '{"event":"X",}',
        '{"event":"X","now":NaN}',
        "[1, 2]",
        '"text"',
        "7",
        "",
        "{",
    ],
)
def test_a_line_decodes_exactly_as_json_loads_decodes_it(line: str) -> None:
    # The scanner is called directly for speed: the value, or the error, must be loads's own.
    from leasefence.conformance.traceformat import _decode_line

    def outcome(decode: Callable[[str], object]) -> tuple[str, object]:
        try:
            return "value", decode(line)
        except json.JSONDecodeError as exc:
            return "error", str(exc)

    assert outcome(_decode_line) == outcome(json.loads)


@pytest.mark.parametrize("where", ["last", "middle"])
def test_a_line_nested_too_deeply_is_a_format_error_naming_it_not_a_traceback(where: str) -> None:
    # json raises RecursionError, not JSONDecodeError, for such a line; nor is it a torn tail.
    deep = "[" * 100_000
    lines = [*GOOD, deep] if where == "last" else [GOOD[0], deep, *GOOD[1:]]
    n = len(lines) if where == "last" else 2
    with pytest.raises(TraceFormatError, match=f"line {n}: nested too deeply"):
        validate(lines)


def test_a_bad_line_in_the_middle_is_an_error() -> None:
    with pytest.raises(TraceFormatError, match="line 2"):
        validate([GOOD[0], "{not json", *GOOD[1:]])


def test_trace_check_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.ndjson", tmp_path / "bad.ndjson"
    good.write_text("\n".join(GOOD) + "\n")
    lines = list(GOOD)
    lines[5] = json.dumps(_deliver(1, W1, 101.5))
    bad.write_text("\n".join(lines) + "\n")
    assert main(["trace", "check", str(good)]) == 0
    out = capsys.readouterr().out
    assert "OK, 9 steps" in out
    assert "pipeline 1, rank fence); invariants hold" in out
    deep = tmp_path / "depth2.ndjson"
    deep.write_text("\n".join(_pipelined(*DEPTH_TWO)) + "\n")
    assert main(["trace", "check", str(deep)]) == 0
    assert "pipeline 2, generation fence" in capsys.readouterr().out
    assert main(["trace", "check", str(bad)]) == 1
    assert "DIVERGES at line 6" in capsys.readouterr().out
    assert main(["trace", "check", str(tmp_path / "missing.ndjson")]) == 2


def _restart(recovered: dict[str, object]) -> str:
    return json.dumps({"event": "RestartMaster", "now": 107.0, "recovered": recovered})


DISK_AT_RESTART = {
    "journal": {"leases": {}, "completed": [W1], "attempts": {W1: 1, W2: 1, W3: 1}},
    "coordinator": {"epoch": 1, "leases": {}, "stats": {"s1": [1, 0]}},
}


def test_a_restart_whose_disk_state_matches_the_model_needs_no_lost_step() -> None:
    lines = [*GOOD[:8], _restart(DISK_AT_RESTART), GOOD[9]]
    report = validate(lines)
    assert report.ok, report.divergence
    assert report.lost_steps == 0


def test_a_step_made_durable_but_never_traced_before_a_kill_is_accepted_when_the_model_allows_it() -> (
    None
):
    disk = json.loads(json.dumps(DISK_AT_RESTART))
    # the killed master leased W2 to rank 1 in the journal and died before the state lease
    disk["journal"]["leases"] = {W2: [1, 106.7, "unix"]}
    disk["journal"]["attempts"][W2] = 2
    lines = [*GOOD[:8], _restart(disk)]
    report = validate(lines)
    assert report.ok, report.divergence
    assert report.lost_steps == 1
    assert report.crashes == {"CrashDispatchWork": 1}  # the journal half of a dispatch


def test_a_whole_dispatch_lost_before_a_restart_validates_each_step_checked_on_its_own() -> None:
    # The killed master leased W2 to rank 1 in the journal and in the coordinator, sent it, and
    # died before tracing it. Replay runs the lost DispatchWork, then the restart: two model
    # steps. Checked as one, L3 would see a message sent with no dispatch started (the restart
    # forgets it): each step's properties are checked on that step alone.
    disk = json.loads(json.dumps(DISK_AT_RESTART))
    disk["journal"]["leases"] = {W2: [1, 106.7, "unix"]}
    disk["journal"]["attempts"][W2] = 2
    disk["coordinator"]["leases"] = {"s1": [1, 106.7, 1]}
    report = validate([*GOOD[:8], _restart(disk)])
    assert report.ok, report.divergence
    assert (report.lost_steps, report.crashes) == (1, {})


def test_a_disk_state_no_single_step_explains_is_a_divergence() -> None:
    disk = json.loads(json.dumps(DISK_AT_RESTART))
    disk["journal"]["completed"] = [W1, W3]  # W3's lease was reclaimed: nothing may complete it
    report = validate([*GOOD[:8], _restart(disk)])
    assert not report.ok
    assert "RestartMaster" in (report.divergence or "")


def test_a_kill_inside_a_refused_dispatch_before_its_work_lease_was_given_back_is_accepted() -> (
    None
):
    # W1 runs on rank 1 and holds s1; the master tried W2 (also s1) on rank 2: the journal lease
    # was written, the state lease was refused, and the master died before RejectDispatch.
    disk = {
        "journal": {
            "leases": {W1: [1, 100.0, "unix"], W2: [2, 100.05, "unix"]},
            "completed": [],
            "attempts": {W1: 1, W2: 1},
        },
        "coordinator": {"epoch": 2, "leases": {"s1": [1, 0.0, 1]}, "stats": {}},
    }
    lines = [
        GOOD[0],
        GOOD[1],
        json.dumps({"event": "RestartMaster", "now": 100.1, "recovered": disk}),
    ]
    report = validate(lines)
    assert report.ok, report.divergence
    assert report.lost_steps == 1
    assert report.crashes == {"CrashDispatchWork": 1}


def test_a_kill_after_the_journal_half_of_a_result_is_the_specs_crash_deliver_result() -> None:
    # W3's result from rank 2 completed W3 in the journal; the master died before s2's
    # CompleteState: s2 books no completion (the journal's count is higher, which
    # CompletionsAccounted allows), and the restarted master voids rank 2's stale lease.
    disk = {
        "journal": {"leases": {}, "completed": [W1, W3], "attempts": {W1: 1, W2: 1, W3: 1}},
        "coordinator": {"epoch": 2, "leases": {"s2": [2, 0.0, 1]}, "stats": {"s1": [1, 0]}},
    }
    lines = [
        *GOOD[:5],
        json.dumps({"event": "RestartMaster", "now": 102.0, "recovered": disk}),
        json.dumps(
            {"event": "DispatchWork", "w": W2, "r": 1, "now": 102.5, "ok": True, "refused": None}
        ),
    ]
    report = validate(lines)
    assert report.ok, report.divergence
    assert (report.lost_steps, report.crashes) == (1, {"CrashDeliverResult": 1})
    # the same disk state with the completion booked is the whole step, lost: no crash
    disk["coordinator"] = {"epoch": 2, "leases": {}, "stats": {"s1": [1, 0], "s2": [1, 0]}}
    lines[5] = json.dumps({"event": "RestartMaster", "now": 102.0, "recovered": disk})
    report = validate(lines)
    assert report.ok, report.divergence
    assert (report.lost_steps, report.crashes) == (1, {})


def test_a_duplicated_result_then_a_new_dispatch_of_the_same_work_to_the_same_rank_validates() -> (
    None
):
    lines = _lines(
        {"event": "DispatchWork", "w": W1, "r": 1, "now": 1.0, "ok": True, "refused": None},
        _deliver(1, W1, 1.1, ok=False, work_ok=True, state_ok=True),
        _deliver(1, W1, 1.2, ok=False, work_ok=False, state_ok=False),
        {"event": "DispatchWork", "w": W1, "r": 1, "now": 1.3, "ok": True, "refused": None},
        _deliver(1, W1, 1.4),
    )
    report = validate(lines)
    assert report.ok, report.divergence


# -- depth 2, generation fencing (issue 12, trace format version 2) ------------------------------

PIPELINED = {**HEADER, "version": 2, "pipeline": 2, "fence": "generation"}


def _dispatch(w: str, r: int, now: float, gen: list[int] | None) -> dict[str, object]:
    return {"event": "DispatchWork", "w": w, "r": r, "now": now, "ok": True, "refused": None} | {
        "gen": gen
    }


def _pipelined(*events: dict[str, object]) -> list[str]:
    return [json.dumps(e) for e in (PIPELINED, *events)]


# Rank 1 holds two dispatches; w1's lease is reclaimed and w1 goes to rank 1 again with a newer
# generation; the result of the first generation arrives late and twice, then the current one.
DEPTH_TWO = [
    _dispatch(W1, 1, 100.0, [1, 1]),
    _dispatch(W3, 1, 100.0, [1, 2]),
    _deliver(1, W3, 101.0, reported="s2", task="s2", gen=[1, 2]),
    {"event": "ReclaimExpired", "now": 106.0, "reclaimed": [W1]},
    _dispatch(W1, 1, 106.0, [1, 3]),
    _deliver(1, W1, 106.5, work_ok=False, state_ok=False, gen=[1, 1]),
    _deliver(1, W1, 106.6, work_ok=False, state_ok=False, gen=[1, 1]),
    _deliver(1, W1, 107.0, gen=[1, 3]),
]


def test_a_depth_two_trace_with_a_late_duplicated_older_generation_validates() -> None:
    report = validate(_pipelined(*DEPTH_TWO))
    assert report.ok, report.divergence
    assert report.counts == {"DispatchWork": 3, "DeliverResult": 4, "ReclaimExpired": 1}


def test_a_version_one_header_replays_at_depth_one_so_a_second_dispatch_is_busy() -> None:
    report = validate(_lines(*({k: v for k, v in e.items() if k != "gen"} for e in DEPTH_TWO)))
    assert not report.ok
    assert report.line == 3
    assert "busy" in (report.divergence or "")


def test_generations_under_a_rank_fenced_header_are_a_divergence() -> None:
    report = validate(_lines(*DEPTH_TWO))
    assert not report.ok
    assert report.line == 2
    assert "one side fences by rank alone" in (report.divergence or "")


def test_an_older_generation_that_completes_the_newer_lease_is_a_divergence() -> None:
    bad = list(DEPTH_TWO)
    bad[5] = _deliver(1, W1, 106.5, gen=[1, 1])  # the implementation accepted the stale token
    report = validate(_pipelined(*bad))
    assert not report.ok
    assert report.line == 7
    assert "(stale, task, work_ok, state_ok)" in (report.divergence or "")


def test_a_generation_given_out_twice_is_a_divergence() -> None:
    bad = list(DEPTH_TWO)
    bad[4] = _dispatch(W1, 1, 106.0, [1, 1])  # the first generation again
    report = validate(_pipelined(*bad))
    assert not report.ok
    assert report.line == 6
    assert "repeated" in (report.divergence or "")


def test_a_result_presenting_a_generation_never_dispatched_is_a_divergence() -> None:
    bad = [*DEPTH_TWO[:2], _deliver(1, W3, 101.0, reported="s2", task="s2", gen=[1, 9])]
    report = validate(_pipelined(*bad))
    assert not report.ok
    assert "no such result in flight" in (report.divergence or "")


def test_an_old_protocol_result_without_a_generation_is_settled_by_the_stored_dispatch() -> None:
    good = [*DEPTH_TWO[:2], _deliver(1, W3, 101.0, reported=None, task="s2", gen=None)]
    report = validate(_pipelined(*good))
    assert report.ok, report.divergence


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("pipeline", 0, "pipeline must be a whole number >= 1"),
        ("pipeline", True, "pipeline must be a whole number >= 1"),
        ("fence", "epoch", "fence must be one of rank, generation"),
    ],
)
def test_a_bad_pipelined_header_is_a_format_error(field: str, value: object, message: str) -> None:
    lines = [json.dumps({**PIPELINED, field: value}), json.dumps(DEPTH_TWO[0])]
    with pytest.raises(TraceFormatError, match=message):
        validate(lines)


@pytest.mark.parametrize("gen", [[1], [1, "2"], "1,2", [1, 2, 3], [True, 1]])
def test_a_malformed_generation_is_a_format_error_naming_its_line(gen: object) -> None:
    lines = _pipelined(_dispatch(W1, 1, 100.0, [1, 1]), _deliver(1, W1, 101.0, gen=gen))
    with pytest.raises(TraceFormatError, match="line 3: gen must be"):
        validate(lines)


def _lost_reclaim_trace(
    journal_leases: dict[str, list[object]], state_leases: dict[str, list[object]]
) -> list[str]:
    """W1 leased at 100 and W3 at 103 (TTL 5), then a master killed and restarted at 109 that
    read ``journal_leases`` and ``state_leases`` from disk."""
    disk = {
        "journal": {"leases": journal_leases, "completed": [], "attempts": {W1: 1, W3: 1}},
        "coordinator": {"epoch": 2, "leases": state_leases, "stats": {}},
    }
    return _lines(
        {"event": "DispatchWork", "w": W1, "r": 1, "now": 100.0, "ok": True, "refused": None},
        {"event": "DispatchWork", "w": W3, "r": 2, "now": 103.0, "ok": True, "refused": None},
        {"event": "RestartMaster", "now": 109.0, "recovered": disk},
    )


def test_a_reclaim_made_durable_at_an_earlier_instant_and_never_traced_is_accepted() -> None:
    # Between 105 and 108 only W1 (and s1) had expired: a reclaim then, lost to the kill, left
    # W3 held; at the restart's own clock (109) a reclaim would have taken W3 too.
    lines = _lost_reclaim_trace({W3: [2, 103.0, "unix"]}, {"s2": [2, 103.0, 1]})
    report = validate(lines)
    assert report.ok, report.divergence
    assert report.lost_steps == 1


def test_a_reclaim_of_a_lease_that_had_not_expired_while_an_older_one_stayed_is_a_divergence() -> (
    None
):
    # W3 gone while W1, which expired first, is still held: no instant's reclaim explains it.
    lines = _lost_reclaim_trace({W1: [1, 100.0, "unix"]}, {"s1": [1, 100.0, 1]})
    report = validate(lines)
    assert not report.ok
    assert report.line == 4
    assert "RestartMaster" in (report.divergence or "")


def test_the_documented_example_trace_replays_and_its_documented_mutation_diverges(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = Path(__file__).resolve().parents[2] / "docs" / "trace-format.md"
    text = docs.read_text()
    (block,) = re.findall(r"```jsonl\n(.*?)\n```", text, re.S)
    lines = block.splitlines()
    assert [json.loads(x) for x in lines[1:]] == DEPTH_TWO  # the steps tested above
    path = tmp_path / "example.ndjson"
    path.write_text(block + "\n")
    assert main(["trace", "check", str(path)]) == 0
    (promised,) = re.findall(r"prints\n`(OK, [^`]*)`", text)
    assert capsys.readouterr().out == f"{path}: {promised}\n"
    bad = json.loads(lines[6])
    bad["work_ok"] = True
    path.write_text("\n".join([*lines[:6], json.dumps(bad), *lines[7:]]) + "\n")
    assert main(["trace", "check", str(path)]) == 1
    assert "DIVERGES at line 7" in capsys.readouterr().out


def _edge(updated: float, now: float, reclaimed: list[str]) -> list[str]:
    header = {**HEADER, "ttl": 1.0}
    return [
        json.dumps(header),
        json.dumps(
            {"event": "DispatchWork", "w": W1, "r": 1, "now": updated, "ok": True, "refused": None}
        ),
        json.dumps({"event": "ReclaimExpired", "now": now, "reclaimed": reclaimed}),
    ]


def test_a_lease_a_fraction_of_a_millisecond_short_of_its_ttl_is_not_reclaimed() -> None:
    # A campaign run: 0.99976 s old with a 1 s TTL; the implementation kept it, and so must
    # the model (ticks used to be milliseconds, which rounded the age up to the TTL).
    assert validate(_edge(264.3373432, 265.337106, [])).ok
    report = validate(_edge(264.3373432, 265.337106, [W1]))
    assert not report.ok
    assert "implementation reclaimed" in (report.divergence or "")


@pytest.mark.parametrize("reclaimed", [[], [W1]])
def test_a_lease_within_a_tick_of_its_ttl_may_go_either_way(reclaimed: list[str]) -> None:
    # 0.9999997 s in floats, exactly one second in microsecond ticks: either outcome is allowed.
    assert validate(_edge(100.0000004, 101.0000001, reclaimed)).ok


def test_what_a_restart_reclaimed_is_compared() -> None:
    lines = [
        *_edge(100.0, 100.5, [])[:2],
        json.dumps({"event": "RestartMaster", "now": 102.0, "reclaimed": []}),
    ]
    report = validate(lines)
    assert not report.ok
    assert "RestartMaster: implementation reclaimed [], model" in (report.divergence or "")
    lines[-1] = json.dumps({"event": "RestartMaster", "now": 102.0, "reclaimed": [W1]})
    assert validate(lines).ok


# -- issue 18, point 3: never fail a correct run, say clearly what is wrong with a bad file -----


@pytest.mark.parametrize(("pipeline", "fence"), [(1, "rank"), (2, "generation")])
def test_a_result_for_work_never_dispatched_that_the_master_refuses_validates(
    tmp_path: Path, pipeline: int, fence: str
) -> None:
    from leasefence.impl.master import Master
    from leasefence.impl.trace import TraceWriter
    from leasefence.impl.transport import ManualClock
    from leasefence.impl.wire import Rank, Result, StateTaskId, WorkId
    from leasefence.impl.workload import WorkItem

    items = [WorkItem(WorkId(W1), StateTaskId("s1"), "t1", "bound=16", "smt")]
    items += [WorkItem(WorkId(W3), StateTaskId("s2"), "t2", "bound=16", "smt")]
    task_of = {i.work_id: i.state_task_id for i in items}
    trace = TraceWriter(
        tmp_path / "t.ndjson",
        ttl=5.0,
        ranks=[1, 2],
        task_of=task_of,
        pipeline=pipeline,
        fence=fence,
    )
    m = Master.open(
        tmp_path / "j.jsonl",
        tmp_path / "s.json",
        items,
        ttl=5.0,
        clock=ManualClock(),
        trace=trace,
        pipeline=pipeline,
        fence=fence,
    )
    assert m.dispatch(WorkId(W1), Rank(1)).ok
    gen = (1, 9) if fence == "generation" else None
    # rank 2 answers W3, which nobody dispatched; rank 1 answers W3 too, besides its W1
    for rank in (Rank(2), Rank(1)):
        refused = m.handle_result(rank, Result(WorkId(W3), StateTaskId("s2"), True, generation=gen))
        assert not refused.work_ok
        assert not refused.state_ok
    assert m.handle_result(Rank(1), Result(WorkId(W1), StateTaskId("s1"), True)).work_ok
    m.close()
    trace.close()
    report = validate((tmp_path / "t.ndjson").read_text().splitlines())
    assert report.ok, report.divergence
    assert report.counts == {"DispatchWork": 1, "DeliverResult": 3}


def test_a_result_never_dispatched_that_the_implementation_accepts_still_diverges() -> None:
    lines = _lines(_deliver(2, W3, 100.0, reported="s2", task="s2"))
    report = validate(lines)
    assert not report.ok
    assert "no such result in flight" in (report.divergence or "")


@pytest.mark.parametrize(
    ("line", "event", "field"),
    [
        (2, {"event": "DispatchWork", "w": W1, "r": 1, "now": "soon", "ok": True}, "now"),
        (
            2,
            json.dumps({"event": "DispatchWork", "w": W1, "r": 1, "now": math.nan, "ok": True}),
            "now",
        ),
        (2, {"event": "DispatchWork", "w": W1, "r": "1", "now": 1.0, "ok": True}, "r"),
        (2, {"event": "DispatchWork", "w": W1, "r": 1, "now": 1.0, "ok": "yes"}, "ok"),
        (2, {"event": "DispatchWork", "w": 7, "r": 1, "now": 1.0, "ok": True}, "w"),
        (2, _deliver(1, W1, 1.0, work_ok=1), "work_ok"),
        (2, {"event": "ReclaimExpired", "now": 1.0, "reclaimed": W1}, "reclaimed"),
        (2, {"event": "RestartMaster", "now": 1.0, "recovered": "junk"}, "recovered"),
        (
            2,
            {"event": "RestartMaster", "now": 1.0, "recovered": {"journal": {"leases": {W1: 3}}}},
            f"recovered journal lease of {W1}",
        ),
        (1, {**HEADER, "version": 99}, "version"),
        (1, {**HEADER, "ttl": None}, "ttl"),
    ],
)
def test_a_malformed_trace_exits_2_naming_the_line_and_the_field(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    line: int,
    event: dict[str, object] | str,
    field: str,
) -> None:
    lines = list(GOOD)
    lines[line - 1] = event if isinstance(event, str) else json.dumps(event)
    path = tmp_path / "bad.ndjson"
    path.write_text("\n".join(lines) + "\n")
    assert main(["trace", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"line {line}:" in err
    assert field in err


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_trace_check_refuses_a_fifo_or_a_directory_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    import os
    import threading

    path = tmp_path / "trace"
    if kind == "directory":
        path.mkdir()
        assert main(["trace", "check", str(path)]) == 2
    else:
        os.mkfifo(path)
        # A writer that opens and closes the FIFO, so that a reader that opened it anyway
        # reads an empty file instead of waiting forever; released below if nobody read.
        writer = threading.Thread(target=lambda: path.open("w").close(), daemon=True)
        writer.start()
        try:
            assert main(["trace", "check", str(path)]) == 2
        finally:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            writer.join()
            os.close(fd)
    assert "not a regular file" in capsys.readouterr().err


_COMMON_LINES = {
    "DispatchWork": {"w": "w1", "r": 1, "now": 10.5, "ok": True, "refused": None, "gen": None},
    "DeliverResult": {
        "r": 2,
        "w": "w1",
        "reported": "s1",
        "ok": False,
        "now": 11.0,
        "stale": False,
        "task": "s1",
        "work_ok": True,
        "state_ok": False,
        "gen": [1, 2],
    },
}
_ODD_VALUES: list[object] = [
    1,
    -0.0,
    True,
    None,
    "x",
    math.nan,
    math.inf,
    [1, 2],
    [1, -2],
    [True, 2],
    [1],
    {},
]


@pytest.mark.parametrize("event", sorted(_COMMON_LINES))
def test_the_fast_reader_of_common_lines_reads_every_variant_as_the_field_readers_do(
    event: str,
) -> None:
    from leasefence.conformance.traceformat import FAST, READERS, _Fields, event_of

    docs = [dict(_COMMON_LINES[event], event=event)]
    for key in _COMMON_LINES[event]:
        docs.append({k: v for k, v in docs[0].items() if k != key})
        docs += [dict(docs[0], **{key: value}) for value in _ODD_VALUES]
    fast_ones = 0
    for doc in docs:
        try:
            slow: object = READERS[event](_Fields(doc, 7, event))
        except TraceFormatError as exc:
            slow = str(exc)
        fast = FAST[event](doc, 7)
        if fast is not None:
            fast_ones += 1
            assert [(type(v), v) for v in fast] == [
                (type(v), v)
                for v in slow  # type: ignore[attr-defined]
            ], doc
        try:
            read: object = event_of(doc, 7)
        except TraceFormatError as exc:
            read = str(exc)
        assert read == slow, doc
    assert fast_ones > len(_COMMON_LINES[event])  # the fast path read the plain lines


@pytest.mark.parametrize("argv", [["--help"], ["trace", "check", "--help"]])
def test_help_starts_without_importing_the_model_or_the_implementation(argv: list[str]) -> None:
    # Issue 18, point 4: `--help` is quick because it imports no layer; counted in modules
    # (deterministic), not timed. A fresh interpreter: this one has imported everything.
    code = (
        "import sys\nfrom leasefence.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('leasefence.')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    heavy = [
        m
        for m in loaded
        if m.split(".")[1] in {"model", "impl", "conformance", "harness", "modelcheck", "tlc"}
    ]
    assert "usage:" in proc.stdout
    assert heavy == [], heavy


def test_a_command_given_first_is_parsed_alone_and_the_help_before_it_lists_every_command(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # main() names only the chosen subcommand when it is the command line's first word (the
    # eight others cost ~6 million instructions of argparse); an option before it, such as
    # `-h`, still gets the full parser, whose help lists every command.
    parser = build_parser("trace", alone=True)
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub.choices) == ["trace"]
    with pytest.raises(SystemExit):
        main(["-h", "trace"])
    shown = capsys.readouterr().out
    assert [c for c in COMMANDS if not re.search(rf"^    {c}\b", shown, re.MULTILINE)] == []


def _loaded_by_trace_check(tmp_path: Path) -> set[str]:
    """The modules a fresh interpreter loads to run ``trace check`` of a correct 20-item trace,
    counted after the interpreter's start (whatever the editable install's .pth imported before
    is not the command's). Counted in modules (deterministic), not timed."""
    from leasefence.harness.bench.trace import synthesize

    path = tmp_path / "trace.ndjson"
    synthesize(path, 20)
    code = (
        "import sys\nbefore = set(sys.modules)\nfrom leasefence.cli import main\n"
        f"try:\n    main(['trace', 'check', {str(path)!r}])\nexcept SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "print(sorted(m for m in sys.modules if m not in before))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert "OK" in proc.stdout
    loaded = set(ast.literal_eval(proc.stdout.strip().splitlines()[-1]))
    assert "leasefence.conformance.tracecheck" in loaded
    return loaded


def test_checking_a_trace_imports_of_the_implementation_only_its_generations(
    tmp_path: Path,
) -> None:
    # Issue 18: the whole command is what a pipeline pays, start-up included. The validator
    # reads generations, not messages: importing the wire's message classes (and the dataclass
    # machinery they start) cost ~49 million instructions of a 1.7-billion command.
    loaded = _loaded_by_trace_check(tmp_path)
    assert sorted(m for m in loaded if m.startswith("leasefence.impl")) == [
        "leasefence.impl",
        "leasefence.impl.generation",
    ]


def test_checking_a_trace_starts_without_pathlib_signal_or_the_model_checker(
    tmp_path: Path,
) -> None:
    # Issue 18: start-up is paid by every trace check. pathlib (~18 million instructions),
    # signal (~3 M) and model.check (two dataclasses, ~7 M) are not needed to validate a trace.
    loaded = _loaded_by_trace_check(tmp_path)
    unneeded = {"pathlib", "signal", "select", "leasefence.paths", "leasefence.model.check"}
    assert loaded & unneeded == set()


def test_the_trace_checks_modules_create_no_dataclass() -> None:
    # Creating a dataclass costs ~2-3 million instructions at import (it compiles its methods),
    # paid by every trace check: these modules' records are NamedTuples or plain classes.
    import dataclasses

    from leasefence.conformance import generations, tracecheck, traceformat

    made = [
        f"{module.__name__}.{name}"
        for module in (generations, tracecheck, traceformat)
        for name, value in vars(module).items()
        if isinstance(value, type)
        and value.__module__ == module.__name__
        and dataclasses.is_dataclass(value)
    ]
    assert made == []


@given(st.text(alphabet="/.a", max_size=12))
def test_a_trace_argument_is_named_as_pathlib_names_it(text: str) -> None:
    # cmd_trace spells its paths without pathlib (~18 million instructions to import), but
    # prints and opens the very name ``Path(text)`` would.
    assert trace_path(text) == str(PurePosixPath(text))


def test_a_run_whose_ranks_are_given_more_generations_than_the_model_checker_bounds_validates(
    tmp_path: Path,
) -> None:
    # The model checker writes a generation as epoch * 100 + counter (GEN_BASE); a real run's
    # counter passes 100 after 100 dispatches to one rank. Replay's bounds must not cap it.
    from leasefence.harness.bench.trace import synthesize

    path = tmp_path / "trace.ndjson"
    synthesize(path, 500)  # two ranks, the run's pipeline, generation fence: counters up to 250
    with path.open(encoding="utf-8") as fh:
        report = validate(fh)
    assert report.ok, report.divergence
    assert report.steps == 1000


def test_a_replayed_step_moves_both_model_clocks_to_its_time_and_nothing_else() -> None:
    # A traced step's ``now`` is the model's wall and monotonic clock alike (the state a
    # divergence prints, and the clock a monotonic flavour reclaims by). (Fails if ``tick``
    # moves the wall clock only.)
    from leasefence.conformance.tracecheck import Replay
    from leasefence.model.system import Bounds, initial_state

    rp = Replay(Bounds())
    rp.tick(1.5)
    assert (rp.s.wall, rp.s.mono, rp.rollbacks) == (1_500_000, 1_500_000, 0)
    rp.tick(1.25)  # a step back: a rollback
    assert (rp.s.wall, rp.s.mono, rp.rollbacks) == (1_250_000, 1_250_000, 1)
    assert rp.s._replace(wall=0, mono=0) == initial_state()
