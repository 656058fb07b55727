"""The coordinator's file: a snapshot checkpoint, then an append-only log of the changes after it.

The format is described in docs/coordinator-format.md. ``StateShardCoordinator`` (impl/coordinator.py)
keeps the state in memory; this module turns it into bytes and back: ``encode_checkpoint`` (the
whole state, schema 1, exactly the snapshot written before issue 19), ``lease_record``,
``free_record`` and ``void_record`` (one checksummed line per change, appended after the
checkpoint), and ``decode`` (a checkpoint, legacy or current, with its records applied; a torn
tail of bad lines after the last good record is ignored, a bad line before a good one refused).

The file's opens: ``read_file`` and ``append_records`` here; a checkpoint replaces the file with
``impl.durable.replace_durably`` (called by the coordinator's ``save``).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii
from pathlib import Path
from typing import Final, TypeVar

from leasefence.impl.coordvalues import StateLease, Stats
from leasefence.impl.durable import open_nofollow, read_nofollow, replace_durably, write_all
from leasefence.impl.errors import SnapshotError
from leasefence.impl.generation import valid_generation
from leasefence.impl.rules import UNIX
from leasefence.impl.strictjson import float_text, json_scalar, strict_hooks

#: The snapshot schema this module writes and reads.
SCHEMA: Final = 1


def lease_doc(x: StateLease) -> dict[str, object]:
    doc: dict[str, object] = {"owner": x.owner, "updated": x.updated, "epoch": x.epoch}
    if x.generation is not None:
        doc["generation"] = list(x.generation)
    return doc


def keep_legacy_copy(path: Path, original: bytes) -> None:
    """Copy a legacy snapshot's bytes to ``<name>.legacy`` (``.legacy.N`` if taken) once."""
    candidate = path.with_name(path.name + ".legacy")
    n = 0
    while candidate.exists():
        if candidate.read_bytes() == original:
            return
        n += 1
        candidate = path.with_name(f"{path.name}.legacy.{n}")
    replace_durably(candidate, original)


@dataclass(frozen=True)
class Loaded:
    """What a snapshot file holds: the checkpoint's epoch, with its records applied."""

    epoch: int
    leases: dict[str, StateLease]
    stats: dict[str, Stats]
    legacy: bool


class _Bad(Exception):
    """What is wrong with a snapshot; ``decode`` adds the path."""


#: Strict JSON for snapshots: a duplicate key or a NaN is a malformed snapshot.
_STRICT = strict_hooks(_Bad, "duplicate key {}")


_CURRENT_KEYS: Final = frozenset({"schema", "clock", "epoch", "leases", "stats"})
_LEGACY_KEYS: Final = frozenset({"clock", "epoch", "leases", "stats"})
_LEASE_KEYS: Final = frozenset({"owner", "updated", "epoch"})
_OPTIONAL_LEASE_KEYS: Final = frozenset({"generation"})
_LEGACY_LEASE_KEYS: Final = frozenset({"worker", "owner", "updated", "clock", "epoch"})
_STATS_KEYS: Final = frozenset({"completions", "failures", "reward", "cost"})


def _keys(obj: dict[str, object], where: str, allowed: frozenset[str], required: set[str]) -> None:
    missing = sorted(required - obj.keys())
    if missing:
        raise _Bad(f"{where} has no {missing[0]!r}")
    unknown = sorted(obj.keys() - allowed)
    if unknown:
        raise _Bad(f"{where} has an unknown key {unknown[0]!r}")


