"""Frames (issue 19): several WORKs or RESULTs in one MPI message, each refused on its own.

The wire's ``frames``/``split_frame``, the master's ``deliver`` of a frame, and the worker loop's
framing of its RESULTs, driven without MPI (its two MPI calls replaced by a list of envelopes
in and a list of sends out).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from leasefence.impl import transport
from leasefence.impl.errors import ProtocolError
from leasefence.impl.master import Master
from leasefence.impl.poll import PollPolicy
from leasefence.impl.transport import (
    DispatchHooks,
    Envelope,
    InProcessTransport,
    ManualClock,
    MpiTransport,
    Reply,
    deliver,
    master_dispatch,
    respond,
    worker_execute,
)
from leasefence.impl.wire import (
    FROM_MASTER,
    FROM_WORKER,
    MAX_FRAME_BYTES,
    MAX_FRAME_MESSAGES,
    MAX_MESSAGE_BYTES,
    Bye,
    Rank,
    Result,
    StateTaskId,
    Stop,
    Tag,
    Work,
    WorkId,
    decode,
    decode_frame,
    encode,
    encode_frames,
    frames,
    split_frame,
)
from leasefence.impl.workload import Outcome, generate, trivial_worker


def _work(i: int) -> Work:
    return Work(WorkId(f"{i:064x}"), StateTaskId(f"t{i}"), {"n": i}, (1, i + 1))


# -- the wire ----------------------------------------------------------------------------------


def test_a_frame_of_one_message_is_that_message_unchanged() -> None:
    tag, data = encode(_work(1))
    assert list(frames([data])) == [data]
    assert split_frame(tag, data) == [data]


def test_messages_travel_in_one_frame_and_come_back_in_order() -> None:
    works = [_work(i) for i in range(5)]
    tag, framed = encode_frames(works)
    assert tag is Tag.WORK
    assert len(framed) == 1
    assert [decode(tag, line, FROM_MASTER) for line in split_frame(tag, framed[0])] == works


def test_frames_hold_at_most_max_frame_messages() -> None:
    parts = [encode(_work(i))[1] for i in range(MAX_FRAME_MESSAGES + 3)]
    framed = list(frames(parts))
    assert [len(split_frame(Tag.WORK, f)) for f in framed] == [MAX_FRAME_MESSAGES, 3]
    assert [line for f in framed for line in split_frame(Tag.WORK, f)] == parts


def test_frames_hold_at_most_max_frame_bytes_and_a_largest_message_fits_alone() -> None:
    big = b"{" + b"x" * (MAX_MESSAGE_BYTES - 2) + b"}"
    framed = list(frames([big] * 20))
    assert all(len(f) <= MAX_FRAME_BYTES for f in framed)
    # 15 of them and their 14 newlines fit, a 16th would not (16 x 65,536 + 15 > 1 MiB)
    assert [len(split_frame(Tag.RESULT, f)) for f in framed] == [15, 5]


def test_a_part_holding_a_newline_goes_alone_between_the_frames_around_it() -> None:
    a, b = encode(_work(1))[1], encode(_work(2))[1]
    assert list(frames([a, b"bad\ngarbage", b])) == [a, b"bad\ngarbage", b]


def test_a_frame_of_stop_or_bye_or_mixed_tags_is_refused_when_sent() -> None:
    with pytest.raises(ValueError, match="not STOP"):
        encode_frames([Stop()])
    with pytest.raises(ValueError, match="not RESULT"):
        encode_frames([_work(1), Result(WorkId("0" * 64), None, True)])


def test_stop_and_bye_are_never_split_even_with_newlines_in_them() -> None:
    data = b'{"v": 1,\n "type": "bye", "results": 3}'
    assert split_frame(Tag.BYE, data) == [data]
    assert decode(Tag.BYE, data, FROM_WORKER) == Bye(3)
    assert split_frame(99, b"a\nb") == [b"a\nb"]


def test_an_oversized_frame_or_one_of_too_many_messages_is_refused_with_its_size() -> None:
    with pytest.raises(ProtocolError, match=f"exceeds the limit of {MAX_FRAME_BYTES}"):
        split_frame(Tag.RESULT, b"x" * (MAX_FRAME_BYTES + 1))
    with pytest.raises(ProtocolError, match=f"{MAX_FRAME_MESSAGES + 1} messages exceeds"):
        split_frame(Tag.RESULT, b"\n".join([b"{}"] * (MAX_FRAME_MESSAGES + 1)))


def test_blank_lines_carry_no_message_and_a_full_frame_may_end_with_a_newline() -> None:
    parts = [encode(_work(i))[1] for i in range(MAX_FRAME_MESSAGES)]
    frame = b"\n".join(parts) + b"\n"
    assert split_frame(Tag.WORK, frame) == parts
    assert split_frame(Tag.WORK, parts[0] + b"\n\n \t\n" + parts[1] + b"\n") == parts[:2]
    # nothing but blank lines: returned whole, for ``decode`` to name what is wrong
    assert split_frame(Tag.RESULT, b"\n\n") == [b"\n\n"]
    [(line, error)] = decode_frame(Tag.RESULT, b"\n \n", FROM_WORKER)
    assert line == b"\n \n"
    assert isinstance(error, ProtocolError)


def test_a_message_written_over_several_lines_is_still_read_whole() -> None:
    """JSON may hold newlines between its tokens, and the protocol before frames read such a
    message: when its lines do not decode one by one, the whole is read as one message."""
    result = Result(WorkId("ab" * 32), StateTaskId("t1"), True, 0.5, {"k": [1, 2]}, (3, 4))
    data = (
        b'{\n  "v": 1, "type": "result", "work_id": "'
        + b"ab" * 32
        + (
            b'",\n  "state_task_id": "t1", "ok": true, "cpu_s": 0.5,\n'
            b'  "output": {"k": [1,\n 2]}, "generation": [3, 4]\n}\n'
        )
    )
    assert decode_frame(Tag.RESULT, data, FROM_WORKER) == [(data, result)]
    # two good lines and a bad one: the good ones stand, the bad one is refused alone
    good = encode(result)[1]
    got = decode_frame(Tag.RESULT, good + b"\n{bad\n" + good, FROM_WORKER)
    assert [m for _, m in got][::2] == [result, result]
    assert got[1][0] == b"{bad"
    assert isinstance(got[1][1], ProtocolError)


# -- the master's side -------------------------------------------------------------------------


def _open(tmp_path: Path, items: int, pipeline: int, seed: int) -> Master:
    """A durable master with group commit over ``items`` generated items, on a manual clock."""
    return Master.open(
        tmp_path / "j.jsonl",
        tmp_path / "s.json",
        generate(items, seed=seed),
        ttl=60.0,
        clock=ManualClock(),
        pipeline=pipeline,
        group_commit=True,
    )


def _master(tmp_path: Path, items: int) -> tuple[Master, list[Work]]:
    m = _open(tmp_path, items, pipeline=4, seed=5)
    sent = [w for _, w in m.dispatch_pending([Rank(1)])]
    m.commit()
    return m, sent


def _results(works: list[Work]) -> list[bytes]:
    return [transport.encode_result(transport.result_of(w, trivial_worker))[1] for w in works]


def test_a_malformed_line_of_a_frame_is_dropped_alone_and_the_others_are_settled(
    tmp_path: Path,
) -> None:
    m, sent = _master(tmp_path, 12)
    assert len(sent) >= 2
    good = _results(sent)
    bad = good[1].replace(b'"ok":true', b'"ok":"yes"')
    frame = b"\n".join([good[0], bad, b"\xff{"])
    outcomes = deliver(m, Envelope(1, Tag.RESULT, frame))
    assert outcomes[0] is not None
    assert outcomes[0].work_ok
    assert outcomes[1:] == [None, None]
    assert m.counters.completed == 1
    assert m.counters.malformed_messages == 2
    assert m.journal.completed == {sent[0].work_id}
    m.close()


def test_a_trailing_newline_costs_nothing_and_marks_no_other_dispatch(tmp_path: Path) -> None:
    m, sent = _master(tmp_path, 12)
    assert len(sent) >= 2
    outcomes = deliver(m, Envelope(1, Tag.RESULT, _results(sent[:1])[0] + b"\n"))
    assert len(outcomes) == 1
    assert outcomes[0] is not None
    assert outcomes[0].work_ok
    assert m.counters.malformed_messages == 0
    assert not m.invalid  # no dispatch of the rank was charged for a blank line
    m.close()


def test_a_frame_refused_whole_counts_once_and_completes_nothing(tmp_path: Path) -> None:
    m, sent = _master(tmp_path, 12)
    frame = b"\n".join(_results(sent[:1]) * (MAX_FRAME_MESSAGES + 1))
    assert deliver(m, Envelope(1, Tag.RESULT, frame)) == [None]
    assert m.counters.malformed_messages == 1
    assert m.counters.completed == 0
    m.close()


def test_the_master_loop_sends_each_rank_its_works_in_frames(tmp_path: Path) -> None:
    frames_sent: list[tuple[int, int]] = []

    class Counting(InProcessTransport):
        def send_many(self, rank: Rank, msgs: Any) -> None:
            frames_sent.append((int(rank), len(msgs)))
            super().send_many(rank, msgs)

    m = master_dispatch(_open(tmp_path, 60, pipeline=8, seed=2), Counting(trivial_worker, (1, 2)))
    m.close()
    assert m.counters.completed == 60
    assert sum(n for _, n in frames_sent) == m.counters.dispatched
    assert max(n for _, n in frames_sent) > 1  # some frame held several WORKs


def test_a_loop_turn_decides_at_most_half_the_dispatches_in_flight(tmp_path: Path) -> None:
    """Issue 19: a turn handles the results waiting up to half the dispatches in flight when
    it starts (at least one frame), then dispatches again, so the rest keep the workers busy.
    Each RESULT here is a frame of its own and all of a rank's are waiting at once. Fails if a
    turn takes every result waiting (then 8 from one rank before its next WORKs, not 4), or
    if a turn ends before its first frame (the run would never end)."""
    turns: list[tuple[int, int]] = []  # (in flight at the turn's start, results it handled)
    taken = [0]

    class Turns(DispatchHooks):
        def on_progress(self, master: Master) -> None:
            turns.append((master.in_flight(), taken[0]))
            taken[0] = 0

    class Counting(InProcessTransport):
        def receive(self, timeout: float) -> Envelope | None:
            return self._count(super().receive(timeout))

        def ready(self) -> Envelope | None:
            return self._count(super().ready())

        def _count(self, env: Envelope | None) -> Envelope | None:
            taken[0] += env is not None and env.tag == Tag.RESULT
            return env

    m = master_dispatch(
        _open(tmp_path, 60, pipeline=8, seed=2), Counting(trivial_worker, (1,)), hooks=Turns()
    )
    m.close()
    assert m.counters.completed == 60
    handled = [n for _, n in turns]
    starts = [8] + [flying for flying, _ in turns[:-1]]  # in flight as each turn began
    assert all(n <= max(1, start // 2) for n, start in zip(handled, starts, strict=True))
    assert all(n >= 1 for n in handled[:-1])
    assert 4 in handled  # a turn that found more waiting stopped at half


def test_the_scheduling_queue_keeps_every_unfinished_item_in_catalogue_order(
    tmp_path: Path,
) -> None:
    """The master's queue (``Master._pending``) drops finished items lazily: from its head, and
    from the part a read has passed once 64 finished ones were passed in it. Here the first
    item's first answer never comes, so its dispatch holds the head until its lease expires
    (the run's end) and only the second way drops anything. After every turn every unfinished item is still in the queue,
    once, in catalogue order. Fails if a drop loses an unfinished item (the run would end
    starved) or keeps one twice, or if nothing is dropped behind the held head."""
    seen: list[int] = []
    first: list[str] = []

    def last_for_the_first(result: Result, rank: int, attempt: int) -> list[Reply]:
        first.extend([] if first else [result.work_id])
        held = 1e9 if (result.work_id, attempt) == (first[0], 0) else 0.0  # (past its lease)
        return [Reply(r.tag, r.data, held) for r in respond(result, rank, attempt)]

    class Check(DispatchHooks):
        def on_progress(self, master: Master) -> None:
            queue = list(reversed(master._queue))
            assert len(queue) == len(set(queue))
            assert [w for w in queue if w in set(master.unfinished())] == master.unfinished()
            seen.append(len(queue))

    clock = ManualClock()
    transport = InProcessTransport(trivial_worker, (1, 2), respond=last_for_the_first, clock=clock)
    m = Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", generate(300, seed=4), ttl=60.0,
        clock=clock, pipeline=8, group_commit=True,
    )  # fmt: skip
    m = master_dispatch(m, transport, hooks=Check())
    m.close()
    assert m.counters.completed == 300
    assert m.counters.reclaimed_work == 1  # the first item, whose first answer never came
    assert len(seen) > 30
    # while the first item held the head (before the last turns): dropped, 64 at a time
    assert any(0 < n <= 300 - 128 for n in seen[:-3])


def test_the_master_loop_reads_the_clock_once_a_turn(tmp_path: Path) -> None:
    """Every step of one loop turn (the results, a reclaim, the dispatches) takes the one reading
    of the turn (issue 19: twice a task before): fails if a step reads the clock again."""
    reads: list[float] = []

    def ticking() -> float:  # a new time at every reading
        reads.append(1_767_225_600.0 + len(reads) / 1000)
        return reads[-1]

    class Turns(DispatchHooks):
        turns = 0

        def on_progress(self, master: Master) -> None:
            self.turns += 1

    hooks = Turns()
    m = Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", generate(60, seed=2), ttl=60.0,
        clock=ticking, pipeline=8, group_commit=True,
    )  # fmt: skip
    opened = len(reads)
    m = master_dispatch(
        m, InProcessTransport(trivial_worker, (1, 2), frame_results=True), hooks=hooks
    )
    m.close()
    assert m.counters.completed == 60
    # a reading a turn, the first dispatches' and the reclaim period's start
    assert len(reads) - opened <= hooks.turns + 2 < 60


def test_the_master_loop_collects_young_garbage_less_often_and_then_as_before(
    tmp_path: Path,
) -> None:
    """While the master loop runs, the cyclic collector's young generation is collected every
    ``YOUNG_COLLECTION_EVERY`` allocations, not every 700 (issue 19: 3.5% of a task's
    instructions); afterwards the threshold is what it was, also after an error."""
    seen: list[tuple[int, int, int]] = []

    class Watch(DispatchHooks):
        def on_progress(self, master: Master) -> None:
            seen.append(gc.get_threshold())

    before = gc.get_threshold()
    assert before[0] < transport.YOUNG_COLLECTION_EVERY  # (CPython's default: 700)
    m = Master.open(
        tmp_path / "j.jsonl", tmp_path / "s.json", generate(10, seed=2), ttl=60.0, pipeline=4,
        group_commit=True,
    )  # fmt: skip
    m = master_dispatch(m, InProcessTransport(trivial_worker, (1, 2)), hooks=Watch())
    assert m.counters.completed == 10
    assert seen
    assert {t[0] for t in seen} == {transport.YOUNG_COLLECTION_EVERY}
    assert {t[1:] for t in seen} == {before[1:]}  # the older generations' thresholds kept
    assert gc.get_threshold() == before

    class Fails(DispatchHooks):
        def on_progress(self, master: Master) -> None:
            raise RuntimeError("a hook failed")

    m2 = Master.open(tmp_path / "j2.jsonl", tmp_path / "s2.json", generate(3, seed=3), ttl=60.0)
    with pytest.raises(RuntimeError, match="a hook failed"):
        master_dispatch(m2, InProcessTransport(trivial_worker, (1,)), hooks=Fails())
    m.close()
    m2.close()
    assert gc.get_threshold() == before


def test_a_collector_turned_off_by_its_threshold_stays_off() -> None:
    before = gc.get_threshold()
    gc.set_threshold(0, *before[1:])
    try:
        with transport.fewer_collections():
            assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before)


@pytest.mark.parametrize("garbage", [False, True])
def test_results_in_frames_settle_as_the_same_results_one_by_one(
    tmp_path: Path, garbage: bool
) -> None:
    """The in-process workers answer as a real worker does (``frame_results``): the master
    takes RESULT frames apart and settles exactly what it settles from single RESULTs; a
    worker's garbage after each RESULT goes alone and costs only itself."""

    def respond_(result: Result, rank: int, attempt: int) -> list[Reply]:
        replies = respond(result, rank, attempt)
        return [*replies, Reply(Tag.RESULT, b"{not json")] if garbage else replies

    def run(framed: bool, where: Path) -> tuple[Master, list[int]]:
        lines: list[int] = []

        class Seen(InProcessTransport):
            def receive(self, timeout: float) -> Envelope | None:
                env = super().receive(timeout)
                if env is not None and env.tag == Tag.RESULT:
                    lines.append(len(split_frame(env.tag, env.data)))
                return env

        class Bounded(DispatchHooks):  # fails instead of waiting for ever for a lost RESULT
            turns = 0

            def on_progress(self, master: Master) -> None:
                self.turns += 1
                assert self.turns < 10_000, f"the loop did not end: {master.counters.as_dict()}"

        where.mkdir()
        t = Seen(trivial_worker, (1, 2), respond=respond_, frame_results=framed)
        m = master_dispatch(_open(where, 60, pipeline=8, seed=2), t, hooks=Bounded())
        m.close()
        return m, lines

    one, one_lines = run(False, tmp_path / "one")
    framed, framed_lines = run(True, tmp_path / "framed")
    assert set(one_lines) == {1}
    assert max(framed_lines) > 1  # some envelope carried several RESULTs
    assert framed.counters.completed == one.counters.completed == 60
    for counter in ("malformed_messages", "duplicate_completions", "wrong_owner_rejections"):
        assert getattr(framed.counters, counter) == getattr(one.counters, counter)
    assert framed.counters.malformed_messages == (framed.counters.dispatched if garbage else 0)


# -- the worker's side -------------------------------------------------------------------------


class _Comm:
    def Get_rank(self) -> int:  # noqa: N802 (MPI's name)
        return 1

    def Get_size(self) -> int:  # noqa: N802
        return 2


class _Clock:
    """The worker's ``time.monotonic``: it stands still unless a worker function moves it, so
    what the worker sends together does not depend on how fast this machine is."""

    def __init__(self) -> None:
        self.now = 100.0

    def monotonic(self) -> float:
        return self.now


#: The worker tests run ``worker_execute`` with MPI and the clock patched out of its module.
PATCHED_WORKER_LOOP = pytest.mark.interpreted(
    "patches transport.mpi_receive, mpi_send and time, which a compiled worker_execute does not read"
)


def _worker(
    monkeypatch: pytest.MonkeyPatch,
    arriving: list[tuple[int, bytes]],
    worker_fn: Callable[[Work], Outcome] = trivial_worker,
    clock: _Clock | None = None,
    **kw: Any,
) -> tuple[int, list[tuple[int, bytes]]]:
    """Run ``worker_execute`` on the master's messages ``arriving``; its exit status and every
    (tag, bytes) it sent. Time passes only as ``clock`` is moved (by ``worker_fn``)."""
    inbox: Iterator[tuple[int, bytes]] = iter(arriving)
    out: list[tuple[int, bytes]] = []
    clock = clock if clock is not None else _Clock()
    monkeypatch.setattr(transport, "time", SimpleNamespace(monotonic=clock.monotonic))

    def receive(comm: Any, source: int, timeout: Any, policy: Any = None) -> Envelope:
        tag, data = next(inbox)
        return Envelope(0, tag, data)

    def send(comm: Any, dest: int, tag: int, data: bytes) -> None:
        assert dest == 0
        out.append((int(tag), data))

    monkeypatch.setattr(transport, "mpi_receive", receive)
    monkeypatch.setattr(transport, "mpi_send", send)
    status = worker_execute(_Comm(), worker_fn, poll=PollPolicy("spin", 0.0, 0.0, 0.0, 0.0), **kw)
    return status, out


def _lines(out: list[tuple[int, bytes]]) -> list[list[Any]]:
    return [
        [decode(tag, line, FROM_WORKER) for line in split_frame(tag, data)] for tag, data in out
    ]


@PATCHED_WORKER_LOOP
def test_a_worker_answers_a_frame_of_works_with_one_frame_of_their_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    works = [_work(i) for i in range(4)]
    tag, framed = encode_frames(works)
    status, out = _worker(monkeypatch, [(tag, framed[0]), encode(Stop(3))])
    assert status == 3
    got = _lines(out)
    assert [len(g) for g in got] == [4, 1]  # one frame of four RESULTs, then BYE
    assert [r.work_id for r in got[0]] == [w.work_id for w in works]
    assert [r.generation for r in got[0]] == [w.generation for w in works]
    assert got[1] == [Bye(4)]


@PATCHED_WORKER_LOOP
def test_a_worker_sends_each_result_at_once_when_the_frame_time_is_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transport, "RESULT_FRAME_S", 0.0)
    tag, framed = encode_frames([_work(i) for i in range(3)])
    _, out = _worker(monkeypatch, [(tag, framed[0]), encode(Stop())])
    assert [len(g) for g in _lines(out)] == [1, 1, 1, 1]
    assert _lines(out)[-1] == [Bye(3)]


