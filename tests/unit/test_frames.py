"""Frames (issue 19): several WORKs or RESULTs in one MPI message, each refused on its own.

The wire's ``frames``/``split_frame``, the master's ``deliver`` of a frame, and the worker loop's
framing of its RESULTs, driven without MPI (its two MPI calls replaced by a list of envelopes
in and a list of sends out).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leasefence.impl import transport
from leasefence.impl.errors import ProtocolError
from leasefence.impl.master import Master
from leasefence.impl.poll import PollPolicy
from leasefence.impl.transport import (
    Envelope,
    InProcessTransport,
    ManualClock,
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
    encode,
    encode_frames,
    frames,
    split_frame,
)
from leasefence.impl.workload import generate, trivial_worker


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
    assert len(framed) == 2  # 16 of them fill a frame (with their 15 newlines), 4 the next
    assert sum(len(split_frame(Tag.RESULT, f)) for f in framed) == 20


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
        split_frame(Tag.RESULT, b"\n" * MAX_FRAME_MESSAGES)


# -- the master's side -------------------------------------------------------------------------


def _master(tmp_path: Path, items: int) -> tuple[Master, list[Work]]:
    catalogue = generate(items, seed=5)
    m = Master.open(
        tmp_path / "j.jsonl",
        tmp_path / "s.json",
        catalogue,
        ttl=60.0,
        clock=ManualClock(),
        pipeline=4,
        group_commit=True,
    )
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

    catalogue = generate(60, seed=2)
    m = Master.open(
        tmp_path / "j.jsonl",
        tmp_path / "s.json",
        catalogue,
        ttl=60.0,
        clock=ManualClock(),
        pipeline=8,
        group_commit=True,
    )
    m = master_dispatch(m, Counting(trivial_worker, (1, 2)))
    m.close()
    assert m.counters.completed == 60
    assert sum(n for _, n in frames_sent) == m.counters.dispatched
    assert max(n for _, n in frames_sent) > 1  # some frame held several WORKs


# -- the worker's side -------------------------------------------------------------------------


class _Comm:
    def Get_rank(self) -> int:  # noqa: N802 (MPI's name)
        return 1

    def Get_size(self) -> int:  # noqa: N802
        return 2


def _worker(
    monkeypatch: pytest.MonkeyPatch, arriving: list[tuple[int, bytes]], **kw: Any
) -> tuple[int, list[tuple[int, bytes]]]:
    """Run ``worker_execute`` on the master's messages ``arriving``; its exit status and every
    (tag, bytes) it sent."""
    inbox: Iterator[tuple[int, bytes]] = iter(arriving)
    out: list[tuple[int, bytes]] = []

    def receive(comm: Any, source: int, timeout: Any, policy: Any = None) -> Envelope:
        tag, data = next(inbox)
        return Envelope(0, tag, data)

    def send(comm: Any, dest: int, tag: int, data: bytes) -> None:
        assert dest == 0
        out.append((int(tag), data))

    monkeypatch.setattr(transport, "mpi_receive", receive)
    monkeypatch.setattr(transport, "mpi_send", send)
    status = worker_execute(
        _Comm(), trivial_worker, poll=PollPolicy("spin", 0.0, 0.0, 0.0, 0.0), **kw
    )
    return status, out


def _lines(out: list[tuple[int, bytes]]) -> list[list[Any]]:
    return [
        [decode(tag, line, FROM_WORKER) for line in split_frame(tag, data)] for tag, data in out
    ]


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


def test_a_worker_sends_each_result_at_once_when_the_frame_time_is_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(transport, "RESULT_FRAME_S", 0.0)
    tag, framed = encode_frames([_work(i) for i in range(3)])
    _, out = _worker(monkeypatch, [(tag, framed[0]), encode(Stop())])
    assert [len(g) for g in _lines(out)] == [1, 1, 1, 1]
    assert _lines(out)[-1] == [Bye(3)]


def test_a_malformed_line_from_the_master_costs_only_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a, b = encode(_work(1))[1], encode(_work(2))[1]
    _, out = _worker(monkeypatch, [(Tag.WORK, b"\n".join([a, b"{oops", b])), encode(Stop())])
    got = _lines(out)
    assert [r.work_id for r in got[0]] == [_work(1).work_id, _work(2).work_id]
    assert got[1] == [Bye(2)]


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
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE", raising=False)
    assert transport.frame_bytes() == 8192 - 256
    monkeypatch.setenv("MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE", "65536")
    assert transport.frame_bytes() == 65536 - 256
    monkeypatch.setenv("MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE", "lots")
    assert transport.frame_bytes() == 8192 - 256
    parts = [encode(_work(i))[1] for i in range(100)]
    framed = list(frames(parts, transport.frame_bytes()))
    assert all(len(f) <= 8192 - 256 for f in framed)
    assert [line for f in framed for line in split_frame(Tag.WORK, f)] == parts
    taken = 0
    for f in framed[:-1]:  # each frame full: the next message would not have fitted
        taken += len(split_frame(Tag.WORK, f))
        assert len(f) + 1 + len(parts[taken]) > 8192 - 256