def _int(value: object, where: str, minimum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Bad(f"{where} must be an int, got {value!r}")
    if minimum is not None and value < minimum:
        raise _Bad(f"{where} must be >= {minimum}, got {value!r}")
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _Bad(f"{where} must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        number = math.inf
    if not math.isfinite(number):
        raise _Bad(f"{where} must be finite, got {value!r}")
    return number


def _object(value: object, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _Bad(f"{where} must be an object, got {value!r:.60}")
    return value


def _task(key: str, where: str) -> str:
    if not key:
        raise _Bad(f"{where} has an empty task ID")
    return key


def _parse_current(top: dict[str, object]) -> Loaded:
    schema = top["schema"]
    if isinstance(schema, bool) or schema != SCHEMA:
        raise _Bad(f"unsupported schema version {schema!r} (this leasefence reads {SCHEMA})")
    _keys(top, "the snapshot", _CURRENT_KEYS, set(_CURRENT_KEYS))
    if top["clock"] != UNIX:
        raise _Bad(f"clock is {top['clock']!r}, expected {UNIX!r}")
    epoch = _int(top["epoch"], "epoch", 1)
    leases: dict[str, StateLease] = {}
    for t, value in _object(top["leases"], "leases").items():
        where = f"lease of {_task(t, 'leases')!r}"
        rec = _object(value, where)
        _keys(rec, where, _LEASE_KEYS | _OPTIONAL_LEASE_KEYS, set(_LEASE_KEYS))
        lease_epoch = _int(rec["epoch"], f"{where}: epoch", 0)
        if lease_epoch > epoch:
            raise _Bad(f"{where}: epoch {lease_epoch} is after the snapshot's epoch {epoch}")
        gen = rec.get("generation")
        if gen is not None and not (isinstance(gen, list) and valid_generation(gen)):
            raise _Bad(f"{where}: generation must be [epoch, counter], got {gen!r:.60}")
        leases[t] = StateLease(
            owner=_int(rec["owner"], f"{where}: owner", None),
            updated=_number(rec["updated"], f"{where}: updated"),
            epoch=lease_epoch,
            generation=None if gen is None else (gen[0], gen[1]),
        )
    stats = _parse_stats(top["stats"], required=True)
    return Loaded(epoch=epoch, leases=leases, stats=stats, legacy=False)


def _parse_legacy(top: dict[str, object]) -> Loaded:
    _keys(top, "the legacy snapshot (no 'schema')", _LEGACY_KEYS, set())
    clock = top.get("clock")
    if clock == UNIX:
        raise _Bad(f"clock is {UNIX!r} but there is no 'schema' version")
    if clock is not None and not isinstance(clock, str):
        raise _Bad(f"clock must be a string, got {clock!r}")
    epoch = _int(top.get("epoch", 0), "epoch", 0)
    leases: dict[str, StateLease] = {}
    for t, value in _object(top.get("leases", {}), "leases").items():
        where = f"legacy lease of {_task(t, 'leases')!r}"
        rec = _object(value, where)
        _keys(rec, where, _LEGACY_LEASE_KEYS, set())
        ranks = [k for k in ("worker", "owner") if k in rec]
        if len(ranks) != 1:
            raise _Bad(f"{where} must have exactly one of 'worker' and 'owner'")
        owner = _int(rec[ranks[0]], f"{where}: {ranks[0]}", None)
        if "updated" in rec:
            _number(rec["updated"], f"{where}: updated")  # checked, then dropped: monotonic
        if "clock" in rec and not isinstance(rec["clock"], str):
            raise _Bad(f"{where}: clock must be a string, got {rec['clock']!r}")
        lease_epoch = _int(rec.get("epoch", epoch), f"{where}: epoch", 0)
        if lease_epoch > epoch:
            raise _Bad(f"{where}: epoch {lease_epoch} is after the snapshot's epoch {epoch}")
        leases[t] = StateLease(owner=owner, updated=0.0, epoch=lease_epoch)
    stats = _parse_stats(top.get("stats", {}), required=False)
    return Loaded(epoch=epoch, leases=leases, stats=stats, legacy=True)


def _parse_stats(value: object, *, required: bool) -> dict[str, Stats]:
    stats: dict[str, Stats] = {}
    for t, entry in _object(value, "stats").items():
        where = f"stats of {_task(t, 'stats')!r}"
        rec = _object(entry, where)
        _keys(rec, where, _STATS_KEYS, set(_STATS_KEYS) if required else set())
        stats[t] = Stats(
            completions=_int(rec.get("completions", 0), f"{where}: completions", 0),
            failures=_int(rec.get("failures", 0), f"{where}: failures", 0),
            reward=_number(rec.get("reward", 0), f"{where}: reward"),
            cost=_number(rec.get("cost", 0), f"{where}: cost"),
        )
    return stats


# -- the checkpoint and the records ------------------------------------------------------------


#: Each task's statistics entry of a checkpoint as last written, with the ``Stats`` it was
#: written from (``encode_checkpoint``'s ``cache``).
EntryCache = dict[str, tuple[Stats, str]]


def encode_checkpoint(
    epoch: int,
    leases: dict[str, StateLease],
    stats: dict[str, Stats],
    cache: EntryCache | None = None,
) -> bytes:
    """The whole state as a schema-1 snapshot (the checkpoint; nothing follows it yet).

    ``cache`` (the coordinator keeps one) holds the text of each task's statistics entry from
    the checkpoint before: an entry whose ``Stats`` is the same object (they are immutable) is
    not encoded again, so a checkpoint costs what changed, plus a copy of the rest."""
    text = _fast_checkpoint(epoch, leases, stats, {} if cache is None else cache)
    if text is None:
        doc = {
            "schema": SCHEMA,
            "clock": UNIX,
            "epoch": epoch,
            "leases": {t: lease_doc(x) for t, x in leases.items()},
            "stats": {t: _stats_doc(s) for t, s in stats.items()},
        }
        text = json.dumps(doc, sort_keys=True, indent=1, allow_nan=False)
    return (text + "\n").encode("utf-8")


def _fast_checkpoint(
    epoch: int, leases: dict[str, StateLease], stats: dict[str, Stats], cache: EntryCache
) -> str | None:
    """``encode_checkpoint``'s text built entry by entry from each value's ``json`` text; None
    (``json`` writes it, and raises) when a value is not a plain one. ``json`` with ``indent``
    encodes in Python, about 30 microseconds a task where this takes two (issue 19); the bytes
    are the same (tests/unit/test_records_encode.py compares them)."""
    lease_entries: list[str] = []
    for task in sorted(leases):
        x = leases[task]
        values = [json_scalar(v) for v in (task, x.epoch, x.owner, x.updated)]
        gen = x.generation
        parts = [] if gen is None or len(gen) != 2 else [json_scalar(g) for g in gen]
        if None in values or None in parts or (gen is not None and not parts):
            return None
        if type(task) is not str:  # a key json would write as a string
            return None
        name, lease_epoch, owner, updated = values
        generation = (
            f'   "generation": [\n    {parts[0]},\n    {parts[1]}\n   ],\n' if parts else ""
        )
        lease_entries.append(
            f'  {name}: {{\n   "epoch": {lease_epoch},\n{generation}   "owner": {owner},\n'
            f'   "updated": {updated}\n  }}'
        )
    stats_entries: list[str] = []
    for task in sorted(stats):
        x2 = stats[task]
        known = cache.get(task)
        if known is not None and known[0] is x2:
            stats_entries.append(known[1])
            continue
        values = [json_scalar(v) for v in (task, x2.completions, x2.cost, x2.failures, x2.reward)]
        if None in values or type(task) is not str:
            return None
        name, completions, cost, failures, reward = values
        entry = (
            f'  {name}: {{\n   "completions": {completions},\n   "cost": {cost},\n'
            f'   "failures": {failures},\n   "reward": {reward}\n  }}'
        )
        cache[task] = (x2, entry)
        stats_entries.append(entry)
    head = [json_scalar(UNIX), json_scalar(epoch), json_scalar(SCHEMA)]
    if None in head:
        return None
    clock, top_epoch, schema = head

    def block(entries: list[str]) -> str:
        return "{\n" + ",\n".join(entries) + "\n }" if entries else "{}"

    return (
        f'{{\n "clock": {clock},\n "epoch": {top_epoch},\n "leases": {block(lease_entries)},\n'
        f' "schema": {schema},\n "stats": {block(stats_entries)}\n}}'
    )


def _stats_doc(s: Stats) -> dict[str, object]:
    return {
        "completions": s.completions,
        "failures": s.failures,
        "reward": s.reward,
        "cost": s.cost,
    }


def _canonical(doc: dict[str, object]) -> str:
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)


def _record(doc: dict[str, object]) -> bytes:
    """One checksummed line: the record's JSON (keys sorted, ``json``'s default spacing, as the
    checkpoint's) with ``crc`` last, the CRC32 of its canonical JSON without ``crc``."""
    crc = zlib.crc32(_canonical(doc).encode("ascii"))
    text = json.dumps(doc, sort_keys=True, allow_nan=False)
    return f'{text[:-1]}, "crc": "{crc:08x}"}}\n'.encode("ascii")


class _Line(bytes):
    """A record's line as ``lease_record`` or ``free_record`` wrote it, which also keeps the
    record's two other forms a ``batch`` line needs (``crc``, the first key in sorted order,
    included): as it sits in the batch line and in the batch's canonical form. ``batch_record``
    joins those instead of decoding and encoding every record again (issue 19)."""

    spaced: str
    compact: str


def _fast_record(spaced: str, compact: str) -> _Line:
    """The line of the record whose sorted JSON is ``spaced`` (``json``'s default spacing) and
    ``compact`` (its canonical form), both built from the values' ``json`` text."""
    crc = f"{zlib.crc32(compact.encode('ascii')):08x}"
    line = _Line(f'{spaced[:-1]}, "crc": "{crc}"}}\n'.encode("ascii"))
    line.spaced = f'{{"crc": "{crc}", {spaced[1:]}'
    line.compact = f'{{"crc":"{crc}",{compact[1:]}'
    return line


_int_text = int.__repr__
#: The integers a record's fast path writes with ``int.__repr__`` (64 bits, far below the digit
#: limit where ``json`` raises); anything else goes through ``json_scalar``.
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def lease_record(task: str, lease: StateLease) -> bytes:
    """LeaseState: ``task`` is leased as ``lease`` says (owner, time, epoch, generation)."""
    epoch, owner, updated, gen = lease.epoch, lease.owner, lease.updated, lease.generation
    if (
        type(task) is str
        and type(epoch) is int
        and type(owner) is int
        and type(updated) is float
        and _INT_MIN <= epoch <= _INT_MAX
        and _INT_MIN <= owner <= _INT_MAX
        and math.isfinite(updated)
        and (
            gen is None
            or (
                type(gen) is tuple
                and len(gen) == 2
                and type(gen[0]) is int
                and type(gen[1]) is int
                and _INT_MIN <= gen[0] <= _INT_MAX
                and _INT_MIN <= gen[1] <= _INT_MAX
            )
        )
    ):
        # The types ``json_scalar`` would check, known here: their text straight away (issue 19).
        values: list[str | None] = [
            _int_text(epoch),
            _int_text(owner),
            encode_basestring_ascii(task),
            float_text(updated),
        ]
        parts: list[str | None] = [] if gen is None else [_int_text(gen[0]), _int_text(gen[1])]
    else:
        values = [json_scalar(v) for v in (epoch, owner, task, updated)]
        parts = [] if gen is None or len(gen) != 2 else [json_scalar(x) for x in gen]
    if None in values or None in parts or (gen is not None and not parts):
        return _record({"op": "lease", "task": task, **lease_doc(lease)})
    epoch_t, owner_t, name, updated_t = values
    if gen is None:
        spaced = compact = ""
    else:
        spaced = f', "generation": [{parts[0]}, {parts[1]}]'
        compact = f',"generation":[{parts[0]},{parts[1]}]'
    return _fast_record(
        f'{{"epoch": {epoch_t}{spaced}, "op": "lease", "owner": {owner_t}, "task": {name}, '
        f'"updated": {updated_t}}}',
        f'{{"epoch":{epoch_t}{compact},"op":"lease","owner":{owner_t},"task":{name},'
        f'"updated":{updated_t}}}',
    )


def free_record(task: str, stats: Stats) -> bytes:
    """CompleteState, AbandonState, DiscardState: ``task``'s lease is gone, its statistics are
    now ``stats`` (the totals, not the booking: replay needs no arithmetic)."""
    completions, cost, failures, reward = (
        stats.completions,
        stats.cost,
        stats.failures,
        stats.reward,
    )
    if (
        type(task) is str
        and type(completions) is int
        and type(failures) is int
        and type(cost) is float
        and type(reward) is float
        and _INT_MIN <= completions <= _INT_MAX
        and _INT_MIN <= failures <= _INT_MAX
        and math.isfinite(cost)
        and math.isfinite(reward)
    ):
        values: list[str | None] = [
            _int_text(completions),
            float_text(cost),
            _int_text(failures),
            float_text(reward),
            encode_basestring_ascii(task),
        ]
    else:
        values = [json_scalar(v) for v in (completions, cost, failures, reward, task)]
    if None in values:
        return _record({"op": "free", "task": task, "stats": _stats_doc(stats)})
    completions_t, cost_t, failures_t, reward_t, name = values
    return _fast_record(
        f'{{"op": "free", "stats": {{"completions": {completions_t}, "cost": {cost_t}, '
        f'"failures": {failures_t}, "reward": {reward_t}}}, "task": {name}}}',
        f'{{"op":"free","stats":{{"completions":{completions_t},"cost":{cost_t},'
        f'"failures":{failures_t},"reward":{reward_t}}},"task":{name}}}',
    )


def void_record(tasks: list[str]) -> bytes:
    """RecoverStates: the leases of ``tasks`` are gone."""
    return _record({"op": "void", "tasks": tasks})


def batch_record(lines: list[bytes]) -> bytes:
    """The records ``lines`` (as the functions above wrote them) as what one write appends: the
    line itself when there is one, else one checksummed ``batch`` line holding them, each with
    its own ``crc``, applied all or none. One line per write means a crash, however the disk
    orders the sectors of that write, can damage only the last line: a torn tail."""
    if len(lines) == 1:
        return lines[0]
    if set(map(type, lines)) == {_Line}:  # (no generator to resume per line)
        # What ``_record`` makes of the decoded records, from the forms each line kept.
        compact = ",".join([line.compact for line in lines])  # type: ignore[attr-defined]
        crc = zlib.crc32(f'{{"op":"batch","records":[{compact}]}}'.encode("ascii"))
        spaced = ", ".join([line.spaced for line in lines])  # type: ignore[attr-defined]
        return f'{{"op": "batch", "records": [{spaced}], "crc": "{crc:08x}"}}\n'.encode("ascii")
    return _record({"op": "batch", "records": [json.loads(line) for line in lines]})


# -- reading -----------------------------------------------------------------------------------


def read_file(path: Path) -> bytes | None:
    """The bytes of the snapshot file, or None when there is none."""
    try:
        return read_nofollow(path)
    except FileNotFoundError:
        return None


def decode(path: Path, raw: bytes) -> Loaded:
    """The state the file ``path`` holds (``raw``: its bytes); ``SnapshotError`` naming the
    path and what is wrong."""
    try:
        return _parse(raw)
    except _Bad as e:
        raise SnapshotError(f"coordinator snapshot {path}: {e}") from None


def _parse(raw: bytes) -> Loaded:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise _Bad(f"not UTF-8 (byte {e.start})") from None
    if not text.strip():
        raise _Bad("the file is empty")
    start = len(text) - len(text.lstrip())
    try:
        top, end = json.JSONDecoder(**_STRICT).raw_decode(text, start)
    except json.JSONDecodeError as e:
        raise _Bad(f"not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:  # e.g. an integer over Python's digit limit
        raise _Bad(f"not acceptable JSON: {e}") from None
    except RecursionError:
        raise _Bad("nested too deeply") from None
    if not isinstance(top, dict):
        raise _Bad(f"the top level is a {type(top).__name__}, not an object")
    loaded = _parse_current(top) if "schema" in top else _parse_legacy(top)
    return _replay(loaded, text, end)


def _replay(checkpoint: Loaded, text: str, end: int) -> Loaded:
    """The checkpoint with the records after it (from ``text[end:]``) applied (module doc)."""
    newline = text.find("\n", end)
    if text[end : len(text) if newline < 0 else newline].strip():
        raise _Bad("extra data after the snapshot on its last line")
    leases, stats = dict(checkpoint.leases), dict(checkpoint.stats)
    bad: tuple[int, str] | None = None
    lines = text[end:].split("\n")[1:]
    if lines and not lines[-1]:
        lines.pop()  # the newline that ends the last line
    for number, line in enumerate(lines, start=1):
        try:
            _apply(_read_record(line), checkpoint.epoch, leases, stats)
        except _Bad as e:
            bad = bad or (number, str(e))
            continue
        if bad is not None:
            raise _Bad(
                f"record {bad[0]} after the checkpoint is bad ({bad[1]}) but a good one follows"
            )
    return Loaded(checkpoint.epoch, leases, stats, checkpoint.legacy)


def _read_record(line: str) -> dict[str, object]:
    if not line.strip():
        raise _Bad("an empty line")
    try:
        doc = json.loads(line, **_STRICT)
    except (ValueError, RecursionError) as e:
        raise _Bad(f"not JSON: {e}") from None
    return _checked(doc)


def _checked(doc: object) -> dict[str, object]:
    """``doc`` without its ``crc``, which must be the checksum of the rest (else ``_Bad``)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("crc"), str):
        raise _Bad("not a checksummed record")
    crc = doc.pop("crc")
    try:
        canonical = _canonical(doc).encode("ascii")
    except (ValueError, UnicodeEncodeError) as e:
        raise _Bad(f"not canonical: {e}") from None
    if crc != f"{zlib.crc32(canonical):08x}":
        raise _Bad("checksum mismatch")
    return doc


def _apply(
    doc: dict[str, object], epoch: int, leases: dict[str, StateLease], stats: dict[str, Stats]
) -> None:
    """Apply one record of the checkpoint's ``epoch`` to ``leases`` and ``stats``."""
    op = doc.get("op")
    if op == "batch":  # all of its records or, when one is bad, none
        _keys(doc, "a batch record", frozenset({"op", "records"}), {"op", "records"})
        records = doc["records"]
        if not isinstance(records, list) or len(records) < 2:
            raise _Bad("a batch record must hold at least two records")
        # Applied in place, the first value of every key it touches saved, and put back if a
        # record is bad: the cost is the batch's, not the state's (copying the state per batch
        # made replaying a log of group commits quadratic).
        saved_leases: dict[str, StateLease | None] = {}
        saved_stats: dict[str, Stats | None] = {}
        try:
            for inner in records:
                checked = _checked(inner)
                if checked.get("op") == "batch":
                    raise _Bad("a batch record inside a batch")
                for task in _touched(checked):
                    saved_leases.setdefault(task, leases.get(task))
                    saved_stats.setdefault(task, stats.get(task))
                _apply(checked, epoch, leases, stats)
        except _Bad:
            _restore(leases, saved_leases)
            _restore(stats, saved_stats)
            raise
    elif op == "lease":
        _keys(
            doc,
            "a lease record",
            frozenset({"op", "task"}) | _LEASE_KEYS | _OPTIONAL_LEASE_KEYS,
            {"op", "task", *_LEASE_KEYS},
        )
        task = _record_task(doc["task"])
        if _int(doc["epoch"], "a lease record's epoch", 1) != epoch:
            raise _Bad(
                f"a lease record of epoch {doc['epoch']} after a checkpoint of epoch {epoch}"
            )
        gen = doc.get("generation")
        if gen is not None and not (isinstance(gen, list) and valid_generation(gen)):
            raise _Bad(f"a lease record's generation must be [epoch, counter], got {gen!r:.60}")
        leases[task] = StateLease(
            owner=_int(doc["owner"], "a lease record's owner", None),
            updated=_number(doc["updated"], "a lease record's updated"),
            epoch=epoch,
            generation=None if gen is None else (gen[0], gen[1]),
        )
        stats.setdefault(task, Stats())
    elif op == "free":
        _keys(doc, "a free record", frozenset({"op", "task", "stats"}), {"op", "task", "stats"})
        task = _record_task(doc["task"])
        if task not in leases:
            raise _Bad(f"a free record of {task!r}, which has no lease")
        del leases[task]
        stats.update(_parse_stats({task: doc["stats"]}, required=True))
    elif op == "void":
        _keys(doc, "a void record", frozenset({"op", "tasks"}), {"op", "tasks"})
        tasks = doc["tasks"]
        if not isinstance(tasks, list) or not all(
            isinstance(t, str) and t in leases for t in tasks
        ):
            raise _Bad("a void record must list tasks that have leases")
        for t in tasks:
            del leases[t]
    else:
        raise _Bad(f"unknown record op {op!r:.40}")


_V = TypeVar("_V")


def _touched(doc: dict[str, object]) -> list[str]:
    """The task IDs whose lease or statistics the record ``doc`` may change (a non-string ID
    makes ``_apply`` refuse the record before it changes anything)."""
    if doc.get("op") == "void":
        tasks = doc.get("tasks")
        return [t for t in tasks if isinstance(t, str)] if isinstance(tasks, list) else []
    task = doc.get("task")
    return [task] if isinstance(task, str) else []


def _restore(state: dict[str, _V], saved: dict[str, _V | None]) -> None:
    """Put back the values ``saved`` before a batch changed them (None: the key was absent)."""
    for key, value in saved.items():
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value


def _record_task(task: object) -> str:
    if not isinstance(task, str) or not task:
        raise _Bad(f"a record's task must be a non-empty str, got {task!r:.60}")
    return task


# -- writing -----------------------------------------------------------------------------------


def append_records(path: Path, data: bytes, good_end: int) -> int:
    """Write ``data`` (whole records) at ``good_end``, the end of the file's good content, with
    one write and one fsync; the new good end. On an ``OSError`` the file is cut back to
    ``good_end`` if it can be, and the error propagates. (A torn tail never lies beyond
    ``good_end`` here: the first write of an epoch is a checkpoint, which drops it.)"""
    fd = open_nofollow(path, os.O_WRONLY)
    try:
        os.lseek(fd, good_end, os.SEEK_SET)
        try:
            write_all(fd, data)
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, good_end)
            raise
    finally:
        os.close(fd)
    return good_end + len(data)
