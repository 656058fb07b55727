"""Fuzzing the MPI message decoder (``impl.wire.decode``): every input ends in a message or a
``ProtocolError`` naming what is wrong, never another exception; valid messages round-trip."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

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

SIDES = (FROM_WORKER, FROM_MASTER, frozenset(Tag))
tags = st.integers(-3, 8) | st.sampled_from(list(Tag))
sides = st.sampled_from(SIDES)

small_ints = st.integers(-(2**63), 2**63)
finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | small_ints | finite | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
work_ids = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64).map(WorkId)
task_ids = st.text(
    alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=80
).map(StateTaskId)
objects = st.dictionaries(st.text(max_size=8), json_values, max_size=4)
messages: st.SearchStrategy[Message] = st.one_of(
    st.builds(Work, work_ids, task_ids, objects),
    st.builds(
        Result,
        work_ids,
        st.none() | task_ids,
        st.booleans(),
        st.floats(min_value=0, max_value=1e12),
        objects,
    ),
    st.just(Stop()),
    st.builds(Bye, st.integers(0, 2**62)),
)
FIELDS = ("v", "type", "work_id", "state_task_id", "payload", "ok", "cpu_s", "output", "results")
docs = st.dictionaries(
    st.sampled_from(FIELDS),
    json_values | st.sampled_from([1, "work", "result", "stop", "bye", "0" * 64, {}]),
    max_size=9,
)


def _decode_or_error(tag: int, data: bytes, side: frozenset[Tag]) -> Message | None:
    try:
        return decode(tag, data, side)
    except ProtocolError as exc:
        message = str(exc)
    assert message  # the error says what was wrong
    return None


@given(tags, st.binary(max_size=300), sides)
def test_random_bytes_decode_to_a_message_or_a_protocol_error(
    tag: int, data: bytes, side: frozenset[Tag]
) -> None:
    _decode_or_error(tag, data, side)


@given(messages)
def test_every_valid_message_round_trips(msg: Message) -> None:
    tag, data = encode(msg)
    assert decode(tag, data, frozenset(Tag)) == msg


@given(tags, docs, sides)
def test_json_objects_with_any_field_types_decode_or_are_refused(
    tag: int, doc: dict[str, Any], side: frozenset[Tag]
) -> None:
    msg = _decode_or_error(tag, json.dumps(doc).encode(), side)
    if msg is not None:  # whatever decodes re-encodes to the same message
        assert decode(*encode(msg), frozenset(Tag)) == msg


@given(messages, st.data())
def test_truncated_messages_are_refused(msg: Message, data: st.DataObject) -> None:
    tag, raw = encode(msg)
    cut = data.draw(st.integers(0, len(raw) - 1))
    assert _decode_or_error(tag, raw[:cut], frozenset(Tag)) is None


@given(messages, st.data())
def test_bit_flipped_messages_decode_to_a_message_or_are_refused(
    msg: Message, data: st.DataObject
) -> None:
    tag, raw = encode(msg)
    flipped = bytearray(raw)
    i = data.draw(st.integers(0, len(raw) - 1))
    flipped[i] ^= 1 << data.draw(st.integers(0, 7))
    _decode_or_error(tag, bytes(flipped), frozenset(Tag))


def _result(**change: Any) -> bytes:
    doc = {"v": 1, "type": "result", "work_id": "0" * 64, "ok": True, "cpu_s": 1.0, "output": {}}
    doc.update(change)
    return json.dumps(doc).encode()


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400", "-1"])
def test_nan_infinite_or_negative_cpu_time_is_refused(value: str) -> None:
    data = _result().replace(b'"cpu_s": 1.0', b'"cpu_s": ' + value.encode())
    assert value.encode() in data
    with pytest.raises(ProtocolError, match=r"cpu_s|not a JSON number"):
        decode(Tag.RESULT, data, FROM_WORKER)


@given(st.binary(min_size=1, max_size=40))
def test_non_utf8_messages_are_refused(junk: bytes) -> None:
    try:
        junk.decode("utf-8")
    except UnicodeDecodeError:
        with pytest.raises(ProtocolError, match="not UTF-8"):
            decode(Tag.RESULT, _result()[:10] + junk + _result()[10:], FROM_WORKER)


def test_a_message_over_the_size_limit_is_refused_before_it_is_parsed() -> None:
    data = _result(output={"x": "y" * MAX_MESSAGE_BYTES})
    with pytest.raises(ProtocolError, match=f"exceeds the limit of {MAX_MESSAGE_BYTES}"):
        decode(Tag.RESULT, data, FROM_WORKER)
    with pytest.raises(ProtocolError, match="exceeds the limit"):
        decode(Tag.RESULT, b"[" * (MAX_MESSAGE_BYTES + 1), FROM_WORKER)


def test_deep_nesting_within_the_size_limit_is_refused() -> None:
    with pytest.raises(ProtocolError, match="nests too deeply"):
        decode(Tag.RESULT, b'{"output":' + b"[" * 60_000, FROM_WORKER)


def test_a_cpu_time_beyond_float_range_is_refused() -> None:
    with pytest.raises(ProtocolError):
        decode(Tag.RESULT, _result(cpu_s=2**1024), FROM_WORKER)


def test_an_integer_with_too_many_digits_is_refused() -> None:
    data = b'{"v":1,"type":"bye","results":1' + b"0" * 4300 + b"}"
    with pytest.raises(ProtocolError):
        decode(Tag.BYE, data, FROM_WORKER)
