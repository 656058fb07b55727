"""The records the journal and the coordinator write are built from each value's ``json`` text
instead of a ``json.dumps`` call per form, and a batch from the forms its records kept (issue
19). Every byte must be what ``json`` itself writes (docs/journal-format.md and
docs/coordinator-format.md): each encoder is compared here with a reference made of plain
``json.dumps`` calls, the format's definition, on fixed and seeded random values, unusual ones
included (escapes, non-ASCII, bools, big integers, exponents, subclasses, NaN)."""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Mapping
from typing import Any

import pytest

from leasefence.impl import coordfile
from leasefence.impl.coordvalues import StateLease, Stats
from leasefence.impl.journal import encode_batch, encode_record, scan_bytes
from leasefence.impl.strictjson import json_scalar

# -- the references: the formats as the documentation defines them, with json.dumps ----------


def _journal_ref(body: Mapping[str, Any]) -> bytes:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), allow_nan=False)
    crc = f"{zlib.crc32(canonical.encode('ascii')):08x}"
    line = json.dumps({**body, "crc": crc}, separators=(",", ":"), allow_nan=False)
    return line.encode("ascii") + b"\n"


def _journal_batch_ref(lines: list[bytes]) -> bytes:
    if len(lines) == 1:
        return lines[0]
    return _journal_ref({"event": "batch", "records": [json.loads(line) for line in lines]})


def _coord_ref(doc: dict[str, Any]) -> bytes:
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    crc = zlib.crc32(canonical.encode("ascii"))
    text = json.dumps(doc, sort_keys=True, allow_nan=False)
    return f'{text[:-1]}, "crc": "{crc:08x}"}}\n'.encode("ascii")


def _coord_batch_ref(lines: list[bytes]) -> bytes:
    if len(lines) == 1:
        return lines[0]
    return _coord_ref({"op": "batch", "records": [json.loads(line) for line in lines]})


class _Str(str):
    pass


class _Int(int):
    pass


STRINGS = ["s1", "a\u00e9b", 'q"x\\y', "\u2603\U0001f600", "t\n\x00", "", "3f" * 32]
NUMBERS: list[Any] = [0, 1, -3, 2**63 - 1, 10**30, 0.0, -0.0, 1767225600.25, 1e-7, 1e22, 5e-324]


def _number(r: random.Random) -> Any:
    return r.choice([*NUMBERS, r.random() * 1e9, r.randrange(10**12), r.random()])


# -- json_scalar --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [*STRINGS, *NUMBERS, None, True, False, 1.5, -2.5e-9, float(2**53), 123456789.123456789],
)
def test_json_scalar_is_jsons_text(value: object) -> None:
    assert json_scalar(value) == json.dumps(value)


@pytest.mark.parametrize(
    "value", [math.nan, math.inf, -math.inf, _Str("x"), _Int(3), [1], (1, 2), {}, b"x"]
)
def test_json_scalar_declines_what_is_not_a_plain_finite_value(value: object) -> None:
    assert json_scalar(value) is None


# -- the journal ----------------------------------------------------------------------------------


def _journal_body(r: random.Random) -> dict[str, Any]:
    body: dict[str, Any] = {
        "event": r.choice(["lease", "done", "reclaim"]),
        "work_id": r.choice(["ab" * 32, "3F" * 32, r.randbytes(32).hex()]),
        "worker": r.choice([None, 0, 3, 2**31 - 1, r.randrange(1000)]),
        "updated": _number(r),
        "clock": "unix",
        "attempt": r.choice([0, 1, r.randrange(10**6), 2**63 - 1]),
    }
    if r.random() < 0.5:
        body["generation"] = [r.randrange(10), r.choice([0, r.randrange(10**18)])]
    return body


