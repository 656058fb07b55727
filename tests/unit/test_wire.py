"""The wire protocol: round trips, and every malformed message refused with a reason."""

from __future__ import annotations

import json
import pickle
from typing import Any

import pytest

from leasefence.impl.errors import ProtocolError
from leasefence.impl.wire import (
    FROM_MASTER,
    FROM_WORKER,
    MAX_MESSAGE_BYTES,
    Bye,
    Message,
    Result,
    StateTaskId,
    Stop,
    Tag,
    Work,
    WorkId,
    decode,
    encode,
)

W = WorkId("0123456789abcdef" * 4)
T = StateTaskId("fedcba9876543210" * 4)


@pytest.mark.parametrize(
    ("msg", "side"),
    [
        (Work(W, T, {"target": 3, "bound": 16}), FROM_MASTER),
        (Stop(), FROM_MASTER),
        (Result(W, T, True, 0.25, {"status": "sat", "x": 1, "y": -2}), FROM_WORKER),
        (Result(W, None, False, 0.0, {}), FROM_WORKER),
        (Bye(7), FROM_WORKER),
    ],
)
def test_every_message_survives_a_round_trip(msg: Message, side: frozenset[Tag]) -> None:
    tag, data = encode(msg)
    assert decode(tag, data, side) == msg


def test_an_old_protocol_result_without_a_state_id_decodes_with_none() -> None:
    data = json.dumps(
        {"v": 1, "type": "result", "work_id": W, "ok": True, "cpu_s": 1, "output": {}}
    ).encode()
    msg = decode(Tag.RESULT, data, FROM_WORKER)
    assert isinstance(msg, Result)
    assert msg.state_task_id is None
    assert msg.cpu_s == 1.0


def _result(**change: Any) -> bytes:
    doc: dict[str, Any] = {
        "v": 1,
        "type": "result",
        "work_id": W,
        "state_task_id": T,
        "ok": True,
        "cpu_s": 0.5,
        "output": {},
    }
    for key, value in change.items():
        if value is ...:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("tag", "data", "reason"),
    [
        (Tag.RESULT, b"x" * (MAX_MESSAGE_BYTES + 1), "exceeds the limit"),
        (42, _result(), "unknown message tag 42"),
        (Tag.WORK, b"{}", "unexpected WORK message"),
        (Tag.RESULT, pickle.dumps({"work_id": W}), "not UTF-8|not JSON"),
        (Tag.RESULT, b"\xff\xfe", "not UTF-8"),
        (Tag.RESULT, b"{not json", "not JSON"),
        (Tag.RESULT, b"[1, 2]", "not a JSON object"),
        (Tag.RESULT, _result(v=2), "protocol version 2"),
        (Tag.RESULT, _result(v=True), "protocol version True"),
        (Tag.RESULT, _result(type="bye"), "carries a payload of type 'bye'"),
        (Tag.RESULT, _result(ok=...), "lacks ok"),
        (Tag.RESULT, _result(extra=1), "unknown field"),
        (Tag.RESULT, _result(work_id="xyz"), "work_id must be 64 lowercase hex"),
        (Tag.RESULT, _result(work_id=W.upper()), "work_id must be 64 lowercase hex"),
        (Tag.RESULT, _result(state_task_id="has space"), "state_task_id is not a task ID"),
        (Tag.RESULT, _result(state_task_id=5), "state_task_id is not a task ID"),
        (Tag.RESULT, _result(ok=1), "ok must be true or false"),
        (Tag.RESULT, _result(cpu_s=-1), "cpu_s must be a finite number"),
        (Tag.RESULT, _result(cpu_s="1"), "cpu_s must be a finite number"),
        (Tag.RESULT, _result(cpu_s=True), "cpu_s must be a finite number"),
        (Tag.RESULT, _result().replace(b'"cpu_s": 0.5', b'"cpu_s": NaN'), "NaN is not"),
        (Tag.RESULT, _result(output=[1]), "output must be an object"),
        (Tag.RESULT, _result()[:-1] + b', "ok": false}', "field 'ok' appears twice"),
        (Tag.RESULT, b"[" * 100_000 + b"]" * 100_000, "exceeds the limit|nests too deeply"),
        (Tag.RESULT, b"[" * 5_000 + b"]" * 5_000, "nests too deeply|not a JSON object"),
        (Tag.BYE, b'{"v":1,"type":"bye","results":-1}', "BYE results must be"),
    ],
)
def test_decode_rejects_a_malformed_message_naming_what_is_wrong(
    tag: int, data: bytes, reason: str
) -> None:
    with pytest.raises(ProtocolError, match=reason):
        decode(tag, data, FROM_WORKER)


def test_a_worker_refuses_a_work_message_without_a_state_task() -> None:
    data = json.dumps(
        {"v": 1, "type": "work", "work_id": W, "state_task_id": None, "payload": {}}
    ).encode()
    with pytest.raises(ProtocolError, match="state_task_id must not be null"):
        decode(Tag.WORK, data, FROM_MASTER)


def test_encode_refuses_an_oversized_or_unencodable_message() -> None:
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        encode(Result(W, T, True, 0.0, {"blob": "x" * MAX_MESSAGE_BYTES}))
    with pytest.raises(ProtocolError, match="cannot encode"):
        encode(Result(W, T, True, 0.0, {"x": float("nan")}))
    # A generation past str's digit limit: the fast writer leaves it to the general encoder,
    # which names it (a plain ValueError escaped the fast writer before).
    with pytest.raises(ProtocolError, match="cannot encode"):
        encode(Result(W, T, True, 0.0, {}, (10**5000, 1)))