@PATCHED_WORKER_LOOP
def test_the_worker_loop_collects_young_garbage_less_often_and_then_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thresholds: list[int] = []

    def watching(work: Work) -> Outcome:
        thresholds.append(gc.get_threshold()[0])
        return trivial_worker(work)

    before = gc.get_threshold()
    tag, framed = encode_frames([_work(i) for i in range(3)])
    status, _ = _worker(monkeypatch, [(tag, framed[0]), encode(Stop())], watching)
    assert status == 0
    assert thresholds == [transport.YOUNG_COLLECTION_EVERY] * 3
    assert gc.get_threshold() == before


def _taking(clock: _Clock, seconds: dict[int, float]) -> Callable[[Work], Outcome]:
    """A worker function whose item ``i`` (``_work(i)``) runs ``seconds[i]`` of ``clock``."""

    def run(work: Work) -> Outcome:
        clock.now += seconds.get(int(work.work_id, 16), 0.0)
        return trivial_worker(work)

    return run


@PATCHED_WORKER_LOOP
def test_a_slow_item_sends_the_results_held_before_it_and_its_own_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    tag, framed = encode_frames([_work(i) for i in range(5)])
    slow = {1: transport.QUICK_ITEM_S}  # item 1 is not quick
    _, out = _worker(monkeypatch, [(tag, framed[0]), encode(Stop())], _taking(clock, slow), clock)
    assert [[r.work_id for r in g] for g in _lines(out)[:-1]] == [
        [_work(0).work_id, _work(1).work_id],  # sent as soon as item 1 ended
        [_work(i).work_id for i in (2, 3, 4)],  # the rest at the frame's end
    ]