def test_journal_records_and_batches_are_the_references_bytes() -> None:
    r = random.Random(19)
    for _ in range(500):
        bodies = [_journal_body(r) for _ in range(r.randrange(1, 6))]
        lines = [encode_record(b) for b in bodies]
        assert lines == [_journal_ref(b) for b in bodies]
        assert encode_batch(lines) == _journal_batch_ref(lines)


def test_a_batch_of_fast_records_reads_back() -> None:
    r = random.Random(21)
    bodies = [{**_journal_body(r), "updated": 1767225600.25 + k, "worker": 2} for k in range(9)]
    scan = scan_bytes(encode_batch([encode_record(b) for b in bodies]))
    assert not scan.bad
    assert [(x.event, x.work_id, x.updated) for x in scan.records] == [
        (b["event"], b["work_id"], b["updated"]) for b in bodies
    ]


@pytest.mark.parametrize(
    "change",
    [
        {"work_id": "\u00e9" * 64},
        {"worker": True},
        {"worker": _Int(3)},
        {"updated": 17},
        {"updated": "x"},
        {"attempt": 1.5},
        {"clock": _Str("unix")},
        {"clock": None},
        {"generation": (1, 2)},
        {"generation": [1, 2, 3]},
        {"generation": [1.5, "x"]},
        {"generation": []},
        {"extra": 1},
    ],
)
def test_unusual_journal_records_are_the_references_bytes(change: dict[str, Any]) -> None:
    body = {**_journal_body(random.Random(3)), **change}
    line = encode_record(body)
    assert line == _journal_ref(body)
    other = encode_record(_journal_body(random.Random(4)))
    assert encode_batch([line, other]) == _journal_batch_ref([line, other])
    assert encode_batch([other, line, other]) == _journal_batch_ref([other, line, other])


def test_a_journal_record_with_nan_is_refused_as_json_refuses_it() -> None:
    body = {**_journal_body(random.Random(5)), "updated": math.nan}
    with pytest.raises(ValueError, match="not JSON compliant"):
        _journal_ref(body)
    with pytest.raises(ValueError, match="not JSON compliant"):
        encode_record(body)


def test_a_batch_of_lines_from_elsewhere_is_still_the_references() -> None:
    """Lines ``encode_record`` did not write (here, copies as plain bytes) take the general path."""
    lines = [bytes(encode_record(_journal_body(random.Random(k)))) for k in range(3)]
    assert encode_batch(lines) == _journal_batch_ref(lines)


# -- the coordinator --------------------------------------------------------------------------------


def _lease(r: random.Random) -> StateLease:
    gen = r.choice([None, (r.randrange(9), r.randrange(10**18))])
    return StateLease(
        owner=r.randrange(100), updated=_number(r), epoch=r.randrange(1, 5), generation=gen
    )


def _stats(r: random.Random) -> Stats:
    return Stats(
        completions=r.randrange(5),
        failures=r.randrange(3),
        reward=_number(r),
        cost=_number(r),
    )


def test_coordinator_records_and_batches_are_the_references_bytes() -> None:
    r = random.Random(20)
    for _ in range(500):
        lines: list[bytes] = []
        refs: list[bytes] = []
        for _ in range(r.randrange(1, 6)):
            task = r.choice(STRINGS) + str(r.randrange(100))
            if r.random() < 0.5:
                lease = _lease(r)
                lines.append(coordfile.lease_record(task, lease))
                refs.append(_coord_ref({"op": "lease", "task": task, **coordfile.lease_doc(lease)}))
            else:
                stats = _stats(r)
                lines.append(coordfile.free_record(task, stats))
                refs.append(
                    _coord_ref({"op": "free", "task": task, "stats": coordfile._stats_doc(stats)})
                )
        if r.random() < 0.2:
            lines.append(coordfile.void_record(["s1", "s2"]))
            refs.append(_coord_ref({"op": "void", "tasks": ["s1", "s2"]}))
        assert lines == refs
        assert coordfile.batch_record(lines) == _coord_batch_ref(lines)


