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
    _canonical,
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


def _result(compact: bool = False, **change: Any) -> bytes:
    """A RESULT with ``change`` made (``...``: the field left out), in ``json.dumps``'s default
    spelling, or ``compact``: keys sorted and no spaces, as ``encode`` and the fast library
    write, so that the fast reading takes it (``wire._canonical``)."""
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
    if compact:
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
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


@pytest.mark.parametrize("compact", [False, True], ids=["spaced", "compact"])
@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"generation": [2**63, 0]}, "generation must be"),
        ({"generation": [0, 2**63]}, "generation must be"),
        ({"generation": [2**64, 2**64]}, "generation must be"),
        ({"generation": [-1, 0]}, "generation must be"),
        ({"generation": [1, 2, 3]}, "generation must be"),
        ({"generation": [1]}, "generation must be"),
        ({"generation": [True, 0]}, "generation must be"),
        ({"generation": [1.0, 2]}, "generation must be"),
        ({"generation": "1,2"}, "generation must be"),
        ({"cpu_s": 1e13}, "cpu_s must be"),
        ({"cpu_s": -0.5}, "cpu_s must be"),
        ({"cpu_s": None}, "cpu_s must be"),
        ({"state_task_id": ""}, "not a task ID"),
        ({"state_task_id": "x" * 257}, "not a task ID"),
        ({"state_task_id": "a\u00e9"}, "not a task ID"),
        ({"state_task_id": "a\tb"}, "not a task ID"),
        ({"work_id": W[:-1]}, "work_id must be"),
        ({"work_id": W + "0"}, "work_id must be"),
        ({"work_id": " " + W[1:]}, "work_id must be"),
        ({"work_id": None}, "work_id must be"),
        ({"output": ...}, "lacks output"),
        ({"work_id": ..., "cpu_s": ...}, "lacks cpu_s, work_id"),
        ({"extra": 1}, "unknown field"),
        ({"state_task_id": ..., "extra": 1}, "unknown field"),
        ({"type": "work"}, "carries a payload of type 'work'"),
        ({"type": None}, "carries a payload of type None"),
        ({"v": 2}, "protocol version 2"),
        ({"v": ...}, "protocol version None"),
        ({"ok": None}, "ok must be true or false"),
    ],
)
def test_a_result_field_out_of_its_range_is_refused_in_either_spelling(
    change: dict[str, Any], reason: str, compact: bool
) -> None:
    """Fails if a RESULT out of range, of the wrong type, lacking a field or with one too many
    is read, in the spelling the general path reads or in the one the fast library takes:
    both readings go through the same checks (``wire._message``), which these name."""
    data = _result(compact, **change)
    # the compact spelling is the fast library's, but for a number or a text it writes otherwise
    fast = change.get("generation") != [2**64, 2**64] and change.get("state_task_id") != "a\u00e9"
    assert (_canonical(data) is not None) == (compact and fast)
    with pytest.raises(ProtocolError, match=reason):
        decode(Tag.RESULT, data, FROM_WORKER)


@pytest.mark.parametrize("compact", [False, True], ids=["spaced", "compact"])
@pytest.mark.parametrize(
    ("change", "read"),
    [
        ({"generation": [2**63 - 1, 0]}, ((2**63 - 1, 0), 0.5, T)),
        ({"generation": [0, 2**63 - 1]}, ((0, 2**63 - 1), 0.5, T)),
        ({"generation": [2**60, 2**60 - 1]}, ((2**60, 2**60 - 1), 0.5, T)),
        ({"cpu_s": 10**12}, (None, 1e12, T)),
        ({"cpu_s": 0}, (None, 0.0, T)),
        ({"state_task_id": None}, (None, 0.5, None)),
        ({"state_task_id": ...}, (None, 0.5, None)),
        ({"state_task_id": "~" * 256}, (None, 0.5, "~" * 256)),
        ({"v": 1.0}, (None, 0.5, T)),
    ],
)
def test_a_result_at_the_edge_of_its_ranges_is_read_in_either_spelling(
    change: dict[str, Any], read: tuple[Any, float, str | None], compact: bool
) -> None:
    """Fails if a RESULT at the edge of a range (a generation part of 2**63-1, the largest cpu
    time) or with an optional field null or left out is refused, or read with another value
    or type (an integer cpu time is read as a float)."""
    data = _result(compact, **change)
    assert (_canonical(data) is not None) == compact
    msg = decode(Tag.RESULT, data, FROM_WORKER)
    assert isinstance(msg, Result)
    assert (msg.generation, msg.cpu_s, msg.state_task_id) == read
    assert type(msg.cpu_s) is float


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