@PATCHED_WORKER_LOOP
def test_results_held_for_the_frame_time_go_out_before_the_next_item(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = _Clock()
    tag, framed = encode_frames([_work(i) for i in range(6)])
    # each item quick, but together they reach RESULT_FRAME_S by the end of item 2
    step = transport.RESULT_FRAME_S / 3 + 1e-6
    quick = dict.fromkeys(range(6), step)
    monkeypatch.setattr(transport, "QUICK_ITEM_S", 1.0)  # only the frame time decides here
    _, out = _worker(monkeypatch, [(tag, framed[0]), encode(Stop())], _taking(clock, quick), clock)
    assert [len(g) for g in _lines(out)] == [3, 3, 1]


@PATCHED_WORKER_LOOP
def test_a_malformed_line_from_the_master_costs_only_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = encode(_work(1))[1], encode(_work(2))[1]
    _, out = _worker(monkeypatch, [(Tag.WORK, b"\n".join([a, b"{oops", b])), encode(Stop())])
    got = _lines(out)
    assert [r.work_id for r in got[0]] == [_work(1).work_id, _work(2).work_id]
    assert got[1] == [Bye(2)]


@PATCHED_WORKER_LOOP
def test_a_fault_reply_goes_alone_after_the_results_before_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def garbage_after_the_second(result: Result, rank: int, attempt: int) -> list[Reply]:
        replies = respond(result, rank, attempt)
        if result.work_id == _work(1).work_id:
            replies.append(Reply(Tag.RESULT, b"not\njson"))
        return replies

    tag, framed = encode_frames([_work(i) for i in range(3)])
    _, out = _worker(
        monkeypatch, [(tag, framed[0]), encode(Stop())], respond=garbage_after_the_second
    )
    assert [(t, len(split_frame(t, d))) for t, d in out] == [
        (Tag.RESULT, 2),  # the results of works 0 and 1
        (Tag.RESULT, 2),  # the garbage, alone (its newline splits it at the master)
        (Tag.RESULT, 1),  # the result of work 2
        (Tag.BYE, 1),
    ]
    assert out[1][1] == b"not\njson"
    assert decode(*out[3], FROM_WORKER) == Bye(4)  # RESULT messages sent, the garbage included


def test_a_sender_keeps_its_frames_within_one_cell_of_mpichs_shared_memory_queue(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cvar, param, plain = transport.CELL_SIZE_ENV
    assert transport.frame_bytes({}) == 8192 - 256
    assert transport.frame_bytes({cvar: "65536"}) == 65536 - 256
    assert transport.frame_bytes({param: " 16384 ", plain: "4096"}) == 16384 - 256
    assert transport.frame_bytes({plain: "4096"}) == 4096 - 256
    assert transport.frame_bytes({cvar: "100"}) == 256  # a frame is never made smaller
    for bad in ("lots", "8K", "", "1_0000", "-5", "\u00b2"):
        caplog.clear()
        assert transport.frame_bytes({cvar: bad, plain: "4096"}) == 8192 - 256
        assert f"{cvar}={bad!r} is not a number of bytes" in caplog.text
    monkeypatch.delenv(cvar, raising=False)
    monkeypatch.delenv(param, raising=False)
    monkeypatch.delenv(plain, raising=False)
    assert transport.frame_bytes() == 8192 - 256  # os.environ by default
    parts = [encode(_work(i))[1] for i in range(100)]
    framed = list(frames(parts, transport.frame_bytes()))
    assert all(len(f) <= 8192 - 256 for f in framed)
    assert [line for f in framed for line in split_frame(Tag.WORK, f)] == parts
    taken = 0
    for f in framed[:-1]:  # each frame full: the next message would not have fitted
        taken += len(split_frame(Tag.WORK, f))
        assert len(f) + 1 + len(parts[taken]) > 8192 - 256


class _Request:
    """A posted send that completes when its receiver takes it (``taken``), or at once."""

    def __init__(self, at_once: bool) -> None:
        self.done = at_once

    def Test(self) -> bool:  # noqa: N802 (mpi4py's name)
        return self.done


class _FakeMpi:
    """Just what ``MpiTransport``'s sends call of ``mpi4py.MPI``."""

    BYTE = "byte"
    ANY_SOURCE = -1
    ERR_TRUNCATE = 15

    class Exception(Exception):  # (mpi4py's name)
        def __init__(self, error_class: int) -> None:
            super().__init__(f"MPI error class {error_class}")
            self.error_class = error_class

        def Get_error_class(self) -> int:  # noqa: N802
            return self.error_class

    class Request:
        @staticmethod
        def Testsome(requests: list[_Request]) -> list[int] | None:  # noqa: N802
            if not requests:
                return None  # (MPI_UNDEFINED: no active request)
            return [i for i, r in enumerate(requests) if r.done]


class _PostingComm:
    """A communicator whose sends complete at once up to ``eager`` bytes, else when taken."""

    def __init__(self, eager: int) -> None:
        self.eager = eager
        self.posted: list[tuple[int, int, bytes, _Request]] = []

    def Get_size(self) -> int:  # noqa: N802
        return 3

    def Isend(self, buf: list[Any], dest: int, tag: int) -> _Request:  # noqa: N802
        data = buf[0]
        request = _Request(len(data) <= self.eager)
        self.posted.append((dest, tag, data, request))
        return request


@pytest.mark.interpreted("patches transport.mpi, which a compiled MpiTransport does not read")
def test_the_master_posts_its_sends_and_keeps_each_until_it_completes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Fails if a send of the master's blocks (no ``Isend``), if one not complete when posted is
    forgotten before it completes (its bytes must live until then), if a complete one is kept,
    or if the order of the messages to a rank changes (a STOP after the WORKs before it)."""
    monkeypatch.setattr(transport, "mpi", lambda: _FakeMpi)
    comm = _PostingComm(eager=2000)
    t = MpiTransport(comm, PollPolicy.of("auto", oversubscribed=True))
    small = [_work(i) for i in range(3)]
    t.send_many(Rank(1), small)  # one frame, under the eager size: complete at once
    assert t._sending == []  # not kept even until the next reaping
    big = Work(_work(9).work_id, _work(9).state_task_id, {"blob": "x" * 5000}, (1, 9))
    t.send_many(Rank(2), [big])  # over it: pending until rank 2 takes it
    t.send(Rank(2), Stop())
    assert t.sending == 1
    kept = t._sending[0]
    assert kept[0] is comm.posted[1][3]  # the request, with the bytes it sends
    assert kept[1] is comm.posted[1][2]
    assert [(dest, tag) for dest, tag, _, _ in comm.posted] == [
        (1, Tag.WORK), (2, Tag.WORK), (2, Tag.STOP)
    ]  # fmt: skip
    assert decode(Tag.WORK, comm.posted[1][2], FROM_MASTER) == big
    other = Work(_work(8).work_id, _work(8).state_task_id, {"blob": "y" * 5000}, (1, 8))
    t.send_many(Rank(1), [other])
    assert t.sending == 2
    comm.posted[1][3].done = True  # rank 2 takes its WORK; rank 1 has not taken its own yet
    assert t.sending == 1
    assert t._sending[0][0] is comm.posted[3][3]
    comm.posted[3][3].done = True
    assert t.sending == 0


class _Status:
    def __init__(self, count: int) -> None:
        self.count = count

    def Get_count(self, datatype: str) -> int:  # noqa: N802
        return self.count

    def Get_source(self) -> int:  # noqa: N802
        return 2

    def Get_tag(self) -> int:  # noqa: N802
        return int(Tag.RESULT)


class _Message:
    """A matched message of ``size`` bytes (``body``, repeated): ``Recv`` fills the buffer it
    is given and truncates the message to it, as MPI does (``ERR_TRUNCATE``), or fails with
    ``error`` instead."""

    def __init__(self, size: int, body: bytes = b"x", error: int | None = None) -> None:
        self.size, self.body, self.error = size, body, error
        self.buffers: list[int] = []

    def Recv(self, buf: list[Any]) -> None:  # noqa: N802
        target = buf[0]
        self.buffers.append(len(target))
        if self.error is not None:
            raise _FakeMpi.Exception(self.error)
        n = min(len(target), self.size)
        target[:n] = (self.body * (n // len(self.body) + 1))[:n]
        if self.size > len(target):
            raise _FakeMpi.Exception(_FakeMpi.ERR_TRUNCATE)


@pytest.mark.interpreted("patches transport.mpi and transport.receive")
def test_a_message_over_the_frame_limit_is_never_read_whole_and_is_refused(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Fails if ``mpi_receive`` allocates what a hostile sender says its message holds (here
    2 GiB - 1 bytes: the buffer given to ``Recv`` must stay one byte over ``MAX_FRAME_BYTES``), if
    the truncation MPI reports escapes, if the log does not name the real size, if the bytes
    read are not refused as too large, or if a frame of exactly the limit is not read whole."""
    monkeypatch.setattr(transport, "mpi", lambda: _FakeMpi)
    hostile = _Message(2**31 - 1)
    monkeypatch.setattr(transport, "receive", lambda *a: (hostile, _Status(hostile.size)))
    with caplog.at_level("WARNING", logger="leasefence.transport"):
        env = transport.mpi_receive(object(), -1, None, PollPolicy.of("spin", False))
    assert env is not None
    assert hostile.buffers == [MAX_FRAME_BYTES + 1]
    assert (env.source, env.tag, len(env.data)) == (2, Tag.RESULT, MAX_FRAME_BYTES + 1)
    assert f"message of {2**31 - 1} bytes (tag {int(Tag.RESULT)})" in caplog.text
    [(line, refused)] = decode_frame(env.tag, env.data, FROM_WORKER)
    assert line is None
    assert isinstance(refused, ProtocolError)
    assert "exceeds the limit" in str(refused)
    frame = b"\n".join(_results([_work(i) for i in range(3)]))
    whole = _Message(MAX_FRAME_BYTES, body=frame + b"\n" * (MAX_FRAME_BYTES - len(frame)))
    monkeypatch.setattr(transport, "receive", lambda *a: (whole, _Status(whole.size)))
    env = transport.mpi_receive(object(), -1, None, PollPolicy.of("spin", False))
    assert env is not None
    assert whole.buffers == [MAX_FRAME_BYTES]
    assert len(env.data) == MAX_FRAME_BYTES
    assert env.data.startswith(frame)
    broken = _Message(2**31 - 1, error=17)  # another MPI error than a truncation: raised
    monkeypatch.setattr(transport, "receive", lambda *a: (broken, _Status(broken.size)))
    with pytest.raises(_FakeMpi.Exception):
        transport.mpi_receive(object(), -1, None, PollPolicy.of("spin", False))