@pytest.mark.parametrize(
    "lease",
    [
        StateLease(owner=True, updated=1.0, epoch=1),
        StateLease(owner=_Int(2), updated=1.0, epoch=1),
        StateLease(owner=2, updated=1.0, epoch=1, generation=(1, 2, 3)),  # type: ignore[arg-type]
        StateLease(owner=2, updated=1.0, epoch=1, generation=(1,)),  # type: ignore[arg-type]
    ],
)
def test_unusual_coordinator_records_are_the_references_bytes(lease: StateLease) -> None:
    line = coordfile.lease_record(_Str("s1"), lease)
    assert line == _coord_ref({"op": "lease", "task": "s1", **coordfile.lease_doc(lease)})
    other = coordfile.free_record("s2", Stats(1, 0, 1.5, 0.25))
    assert coordfile.batch_record([line, other]) == _coord_batch_ref([line, other])


def test_a_coordinator_record_with_nan_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        coordfile.free_record("s1", Stats(1, 0, math.nan, 0.0))


def _checkpoint_ref(epoch: int, leases: dict[str, StateLease], stats: dict[str, Stats]) -> bytes:
    doc = {
        "schema": 1,
        "clock": "unix",
        "epoch": epoch,
        "leases": {t: coordfile.lease_doc(x) for t, x in leases.items()},
        "stats": {t: coordfile._stats_doc(s) for t, s in stats.items()},
    }
    return (json.dumps(doc, sort_keys=True, indent=1, allow_nan=False) + "\n").encode("utf-8")


def test_checkpoints_are_the_references_bytes() -> None:
    r = random.Random(22)
    for size in [0, 1, 2, 5, 30]:
        for _ in range(20):
            tasks = [r.choice(STRINGS) + str(r.randrange(1000)) for _ in range(size)]
            leases = {t: _lease(r) for t in tasks if r.random() < 0.5}
            stats = {t: _stats(r) for t in tasks}
            epoch = r.randrange(1, 10**6)
            assert coordfile.encode_checkpoint(epoch, leases, stats) == _checkpoint_ref(
                epoch, leases, stats
            )


@pytest.mark.parametrize(
    ("leases", "stats"),
    [
        ({"s1": StateLease(owner=True, updated=1.0, epoch=1)}, {}),
        ({_Str("s1"): StateLease(owner=1, updated=1.0, epoch=1)}, {}),
        ({}, {"s1": Stats(_Int(1), 0, 1.5, 0.25)}),
        ({"s1": StateLease(owner=2, updated=1.0, epoch=1, generation=(1,))}, {}),  # type: ignore[arg-type]
    ],
)
def test_unusual_checkpoints_are_the_references_bytes(
    leases: dict[str, StateLease], stats: dict[str, Stats]
) -> None:
    assert coordfile.encode_checkpoint(3, leases, stats) == _checkpoint_ref(3, leases, stats)


def test_a_checkpoint_with_nan_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(ValueError, match="not JSON compliant"):
        coordfile.encode_checkpoint(1, {}, {"s1": Stats(1, 0, 0.0, math.inf)})


def test_a_checkpoint_from_the_entry_cache_is_the_references_bytes() -> None:
    """The coordinator's cache of statistics entries: an entry is reused only for the very
    ``Stats`` object it was written from; changed statistics are written anew."""
    r = random.Random(23)
    stats = {f"s{k}": _stats(r) for k in range(40)}
    leases = {"s1": _lease(r)}
    cache: coordfile.EntryCache = {}
    for _ in range(6):
        assert coordfile.encode_checkpoint(2, leases, stats, cache) == _checkpoint_ref(
            2, leases, stats
        )
        assert set(cache) == set(stats)
        for task in r.sample(sorted(stats), 5):
            stats[task] = _stats(r)  # a new object: its cached entry is stale
        stats[f"n{r.randrange(10**6)}"] = _stats(r)
