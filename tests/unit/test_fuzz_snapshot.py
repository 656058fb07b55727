"""Fuzzing the coordinator's snapshot loader: every file ends in a loaded coordinator or a
``SnapshotError`` naming the path, never another exception; valid snapshots load exactly."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from leasefence.impl.coordinator import StateShardCoordinator, Stats
from leasefence.impl.errors import SnapshotError

small_ints = st.integers(-(2**63), 2**63)
finite = st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | small_ints | finite | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
tasks = st.text(min_size=1, max_size=12)
amounts = st.floats(min_value=0, max_value=1e15, allow_nan=False)


@st.composite
def snapshots(draw: st.DrawFn) -> dict[str, Any]:
    """A valid schema-1 snapshot document."""
    epoch = draw(st.integers(1, 2**40))
    leases = draw(
        st.dictionaries(
            tasks,
            st.fixed_dictionaries(
                {"owner": small_ints, "updated": finite, "epoch": st.integers(0, epoch)}
            ),
            max_size=4,
        )
    )
    stats = draw(
        st.dictionaries(
            tasks,
            st.fixed_dictionaries(
                {
                    "completions": st.integers(0, 2**40),
                    "failures": st.integers(0, 2**40),
                    "reward": amounts,
                    "cost": amounts,
                }
            ),
            max_size=4,
        )
    )
    return {"schema": 1, "clock": "unix", "epoch": epoch, "leases": leases, "stats": stats}


def _load(raw: bytes) -> StateShardCoordinator | None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "state.json"
        path.write_bytes(raw)
        try:
            return StateShardCoordinator(path, autosave=False)
        except SnapshotError as exc:
            message = str(exc)
        assert str(path) in message  # the error names the file
        return None


@given(st.binary(max_size=400))
def test_random_bytes_load_or_raise_a_snapshot_error(raw: bytes) -> None:
    _load(raw)


@given(snapshots())
def test_a_valid_snapshot_loads_into_the_next_epoch_with_every_statistic(
    doc: dict[str, Any],
) -> None:
    c = _load(json.dumps(doc).encode())
    assert c is not None
    assert c.epoch == doc["epoch"] + 1
    for t, s in doc["stats"].items():
        assert c.stats(t) == Stats(s["completions"], s["failures"], s["reward"], s["cost"])
    assert {t: (x.owner, x.epoch, x.updated) for t, x in c.leases.items()} == {
        t: (x["owner"], x["epoch"], 0.0) for t, x in doc["leases"].items()
    }


@given(snapshots(), st.data())
def test_a_truncated_snapshot_is_refused(doc: dict[str, Any], data: st.DataObject) -> None:
    raw = json.dumps(doc, indent=1).encode()
    cut = data.draw(st.integers(0, len(raw) - 1))
    assert _load(raw[:cut]) is None


@given(snapshots(), st.data())
def test_a_bit_flipped_snapshot_loads_or_is_refused(
    doc: dict[str, Any], data: st.DataObject
) -> None:
    raw = bytearray(json.dumps(doc).encode())
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] ^= 1 << data.draw(st.integers(0, 7))
    _load(bytes(raw))


@given(
    st.dictionaries(
        st.sampled_from(["schema", "clock", "epoch", "leases", "stats"]),
        json_values | st.sampled_from([1, "unix", {}, {"t": {}}]),
        max_size=5,
    )
)
def test_snapshots_with_any_field_types_load_or_raise_a_snapshot_error(doc: dict[str, Any]) -> None:
    _load(json.dumps(doc).encode())


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_nan_and_infinite_numbers_are_refused(value: str) -> None:
    doc = {
        "schema": 1,
        "clock": "unix",
        "epoch": 2,
        "leases": {"t": {"owner": 1, "updated": 1.5, "epoch": 2}},
        "stats": {"t": {"completions": 1, "failures": 0, "reward": 2.5, "cost": 1.0}},
    }
    raw = json.dumps(doc).encode()
    for field in (b'"updated": 1.5', b'"reward": 2.5'):
        assert _load(raw.replace(field, field.split(b":")[0] + b": " + value.encode())) is None


@given(st.binary(min_size=1, max_size=30))
def test_non_utf8_snapshots_are_refused(junk: bytes) -> None:
    try:
        junk.decode("utf-8")
    except UnicodeDecodeError:
        assert _load(b'{"schema": 1, "clock": "' + junk + b'"}') is None


def test_a_huge_snapshot_of_padding_is_refused_with_a_clear_error() -> None:
    assert _load(b" " * 10_000_000) is None
    assert _load(b'{"schema": 1, "clock": "' + b"u" * 5_000_000 + b'"}') is None


def test_a_deeply_nested_snapshot_is_refused() -> None:
    assert _load(b"[" * 10_000) is None


def test_an_integer_with_too_many_digits_is_refused() -> None:
    assert _load(b"1" + b"0" * 4300) is None
