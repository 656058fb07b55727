"""Scratch probes: at a state the transition replay reached, the journal and the snapshot are
copied and the containers opened on the copies (never on the live files, except a second
writer's lock, which must be refused) where the model has no action: a second writer, a
read-only or closed journal, group mode, a failed write (the file size limit), a clock that
returns no number, clock readings off the 10 µs grid and past the year 2286, repair, a journal
whose last record lost its newline, an unfenced offline abandon, an offline completion of an ID
never leased, an attempt count at the end of its range, ranks, generations and task IDs of
``int`` and ``str`` subclasses (each written as the same value of the plain type would be), an
interrupt inside a coordinator's change, an in-memory coordinator, a legacy (F314) snapshot
beside the coordinator, and state task IDs of hostile payloads.

Each expects what the documents say (docs/journal-format.md, docs/coordinator-format.md, the
containers' docstrings): a refusal by name that changes nothing, or a read equal to the live
objects' fields. ``scratch_probes(m)`` runs them all and returns how many ran; the first one
not answered as expected raises ``ScratchFailure``.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import math
import resource
import shutil
import signal
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from leasefence.conformance.machines.system import SystemMachine
from leasefence.conformance.refinement import (
    coordinator_fields,
    journal_fields,
    legacy_copies,
    persisted_coordinator,
    persisted_journal,
)
from leasefence.conformance.strategies import CATALOGUE
from leasefence.impl.coordinator import StateShardCoordinator, state_task_id
from leasefence.impl.errors import (
    CoordinatorError,
    InvalidArgument,
    JournalLocked,
    JournalReadOnly,
    JournalUnusable,
    RecordOutOfRange,
    SnapshotError,
)
from leasefence.impl.journal import WorkLeaseJournal, repair_journal
from leasefence.impl.master import Master
from leasefence.impl.records import MAX_ATTEMPT, _scan, _scan_lines
from leasefence.impl.transport import result_of
from leasefence.impl.wire import Rank
from leasefence.impl.workload import trivial_worker


class ScratchFailure(AssertionError):
    """A scratch probe was not answered as the documents say."""


def _raises(name: str, call: Callable[[], object], error: type[BaseException]) -> None:
    try:
        got = call()
    except error:
        return
    except Exception as other:
        raise ScratchFailure(f"{name}: raised {other!r}, expected {error.__name__}") from other
    raise ScratchFailure(f"{name}: returned {got!r}, expected {error.__name__}")


def _same(name: str, got: object, want: object) -> None:
    if got != want:
        raise ScratchFailure(f"{name}: got {got!r}, expected {want!r}")


def journal_line(doc: dict[str, Any], crc: str | None = None) -> bytes:
    """A journal line as docs/journal-format.md says it (written here from the document, not
    with the implementation's encoder): the record, then ``crc``, the CRC32 of its canonical
    JSON (keys sorted, no spaces, ASCII escapes); ``crc`` given: that one instead. A record
    whose keys are in the writer's order (``event``, ``work_id``, ``worker``, ``updated``,
    ``clock``, ``attempt``[, ``generation``]) is in the layout the bulk reader takes."""
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii")
    crc = crc if crc is not None else f"{zlib.crc32(canonical):08x}"
    return json.dumps({**doc, "crc": crc}, separators=(",", ":")).encode("ascii") + b"\n"


def unix_record(
    event: str, work_id: str, worker: int | None, updated: float, attempt: int, **more: Any
) -> bytes:
    """``journal_line`` of a record in the layout the journal writes (``more``: a generation)."""
    doc = {
        "event": event,
        "work_id": work_id,
        "worker": worker,
        "updated": updated,
        "clock": "unix",
        "attempt": attempt,
        **more,
    }
    return journal_line(doc)


def readers_agree(name: str, data: bytes) -> None:
    """The bulk reader (declining to the reference where it must) and the reference reader
    alone, line by line, read ``data`` alike: the same good records, bad lines, torn tail and
    verdict."""
    fast, reference = _scan(data), _scan_lines(data)
    if fast != reference:
        raise ScratchFailure(f"{name}: the bulk reader read {fast!r}, the reference {reference!r}")


class _Int(int):
    """A rank or a generation part of an ``int`` subclass (an ``IntEnum`` member, a caller's own
    type): the containers take it as its number and write what that number writes."""


class _Task(str):
    """A state task ID of a ``str`` subclass (a caller's own type), taken as its text."""


def _whole_lines(path: Path) -> bytes:
    """The file's bytes without a torn tail the replay may have left."""
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def _state(fields: dict[str, object]) -> dict[str, object]:
    """The abstract part of ``journal_fields`` (record counts change with repair/compaction)."""
    return {k: fields[k] for k in ("leases", "completed", "attempts")}


@contextlib.contextmanager
def _file_size_limit(limit: int) -> Iterator[None]:
    """Every write past ``limit`` bytes fails (EFBIG): a full disk, for this process, briefly."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def _journal(m: SystemMachine, tmp: Path) -> int:
    live = m.master_().journal
    assert isinstance(live, WorkLeaseJournal)
    want = _state(journal_fields(live))
    works = [w for w, _ in m.BOUNDS.task_of]
    free = next((w for w in works if w not in live.leases and w not in live.completed), None)
    n = 0
    sometimes: Any = "sometimes"

    def copy(name: str) -> Path:
        p = tmp / name
        shutil.copyfile(m.journal_path, p)
        return p

    _raises(
        "a second writer of the live journal",
        lambda: WorkLeaseJournal(m.journal_path),
        JournalLocked,
    )
    _raises(
        "journal sync='sometimes'",
        lambda: WorkLeaseJournal(copy("s"), sync=sometimes),
        ValueError,
    )
    _raises(
        "journal create=False on a missing file",
        lambda: WorkLeaseJournal(tmp / "missing", create=False),
        FileNotFoundError,
    )
    n += 3
    with WorkLeaseJournal(copy("existing"), create=False) as j:
        _same("journal create=False on a copy", _state(journal_fields(j)), want)
    frozen = copy("frozen")
    frozen.chmod(stat.S_IRUSR)
    _raises(
        "a journal file without write permission", lambda: WorkLeaseJournal(frozen), JournalReadOnly
    )
    with WorkLeaseJournal.open_readonly(frozen) as j:
        _raises("a write to a read-only open", lambda: j.abandon(works[0]), JournalReadOnly)
    closed = WorkLeaseJournal(copy("closed"))
    closed.close()
    _raises("a write to a closed journal", lambda: closed.abandon(works[0]), JournalUnusable)
    paused = gc.isenabled()
    gc.disable()
    try:
        with WorkLeaseJournal(copy("gc")) as j:
            _same("opening with the collector paused", _state(journal_fields(j)), want)
        _same("the collector left paused", gc.isenabled(), False)
    finally:
        if paused:
            gc.enable()
    n += 6
    nan = WorkLeaseJournal(copy("nan"), clock=lambda: math.nan)
    with nan:
        if free is not None:
            _raises(
                "a lease stamped by a clock that returns NaN",
                lambda: nan.lease(free, 1),
                ValueError,
            )
    if free is not None:
        group = copy("group")
        with WorkLeaseJournal(group, clock=m.clock, sync="group") as j:
            _same(f"a lease of {free}", j.lease(free, 1), True)
            after = _state(journal_fields(j))
        _same("a group-mode lease committed at close", _state(persisted_journal(group)), after)
        full = copy("full")
        j = WorkLeaseJournal(full, clock=m.clock)
        with _file_size_limit(full.stat().st_size):
            _raises("a lease whose write fails", lambda: j.lease(free, 1), JournalUnusable)
        _raises("a write after a failed write", lambda: j.lease(free, 1), JournalUnusable)
        j.close()
        _same("a failed write left the file as it was", _state(persisted_journal(full)), want)
        group_full = copy("group-full")
        j = WorkLeaseJournal(group_full, clock=m.clock, sync="group")
        _same(f"a lease of {free}", j.lease(free, 1), True)
        with _file_size_limit(group_full.stat().st_size), contextlib.suppress(JournalUnusable):
            j.commit()
        j.close()
        _same("a failed group commit wrote nothing", _state(persisted_journal(group_full)), want)
        n += 5
    for w in list(live.leases)[:1]:
        offline = copy("offline")
        with WorkLeaseJournal(offline, clock=m.clock) as j:
            _same(f"unfenced offline abandon of {w[:4]}", j.abandon(w), True)
        left = {k: v for k, v in want["leases"].items() if k != w}  # type: ignore[attr-defined]
        _same("the lease ended offline", persisted_journal(offline)["leases"], left)
        n += 1
    data = m.journal_path.read_bytes()
    if data.endswith(b"\n") and free is not None:
        cut = copy("cut")
        cut.write_bytes(data[:-1])
        with WorkLeaseJournal(cut, clock=m.clock) as j:
            _same(f"a lease of {free}", j.lease(free, 1), True)
            after = _state(journal_fields(j))
        _same(
            "a record after a last line without its newline", _state(persisted_journal(cut)), after
        )
        n += 1
    return (
        n
        + _repairs(m, tmp, want)
        + _legacy_ends(m, tmp, want)
        + _stamps(m, tmp)
        + _journal_subclasses(m, tmp)
        + _attempt_limit(m, tmp)
    )


def _repairs(m: SystemMachine, tmp: Path, want: dict[str, object]) -> int:
    """``repair_journal``: a clean journal is left as it was; a torn tail is cut; bad lines in
    the middle go to the quarantine (appended to, the second time); good records stay."""
    data = m.journal_path.read_bytes()
    data = data[: data.rfind(b"\n") + 1]  # without a torn tail the replay may have left
    p = tmp / "repair"
    _raises("repair of a missing journal", lambda: repair_journal(tmp / "none"), FileNotFoundError)
    p.write_bytes(data)
    result = repair_journal(p)
    _same("repair of a clean journal", (result.quarantined, p.read_bytes()), (0, data))
    p.write_bytes(data + b'{"event":"lease","work_i')
    repair_journal(p)
    _same("repair of a torn tail", _state(persisted_journal(p)), want)
    lines = data.splitlines(keepends=True)
    if lines:
        for k in range(2):
            p.write_bytes(b"".join(lines[:-1]) + b"#not json\n" + lines[-1])
            result = repair_journal(p)
            _same(f"repair of a bad line ({k + 1})", _state(persisted_journal(p)), want)
            assert result.quarantine is not None
            _same(
                "the quarantine keeps every bad line",
                result.quarantine.read_bytes().count(b"#not json"),
                k + 1,
            )
        p.write_bytes(b"#not json\n" + data[:-1])
        repair_journal(p)
        _same(
            "repair of a bad line and a last line without its newline",
            _state(persisted_journal(p)),
            want,
        )
    return 5


def _legacy_ends(m: SystemMachine, tmp: Path, want: dict[str, Any]) -> int:
    """F314's end records without ``attempt`` (docs/journal-format.md): a ``done`` ends the
    lease and completes the ID, a ``reclaim`` of an ID never leased changes nothing; neither
    changes an attempt count."""
    data = m.journal_path.read_bytes()
    data = data[: data.rfind(b"\n") + 1]
    w, never = m.BOUNDS.task_of[0][0], "e" * 64
    p = tmp / "legacy-ends"
    line = {"worker": 1, "updated": 5.0}
    p.write_bytes(
        data
        + json.dumps({"event": "done", "work_id": w, **line}).encode()
        + b"\n"
        + json.dumps({"event": "reclaim", "work_id": never, **line}).encode()
        + b"\n"
    )
    expected = {
        "leases": {k: v for k, v in want["leases"].items() if k != w},
        "completed": want["completed"] | {w},
        "attempts": want["attempts"],
    }
    _same("legacy end records", _state(persisted_journal(p)), expected)
    return 1


#: Work IDs the model's catalogue does not hold (its are "a" * 64 to "d" * 64).
_OUTSIDE = ("7" * 64, "8" * 64, "9" * 64)


def _outside(m: SystemMachine) -> tuple[str, ...]:
    assert not {w for w, _ in m.BOUNDS.task_of} & set(_OUTSIDE)
    return _OUTSIDE


def _stamps(m: SystemMachine, tmp: Path) -> int:
    """Clock readings as ``time.time()`` gives them (docs/journal-format.md, "Timestamps"): one
    off the 10 µs grid is stamped to the nearest 10 µs, one past the year 2286 as it was read
    (17 significant digits, which the bulk reader checks against ``repr``); each lease reads
    back with its stamp exactly, the two readers agreeing on the file."""
    w = _outside(m)[0]
    readings = (
        ("a reading off the 10 µs grid", 1_767_225_600.123456789, 1_767_225_600.12346),
        ("a reading past the year 2286", 12_345_678_901.234567, 12_345_678_901.234567),
    )
    for name, reading, stamp in readings:
        p = tmp / "stamps"
        p.write_bytes(_whole_lines(m.journal_path))
        with WorkLeaseJournal(p, clock=partial(float, reading)) as j:
            _same(f"a lease of {w}", j.lease(w, 1), True)
            _same(f"{name}: the lease's stamp", j.leases[w].updated, stamp)
            fields = journal_fields(j)
        _same(f"{name}: read back", persisted_journal(p), fields)
        readers_agree(f"{name}: the file", p.read_bytes())
    return len(readings)


def _journal_subclasses(m: SystemMachine, tmp: Path) -> int:
    """A rank and a generation of ``int`` subclasses go through the journal's general encoder
    (its fast ones take exact ``int`` only) and write the very bytes plain ints write, a batch
    of such records (a recovery reclaiming two or more) too; an offline completion of an ID
    never leased writes attempt 0 beside the others' counts. Each file reads back as the
    journal that wrote it."""
    leased, leased_too, never = _outside(m)
    written = []
    for name, rank, gen in (("plain", 1, (1, 2)), ("subclass", _Int(1), (_Int(1), _Int(2)))):
        p = tmp / f"ints-{name}"
        p.write_bytes(_whole_lines(m.journal_path))
        with WorkLeaseJournal(p, clock=m.clock) as j:
            _same(f"a lease of {leased}", j.lease(leased, 1, gen), True)
            _same(f"a lease of {leased_too}", j.lease(leased_too, rank), True)
            _same(f"{name} offline completion of an ID never leased", j.complete(never), True)
            j.recover(0)
            fields = journal_fields(j)
        _same(f"{name} ranks and generations read back", persisted_journal(p), fields)
        written.append(p.read_bytes())
    _same("int subclasses write the bytes of plain ints", written[1], written[0])
    return 2


def _attempt_limit(m: SystemMachine, tmp: Path) -> int:
    """An ID whose attempt count is the largest a record holds (a ``reclaim`` with attempt
    ``MAX_ATTEMPT``): its next lease would count one more, which the journal refuses by name
    (``RecordOutOfRange``), changing and writing nothing."""
    worn = _outside(m)[0]
    p = tmp / "attempts"
    data = _whole_lines(m.journal_path) + unix_record("reclaim", worn, None, 1.0, MAX_ATTEMPT)
    p.write_bytes(data)
    with WorkLeaseJournal(p, clock=m.clock) as j:
        before = journal_fields(j)
        _raises("a lease past the last attempt", lambda: j.lease(worn, 1), RecordOutOfRange)
        _same("a lease past the last attempt changed nothing", journal_fields(j), before)
    _same("a lease past the last attempt wrote nothing", p.read_bytes(), data)
    return 1


def _coordinator(m: SystemMachine, tmp: Path) -> int:
    live = m.master_().coordinator
    assert isinstance(live, StateShardCoordinator)
    tasks = sorted({t for _, t in m.BOUNDS.task_of})
    total = live.totals()
    stats = live.statistics.values()
    _same(
        "totals are the sum of the statistics", total.completions, sum(s.completions for s in stats)
    )
    memory = StateShardCoordinator(None, clock=m.clock)
    _raises("save() without a snapshot path", memory.save, CoordinatorError)
    _raises("commit() without a snapshot path", memory.commit, CoordinatorError)
    _same(f"a lease of {tasks[0]}", memory.lease(tasks[0], 1), True)
    _same("discard of an in-memory lease", memory.discard(tasks[0], 1), True)
    _same(
        "discard books nothing",
        memory.stats(tasks[0]).completions + memory.stats(tasks[0]).failures,
        0,
    )
    nan = StateShardCoordinator(None, clock=lambda: math.nan)
    _raises(
        "a lease stamped by a clock that returns NaN",
        lambda: nan.lease(tasks[0], 1),
        CoordinatorError,
    )
    # A failed write: the change is put back, and every later change is refused.
    p = tmp / "snapshot"
    shutil.copyfile(m.snapshot_path, p)
    c = StateShardCoordinator(p, clock=m.clock)
    before = coordinator_fields(c)
    written = p.read_bytes()
    c.commit()
    _same("a commit with nothing pending writes nothing", p.read_bytes(), written)
    with _file_size_limit(p.stat().st_size):
        _raises("a lease whose write fails", lambda: c.lease(tasks[-1], 1), CoordinatorError)
    _same("a failed write put the change back", coordinator_fields(c), before)
    _raises("a change after a failed write", lambda: c.lease(tasks[-1], 1), CoordinatorError)
    return (
        7
        + _coordinator_subclasses(m, tmp)
        + _interrupted_change(m, tmp)
        + _legacy_snapshots(m, tmp)
        + _task_ids()
    )


def _coordinator_subclasses(m: SystemMachine, tmp: Path) -> int:
    """A task ID of a ``str`` subclass, a rank and a generation of ``int`` subclasses go through
    the coordinator file's general encoders (``json``; the fast ones take the exact types only)
    in its log and its checkpoints, and the file is the very bytes the plain values write; the
    plain run's second checkpoint reuses the entries of the statistics that did not change.
    Each file reads back as the coordinator that wrote it."""
    written = []
    runs: tuple[tuple[str, str, str, int, Any], ...] = (
        ("plain", "t-probe", "t-held", 1, (1, 2)),
        ("subclass", _Task("t-probe"), _Task("t-held"), _Int(1), (_Int(1), _Int(2))),
    )
    for name, task, held, rank, gen in runs:
        p = tmp / f"snapshot-{name}"
        shutil.copyfile(m.snapshot_path, p)
        c = StateShardCoordinator(p, clock=m.clock)
        steps: list[Callable[[], object]] = [
            partial(c.lease, task, rank, gen),
            partial(c.complete, task, rank, reward=1.0, cost=0.5, generation=gen),
            c.save,  # a statistics entry of the subclass task
            partial(c.lease, held, rank),
            c.save,  # a lease of the subclass rank
            partial(c.abandon, held, rank, cost=0.25),
        ]
        files = []
        for k, change in enumerate(steps, 1):
            _same(f"{name} values, step {k}", change(), True if k in (1, 2, 4, 6) else None)
            _same(
                f"{name} values, step {k}, read back",
                persisted_coordinator(p, legacy_copies(p)),
                coordinator_fields(c),
            )
            files.append(p.read_bytes())
        written.append(files)
    _same("subclasses write the bytes of plain values", written[1], written[0])
    return 2


def _interrupted_change(m: SystemMachine, tmp: Path) -> int:
    """An interrupt inside a change, after its entries were changed in memory and before its
    record is kept: the change is put back, nothing is written, and the coordinator goes on.
    A change's body only assigns entries and hands over a record made before it, so only an
    asynchronous exception (``KeyboardInterrupt``, ``MemoryError``) arises there: it is
    injected at the hand-over (``_log``), on a copy."""
    p = tmp / "snapshot-interrupted"
    shutil.copyfile(m.snapshot_path, p)
    c = StateShardCoordinator(p, clock=m.clock)
    before, written = coordinator_fields(c), p.read_bytes()

    def interrupt(record: bytes) -> None:
        raise KeyboardInterrupt

    setattr(c, "_log", interrupt)  # noqa: B010 (the instance's, over the method)
    _raises("a lease interrupted in its change", lambda: c.lease("t-probe", 1), KeyboardInterrupt)
    delattr(c, "_log")
    _same("an interrupted change was put back", coordinator_fields(c), before)
    _same("an interrupted change wrote nothing", p.read_bytes(), written)
    _same("a lease after an interrupted change", c.lease("t-probe", 1), True)
    _same(
        "a lease after an interrupted change read back",
        persisted_coordinator(p, legacy_copies(p)),
        coordinator_fields(c),
    )
    return 1


def _legacy_snapshots(m: SystemMachine, tmp: Path) -> int:
    """F314's snapshot format (no ``schema``): opened into the next epoch, its leases stale, its
    statistics kept, its bytes kept once beside it as ``.legacy`` (``.legacy.N`` when another
    legacy snapshot is there already); malformed ones refused by name."""
    p = tmp / "legacy.json"
    legacy = {
        "epoch": 3,
        "clock": "monotonic",
        "leases": {"s1": {"worker": 2, "updated": 7.5, "clock": "monotonic"}},
        "stats": {"s1": {"completions": 2, "failures": 1, "reward": 2.0, "cost": 3.0}},
    }
    original = json.dumps(legacy).encode()
    for k, doc in enumerate((legacy, legacy, {**legacy, "epoch": 4})):
        raw = json.dumps(doc).encode()
        p.write_bytes(raw)
        c = StateShardCoordinator(p, clock=m.clock)
        _same("a legacy snapshot opens into the next epoch", c.epoch, int(doc["epoch"]) + 1)  # type: ignore[call-overload]
        _same("its statistics are kept", c.stats("s1").completions, 2)
        _same("its lease is stale", c.active_owner("s1"), None)
        kept = p.with_name(p.name + (".legacy" if k < 2 else ".legacy.1"))
        _same(
            "its bytes are kept beside it",
            kept.read_bytes() if kept.exists() else None,
            raw if k == 2 else original,
        )
    bad: list[tuple[str, dict[str, Any]]] = [
        ("a Unix clock without a schema", {**legacy, "clock": "unix"}),
        ("a clock that is not a string", {**legacy, "clock": 5}),
        ("a lease with worker and owner", {**legacy, "leases": {"s1": {"worker": 1, "owner": 1}}}),
        (
            "a lease clock that is not a string",
            {**legacy, "leases": {"s1": {"worker": 1, "clock": 1}}},
        ),
        ("a lease after the epoch", {**legacy, "leases": {"s1": {"worker": 1, "epoch": 9}}}),
        ("an unknown key", {**legacy, "why": 1}),
    ]
    for name, doc in bad:
        p.write_bytes(json.dumps(doc).encode())
        _raises(f"legacy snapshot: {name}", lambda: persisted_coordinator(p, []), SnapshotError)
    return 3 + len(bad)


def _task_ids() -> int:
    """``state_task_id``: six strings (escapes among them) name the task their canonical JSON
    names, written here with ``json.dumps``; a list and a tuple of the same items name one task;
    NaN, a container holding itself, a non-string key and a non-JSON object are refused by
    name."""
    fields = ('p"1', "main", "leaf\u00e9", "reach", "breadth-first", "root\n")
    named = dict(
        zip(("input", "focus", "target", "action", "schedule", "continuation"), fields, strict=True)
    )
    text = json.dumps(named, sort_keys=True, separators=(",", ":"))
    _same(
        "six strings name the task of their canonical JSON",
        state_task_id(*fields),
        hashlib.sha256(text.encode("ascii")).hexdigest(),
    )
    nested = {"a": [1, 2.5, None, True], "b": {"c": "d"}}
    as_tuple = {"a": (1, 2.5, None, True), "b": {"c": "d"}}
    _same(
        "a list and a tuple name one task",
        state_task_id(nested, 1, "t", "x", [], {}),
        state_task_id(as_tuple, 1, "t", "x", (), {}),
    )
    loop: list[object] = []
    loop.append(loop)
    bad: list[object] = [math.nan, loop, {1: "x"}, {"x": object()}]
    for value in bad:
        _raises(
            f"state_task_id({value!r:.20})",
            partial(state_task_id, value, 0, 0, 0, 0, 0),
            InvalidArgument,
        )
    return 2 + len(bad)


class ProxiedCoordinator:
    """A coordinator seen through a proxy: not exactly a ``StateShardCoordinator``, as a test's
    stand-in or a subclass is not, so a master calls it through the ``Coordinator`` protocol
    (here and in tests/unit/test_master.py)."""

    def __init__(self, inner: StateShardCoordinator) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def _proxied_coordinator(m: SystemMachine, tmp: Path) -> int:
    """A master calls a plain coordinator natively (``Master._native_coordinator``, issue 19)
    and any other through the protocol: two masters over copies of the live files, one with
    the coordinator behind a proxy, make the same dispatches, settle their results alike and
    leave the same coordinator."""
    seen = []
    for name in ("plain", "proxied"):
        d = tmp / f"master-{name}"
        d.mkdir()
        shutil.copyfile(m.journal_path, d / "journal")
        shutil.copyfile(m.snapshot_path, d / "snapshot")
        journal = WorkLeaseJournal(d / "journal", clock=m.clock)
        coordinator = StateShardCoordinator(d / "snapshot", clock=m.clock)
        master = Master(
            journal,
            coordinator if name == "plain" else ProxiedCoordinator(coordinator),
            CATALOGUE,
            ttl=m.BOUNDS.ttl,
            clock=m.clock,
            pipeline=m.BOUNDS.pipeline,
            fence=m.BOUNDS.fence,
        )
        sends = master.dispatch_pending([Rank(r) for r in m.BOUNDS.ranks])
        outcomes = [master.handle_result(r, result_of(w, trivial_worker)) for r, w in sends]
        seen.append(
            (
                [(r, w.work_id, w.generation) for r, w in sends],
                outcomes,
                coordinator_fields(coordinator),
            )
        )
        journal.close()
    _same("a proxied coordinator is decided on as the plain one", seen[1], seen[0])
    return 1


def scratch_probes(m: SystemMachine) -> int:
    """Every scratch probe at the machine's state; how many ran."""
    with tempfile.TemporaryDirectory(prefix="leasefence-scratch-", dir=str(m.dir)) as tmp:
        return (
            _journal(m, Path(tmp)) + _coordinator(m, Path(tmp)) + _proxied_coordinator(m, Path(tmp))
        )
