"""Crash consistency of the work journal and the coordinator snapshot: SIGKILL at every file
system call, and simulated power loss over every prefix of the recorded file operations.

How it works (``leasefence crashcheck``; issue 8):

Workloads
    A seeded sequence of calls on one ``WorkLeaseJournal`` (lease, complete, abandon, recover,
    compact, commit, reopen; ``sync="always"`` or ``"group"``; sometimes over a journal holding a
    legacy record) or on one ``StateShardCoordinator`` (lease, complete, abandon, discard,
    recover_expired, save, restart; ``autosave`` on or off). The clock is ``BASE + tick`` with a
    tick fixed by the workload, so the reference model (``leasefence.model``) can replay the
    same calls in integer ticks and predict every result and every state.

The oracle
    The model turns the workload into the sequence of states the files may hold: for the journal
    the state after each record (a crash may keep any prefix of the records written), for the
    coordinator each persisted snapshot (a crash keeps the old one or the new one). Every call
    runs in a forked child that writes ``A <step> <result>`` to a pipe only after the call
    returned. A crash after the acknowledgement of step ``a`` with step ``a + 1`` in flight must
    recover to a state between "everything durable at the acknowledgement of ``a``" and
    "everything step ``a + 1`` could have written". Fewer is a *lost acknowledged operation*;
    more, or a state that is no prefix at all, is a violation too. Each recovered state is
    mapped onto the model's ``State`` and checked with ``model.invariants`` (TypeOK, L1-L6,
    NoStuckLease; L3 and L6's statistics across the crash, from the last durable state).
    Opening may raise nothing at all: a crash must never produce ``JournalCorrupt`` or
    ``SnapshotError``. After a torn tail, one more lease is written and the journal reopened,
    to check the tail is cut and kept in ``.broken``.

Family ``kill``
    The child counts its mutating calls (``os.open`` with ``O_CREAT``, ``os.write``,
    ``os.fsync``, ``os.ftruncate``, ``os.replace``, ``os.rename``, ``os.unlink``). For every
    ``k`` the parent runs the workload again; after call ``k`` the child reports and blocks on a
    pipe, and the parent SIGKILLs it there: after every write and every fsync, at every step
    of compaction, of snapshot saving and of torn-tail cutting.

Family ``power``
    The child records the file operations (creates, writes with their offsets, fsyncs of files
    and of the directory, renames, truncates, unlinks) and the acknowledgements between them.
    The parent rebuilds the directory after a simulated power loss at every prefix ``p``: every
    operation made durable by a later fsync (of the file for data, of the directory for names)
    is kept; of the others, a suffix from a chosen operation ``q`` on is lost, and when ``q``
    is a write it is also kept cut at every byte (at 256 spread offsets for writes longer than
    256 bytes). So unsynced tails are lost, renames not yet made durable by a directory fsync
    may be undone, and writes are torn. States are deduplicated before reopening.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal, legacy_lease_line, scan_file
from leasefence.model import coordinator as mco
from leasefence.model import journal as mjo
from leasefence.model.invariants import (
    l3_refusal_changes_nothing,
    l6_statistics_survive,
    violated,
)
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_UNIX
from leasefence.model.state import Coordinator, Journal, Lease, State, Stats
from leasefence.model.state import StateLease as MStateLease
from leasefence.model.system import Bounds

#: Unix time of tick 0 (2026-01-01T00:00:00Z); the workloads' clocks return ``BASE + tick``.
BASE = 1_767_225_600.0
JOURNAL_NAME = ".work_leases.jsonl"
SNAPSHOT_NAME = "state.json"
#: The monotonic stamp of the legacy record some journal workloads start with.
LEGACY_STAMP = 900_000
LEGACY_WORKER = 5
#: The rank of the lease written after recovery to check that a torn tail is cut.
AFTER_RANK = 9
RANKS = (1, 2, 3)
#: Writes up to this size are cut at every byte; longer ones (whole snapshots) at
#: ``CUTS_OF_LONG_WRITES`` spread offsets, first and last byte included.
CUT_EVERY_BYTE_UP_TO = 256
CUTS_OF_LONG_WRITES = 64

Kind = Literal["journal", "coordinator"]
Family = Literal["kill", "power"]


# -- workloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """One call of a workload: its name, its arguments and the clock tick it runs at."""

    name: str
    args: tuple[Any, ...]
    tick: int

    def describe(self) -> str:
        args = ", ".join(
            a[:8] + "…" if isinstance(a, str) and len(a) > 12 else repr(a) for a in self.args
        )
        return f"{self.name}({args}) @tick {self.tick}"


@dataclass(frozen=True)
class Workload:
    """A seeded call sequence. Step 0 opens the journal or coordinator; ``ops[i]`` is step i."""

    kind: Kind
    mode: str  # journal: "always"/"group"; coordinator: "autosave"/"manual"
    seed: int
    size: int
    legacy: bool
    names: tuple[str, ...]  # the work IDs or state tasks it uses
    ops: tuple[Op, ...]

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.mode}:{self.seed}:{self.size}"


def _work_ids(seed: int, n: int) -> tuple[str, ...]:
    return tuple(
        hashlib.sha256(f"leasefence-crash:{seed}:{i}".encode()).hexdigest() for i in range(n)
    )


def journal_workload(seed: int, size: int, mode: str) -> Workload:
    """A journal workload of ``size`` calls, biased by the model towards calls that succeed."""
    rng = random.Random(f"journal:{mode}:{seed}")
    works = _work_ids(seed, 5)
    legacy = rng.random() < 0.5
    j = _initial_journal(works, legacy)
    tick = 1
    ops: list[Op] = [Op("open", (), tick)]
    for _ in range(size):
        tick += rng.choice((0, 1, 1, 2, 3))
        held = [(w, x.owner) for w, x in j.leases]
        x = rng.random()
        op: Op
        if x < 0.34 or not held:
            op = Op("lease", (rng.choice(works), rng.choice(RANKS)), tick)
        elif x < 0.56:
            w, owner = rng.choice(held)
            who = rng.choice((owner, owner, owner, owner % 3 + 1, None))
            op = Op("complete", (w, who), tick)
        elif x < 0.66:
            w, owner = rng.choice(held)
            op = Op("abandon", (w, rng.choice((owner, owner, owner % 3 + 1, None))), tick)
        elif x < 0.76:
            op = Op("recover", (rng.choice((0, 2, 4)),), tick)
        elif x < 0.84:
            op = Op("compact", (), tick)
        elif x < 0.88:
            op = Op("reopen", (), tick)
        elif mode == "group":
            op = Op("commit", (), tick)
        else:
            op = Op("lease", (rng.choice(works), rng.choice(RANKS)), tick)
        ops.append(op)
        _, j, _ = _journal_step(j, op)
    if mode == "group":
        ops.append(Op("commit", (), tick))
    return Workload("journal", mode, seed, size, legacy, works, tuple(ops))


def coordinator_workload(seed: int, size: int, mode: str) -> Workload:
    """A coordinator workload of ``size`` calls, biased by the model towards calls that succeed."""
    rng = random.Random(f"coordinator:{mode}:{seed}")
    tasks = tuple(f"s{i}" for i in range(4))
    c = Coordinator()
    tick = 1
    ops: list[Op] = [Op("open", (), tick)]
    for _ in range(size):
        tick += rng.choice((0, 1, 1, 2, 3))
        held = [(t, x.owner) for t, x in c.leases if x.epoch == c.epoch]
        x = rng.random()
        op: Op
        if x < 0.32 or not held:
            op = Op("lease", (rng.choice(tasks), rng.choice(RANKS)), tick)
        else:
            t, owner = rng.choice(held)
            who = rng.choice((owner, owner, owner, owner % 3 + 1))
            if x < 0.52:
                op = Op("complete", (t, who, rng.randint(0, 3), rng.randint(0, 2)), tick)
            elif x < 0.62:
                op = Op("abandon", (t, who, rng.randint(0, 2)), tick)
            elif x < 0.70:
                op = Op("discard", (t, who), tick)
            elif x < 0.80:
                op = Op("recover_expired", (rng.choice((0, 2, 4)),), tick)
            elif x < 0.90 and mode == "manual":
                op = Op("save", (), tick)
            else:
                op = Op("restart", (), tick)
        ops.append(op)
        c = _coordinator_step(c, op, [c])[1]
    if mode == "manual":
        ops.append(Op("save", (), tick))
    return Workload("coordinator", mode, seed, size, False, tasks, tuple(ops))


def make_workload(spec: str) -> Workload:
    """The workload named by ``kind:mode:seed:size`` (as printed in a violation)."""
    kind, mode, seed, size = spec.split(":")
    if kind == "journal" and mode in ("always", "group"):
        return journal_workload(int(seed), int(size), mode)
    if kind == "coordinator" and mode in ("autosave", "manual"):
        return coordinator_workload(int(seed), int(size), mode)
    raise ValueError(f"not a workload: {spec!r} (kind:mode:seed:size)")


# -- the model's history of a workload ----------------------------------------------------------


def _initial_journal(works: tuple[str, ...], legacy: bool) -> Journal:
    if not legacy:
        return Journal()
    return mjo.legacy_record(Journal(), works[-1], LEGACY_WORKER, LEGACY_STAMP)[1]


def _journal_step(j: Journal, op: Op) -> tuple[object, Journal, list[Journal]]:
    """The model's result of ``op``, the next state and the state after each record written."""
    if op.name == "lease":
        ok, nxt = mjo.lease_work(j, op.args[0], op.args[1], op.tick, 0)
        return ok, nxt, [nxt] if ok else []
    if op.name == "complete":
        ok, nxt = mjo.complete_work(j, op.args[0], op.args[1])
        return ok, nxt, [nxt] if ok else []
    if op.name == "abandon":
        ok, nxt = mjo.abandon_work(j, op.args[0], op.args[1])
        return ok, nxt, [nxt] if ok else []
    if op.name == "recover":
        gone, _ = mjo.recover_work(j, op.args[0], op.tick, 0)
        states = []
        for w in sorted(gone):  # one reclaim record per ID, in sorted order
            j = mjo.abandon_work(j, w, None)[1]
            states.append(j)
        return sorted(gone), j, states
    if op.name in ("compact", "commit", "reopen", "open"):
        return None, mjo.compact_journal(j), []
    raise ValueError(f"unknown journal call {op.name}")


def _coordinator_step(
    c: Coordinator, op: Op, saved: list[Coordinator | None]
) -> tuple[object, Coordinator, bool]:
    """The model's result of ``op``, the next state, and whether it changed (autosave writes)."""
    n = op.name
    if n == "lease":
        ok, nxt = mco.lease_state(c, op.args[0], op.args[1], op.tick, 0)
        return ok, nxt, ok
    if n == "complete":
        ok, nxt = mco.complete_state(c, op.args[0], op.args[1], op.args[2], op.args[3])
        return ok, nxt, ok
    if n == "abandon":
        ok, nxt = mco.abandon_state(c, op.args[0], op.args[1], op.args[2])
        return ok, nxt, ok
    if n == "discard":
        ok, nxt = mco.discard_state(c, op.args[0], op.args[1])
        return ok, nxt, ok
    if n == "recover_expired":
        gone, nxt = mco.recover_states(c, op.args[0], op.tick, 0)
        return list(gone), nxt, bool(gone)
    if n == "restart":
        last = saved[-1]
        return None, Coordinator() if last is None else mco.restart_coordinator(last), True
    if n in ("save", "open"):
        return None, c, n == "open"
    raise ValueError(f"unknown coordinator call {n}")


@dataclass
class History:
    """What the files may hold: ``units[k]`` is the k-th durable unit (journal: state after k
    records; coordinator: k-th persisted snapshot, None for "no file yet"). For step i,
    ``durable[i]`` is the last unit durable once step i returned and ``written[i]`` the last unit
    step i may have written. ``results[i]`` is the model's return value of step i."""

    units: list[Any]
    durable: list[int]
    written: list[int]
    results: list[object]
    last_tick: int

    def window(self, acked: int) -> tuple[int, int]:
        """The units a crash may leave after the acknowledgement of step ``acked`` (-1: none)."""
        low = self.durable[acked] if acked >= 0 else 0
        nxt = min(acked + 1, len(self.written) - 1)
        return low, self.written[nxt]


def history(w: Workload) -> History:
    """The model's history of ``w`` (see ``History``)."""
    results: list[object] = []
    durable: list[int] = []
    written: list[int] = []
    if w.kind == "journal":
        j = _initial_journal(w.names, w.legacy)
        units: list[Any] = [j]
        synced = 0
        for op in w.ops:
            result, j, states = _journal_step(j, op)
            units.extend(states)
            if w.mode == "always" or op.name in ("compact", "commit", "reopen", "open"):
                synced = len(units) - 1
            results.append(result)
            durable.append(synced)
            written.append(len(units) - 1)
        return History(units, durable, written, results, w.ops[-1].tick)
    c = Coordinator()
    saved: list[Coordinator | None] = [None]
    for op in w.ops:
        result, c, changed = _coordinator_step(c, op, saved)
        if op.name == "save" or (w.mode == "autosave" and changed):
            saved.append(c)
        results.append(result)
        durable.append(len(saved) - 1)
        written.append(len(saved) - 1)
    return History(saved, durable, written, results, w.ops[-1].tick)


# -- running a workload (in a forked child) ------------------------------------------------------


def _result_json(value: object) -> object:
    if isinstance(value, list | tuple):
        return list(value)
    return value


def prepare(w: Workload, directory: Path) -> None:
    """Put the workload's initial files (a durable legacy journal) into ``directory``."""
    if w.kind == "journal" and w.legacy:
        data = legacy_lease_line(w.names[-1], LEGACY_WORKER, float(LEGACY_STAMP))
        fd = os.open(directory / JOURNAL_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def run_workload(w: Workload, directory: Path, ack: Callable[[int, object], None]) -> None:
    """Run every step of ``w`` on the files in ``directory``; ``ack(i, result)`` after step i."""
    tick = [w.ops[0].tick]

    def clock() -> float:
        return BASE + tick[0]

    if w.kind == "journal":
        path = directory / JOURNAL_NAME
        sync: Any = w.mode
        journal = WorkLeaseJournal(path, clock=clock, sync=sync)
        ack(0, None)
        for i, op in enumerate(w.ops[1:], start=1):
            tick[0] = op.tick
            result: object = None
            if op.name == "lease":
                result = journal.lease(op.args[0], op.args[1])
            elif op.name == "complete":
                result = journal.complete(op.args[0], op.args[1])
            elif op.name == "abandon":
                result = journal.abandon(op.args[0], op.args[1])
            elif op.name == "recover":
                result = journal.recover(op.args[0])
            elif op.name == "compact":
                journal.compact()
            elif op.name == "commit":
                journal.commit()
            elif op.name == "reopen":
                journal.close()
                journal = WorkLeaseJournal(path, clock=clock, sync=sync)
            ack(i, _result_json(result))
        return
    snapshot = directory / SNAPSHOT_NAME
    autosave = w.mode == "autosave"
    coord = StateShardCoordinator(snapshot, clock=clock, autosave=autosave)
    ack(0, None)
    for i, op in enumerate(w.ops[1:], start=1):
        tick[0] = op.tick
        result = None
        if op.name == "lease":
            result = coord.lease(op.args[0], op.args[1])
        elif op.name == "complete":
            result = coord.complete(op.args[0], op.args[1], reward=op.args[2], cost=op.args[3])
        elif op.name == "abandon":
            result = coord.abandon(op.args[0], op.args[1], cost=op.args[2])
        elif op.name == "discard":
            result = coord.discard(op.args[0], op.args[1])
        elif op.name == "recover_expired":
            result = coord.recover_expired(op.args[0])
        elif op.name == "save":
            coord.save()
        elif op.name == "restart":
            coord = StateShardCoordinator(snapshot, clock=clock, autosave=autosave)
        ack(i, _result_json(result))


class _Instrument:
    """Wraps the ``os`` calls that change files, in a forked child only, and reports each one
    (after it returned) to ``on_event``. Keeps the fd -> name table the recorder needs."""

    NAMES = ("open", "write", "fsync", "ftruncate", "replace", "rename", "unlink", "close")

    def __init__(self, directory: Path, on_event: Callable[[list[Any]], None]) -> None:
        self.directory = directory
        self.on_event = on_event
        self.real: dict[str, Any] = {n: getattr(os, n) for n in self.NAMES}
        self.fds: dict[int, int | None] = {}  # fd -> inode number (None: the directory)
        self.names: dict[str, int] = {}  # file name in the directory -> inode number
        self.next_ino = 0
        for entry in sorted(os.listdir(directory)):
            self.names[entry] = self._new_ino()

    def _new_ino(self) -> int:
        self.next_ino += 1
        return self.next_ino

    def _name(self, path: Any) -> str | None:
        p = Path(os.fsdecode(path))
        if not p.is_absolute():
            p = Path.cwd() / p
        if p == self.directory:
            return ""
        return p.name if p.parent == self.directory else None

    def install(self) -> None:
        real = self.real

        def open_(path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
            name = self._name(path) if dir_fd is None else None
            existed = name is not None and name in self.names
            fd: int = real["open"](path, flags, mode, dir_fd=dir_fd)
            if name == "":
                self.fds[fd] = None
            elif name is not None:
                if not existed and flags & os.O_CREAT:
                    ino = self._new_ino()
                    self.names[name] = ino
                    self.fds[fd] = ino
                    self.on_event(["create", name, ino])
                else:
                    self.fds[fd] = self.names[name]
                    if flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR):
                        self.on_event(["trunc", self.names[name]])
            return fd

        def write(fd: int, data: Any) -> int:
            n: int = real["write"](fd, data)
            ino = self.fds.get(fd)
            if ino is not None:
                end = os.lseek(fd, 0, os.SEEK_CUR)
                self.on_event(["write", ino, end - n, bytes(memoryview(data)[:n]).hex()])
            return n

        def fsync(fd: Any) -> None:
            real["fsync"](fd)
            if fd in self.fds:
                ino = self.fds[fd]
                self.on_event(["dsync"] if ino is None else ["fsync", ino])

        def ftruncate(fd: int, length: int) -> None:
            real["ftruncate"](fd, length)
            ino = self.fds.get(fd)
            if ino is not None:
                self.on_event(["ftrunc", ino, length])

        def rename(src: Any, dst: Any, **kw: Any) -> None:
            real["replace"](src, dst, **kw)
            a, b = self._name(src), self._name(dst)
            if a and b and a in self.names:
                self.names[b] = self.names.pop(a)
                self.on_event(["rename", a, b])

        def unlink(path: Any, **kw: Any) -> None:
            real["unlink"](path, **kw)
            name = self._name(path)
            if name and name in self.names:
                del self.names[name]
                self.on_event(["unlink", name])

        def close(fd: int) -> None:
            self.fds.pop(fd, None)
            real["close"](fd)

        os.open = open_
        os.write = write
        os.fsync = fsync
        os.ftruncate = ftruncate
        os.replace = rename
        os.rename = rename
        os.unlink = unlink
        os.close = close


def _child(body: Callable[[], None], ack_fd: int) -> None:
    """Run ``body`` in this forked child; on an exception report it; never return."""
    write = os.write
    try:
        body()
        write(ack_fd, b"E\n")
    except BaseException:
        text = traceback.format_exc().replace("\n", "\\n")
        with contextlib.suppress(OSError):
            write(ack_fd, b"X " + text.encode("utf-8", "replace") + b"\n")
    finally:
        os._exit(0)


def _read_lines(fd: int, stop: bytes | None = None) -> Iterator[bytes]:
    buf = b""
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            yield line
            if stop is not None and line == stop:
                return
    if buf:
        yield buf


@dataclass
class ChildRun:
    """What the parent learnt from one child: acknowledged results by step, how it ended."""

    acks: dict[int, object] = field(default_factory=dict)
    end: str = ""  # "stopped", "finished", or "raised: <traceback>"
    events: list[list[Any]] = field(default_factory=list)


def _ack_writer(ack_fd: int) -> Callable[[int, object], None]:
    write = os.write

    def ack(step: int, result: object) -> None:
        write(ack_fd, b"A " + json.dumps([step, result]).encode() + b"\n")

    return ack


def kill_run(w: Workload, directory: Path, point: int | None) -> ChildRun:
    """Run ``w`` in a child and SIGKILL it right after its ``point``-th mutating file call
    (``None``: let it finish and count the calls, reported as ``events``)."""
    ack_r, ack_w = os.pipe()
    ctl_r, ctl_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(ack_r)
        os.close(ctl_w)
        count = [0]
        write, read = os.write, os.read

        def on_event(event: list[Any]) -> None:
            count[0] += 1
            if count[0] == point:
                write(ack_w, b"S\n")
                read(ctl_r, 1)  # blocks until SIGKILL: the parent never writes

        def body() -> None:
            if point == 0:  # before the first call
                write(ack_w, b"S\n")
                read(ctl_r, 1)
            _Instrument(directory, on_event).install()
            run_workload(w, directory, _ack_writer(ack_w))
            write(ack_w, f"N {count[0]}\n".encode())

        _child(body, ack_w)
    os.close(ack_w)
    os.close(ctl_r)
    run = ChildRun()
    try:
        for line in _read_lines(ack_r, stop=b"S"):
            _take_line(run, line)
            if line == b"S":
                os.kill(pid, signal.SIGKILL)
    finally:
        os.close(ack_r)
        os.close(ctl_w)
        os.waitpid(pid, 0)
    return run


def record_run(w: Workload, directory: Path) -> ChildRun:
    """Run ``w`` to the end in a child that records its file operations and acknowledgements."""
    ack_r, ack_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        os.close(ack_r)
        write = os.write

        def on_event(event: list[Any]) -> None:
            write(ack_w, b"F " + json.dumps(event).encode() + b"\n")

        def body() -> None:
            _Instrument(directory, on_event).install()
            run_workload(w, directory, _ack_writer(ack_w))

        _child(body, ack_w)
    os.close(ack_w)
    run = ChildRun()
    try:
        for line in _read_lines(ack_r):
            _take_line(run, line)
    finally:
        os.close(ack_r)
        os.waitpid(pid, 0)
    return run


def _take_line(run: ChildRun, line: bytes) -> None:
    if line.startswith(b"A "):
        step, result = json.loads(line[2:])
        run.acks[step] = result
        run.events.append(["ack", step])
    elif line.startswith(b"F "):
        run.events.append(json.loads(line[2:]))
    elif line == b"S":
        run.end = "stopped"
    elif line.startswith(b"N "):
        run.events.append(["count", int(line[2:])])
    elif line == b"E":
        run.end = run.end or "finished"
    elif line.startswith(b"X "):
        run.end = "raised: " + line[2:].decode("utf-8", "replace").replace("\\n", "\n")


# -- checking a recovered directory --------------------------------------------------------------


@dataclass
class Violation:
    """One broken promise, with what to replay: ``leasefence crashcheck --replay <replay>``."""

    family: str
    workload: str
    step: int  # the step in flight (the first one not acknowledged)
    call: str
    point: str
    what: str

    @property
    def replay(self) -> str:
        return f"{self.family}:{self.workload}:{self.point}"

    def __str__(self) -> str:
        return (
            f"[{self.family}] workload {self.workload}, step {self.step} {self.call}, crash point "
            f"{self.point}: {self.what}\n    replay: leasefence crashcheck --replay {self.replay}"
        )


@dataclass
class Outcome:
    """What checking one crash point found."""

    acked_checked: int = 0
    lost: int = 0
    problems: list[str] = field(default_factory=list)


def _bounds(w: Workload, h: History) -> Bounds:
    if w.kind == "journal":
        task_of = tuple((x, "s") for x in (*w.names, _after_id(w)))
        restarts = 0
    else:
        task_of = tuple((f"w-{t}", t) for t in w.names)
        restarts = sum(op.name == "restart" for op in w.ops) + 2
    return Bounds(
        task_of=task_of,
        ranks=(*RANKS, LEGACY_WORKER, AFTER_RANK),
        ttl=2,
        max_wall=h.last_tick + 1,
        max_reboots=0,
        max_rollbacks=0,
        max_restarts=restarts,
    )


def _after_id(w: Workload) -> str:
    return _work_ids(w.seed, 6)[-1]


def journal_state(j: WorkLeaseJournal) -> Journal:
    """The model's ``Journal`` for what the journal ``j`` holds (ticks for Unix times)."""
    leases = []
    for w, x in sorted(j.leases.items()):
        if x.clock == CLOCK_UNIX:
            leases.append((w, Lease(x.owner, round(x.updated - BASE), CLOCK_UNIX)))
        else:
            leases.append((w, Lease(x.owner, round(x.updated), CLOCK_LEGACY)))
    return Journal(
        leases=tuple(leases),
        completed=frozenset(j.completed),
        attempts=tuple(sorted(j.attempts.items())),
    )


def coordinator_state(c: StateShardCoordinator) -> Coordinator:
    """The model's ``Coordinator`` for ``c`` (zeroed times stay 0; statistics only where the
    model keeps them: tasks with a completion or a failure)."""
    leases = tuple(
        (t, MStateLease(x.owner, 0 if x.updated == 0.0 else round(x.updated - BASE), x.epoch))
        for t, x in sorted(c.leases.items())
    )
    stats = tuple(
        (t, Stats(s.completions, s.failures, round(s.reward), round(s.cost)))
        for t, s in sorted(c.statistics.items())
        if s.completions + s.failures > 0
    )
    return Coordinator(epoch=c.epoch, leases=leases, stats=stats)


def _describe_steps(w: Workload, h: History, lo: int, hi: int) -> str:
    """The steps whose units lie in (lo, hi]."""
    steps = [
        f"step {i} {w.ops[i].describe()}"
        for i in range(len(w.ops))
        if lo < h.written[i] <= hi and (i == 0 or h.written[i - 1] < h.written[i])
    ]
    return "; ".join(steps[:4]) + (f" and {len(steps) - 4} more" if len(steps) > 4 else "")


def check_directory(w: Workload, h: History, directory: Path, acked: int) -> Outcome:
    """Reopen the files in ``directory`` after a crash that followed the acknowledgement of step
    ``acked`` (-1: none) and check them against the model's history."""
    out = Outcome()
    low, high = h.window(acked)
    out.acked_checked = sum(1 for i in range(1, acked + 1) if h.written[i] <= low)
    b = _bounds(w, h)
    tick = h.last_tick

    def clock() -> float:
        return BASE + tick

    if w.kind == "journal":
        path = directory / JOURNAL_NAME
        try:
            journal = WorkLeaseJournal(path, clock=clock)
        except Exception as exc:
            out.problems.append(f"opening the journal raised {type(exc).__name__}: {exc}")
            return out
        try:
            got = journal_state(journal)
            torn = journal.torn_tail
            _match(out, w, h, got, low, high)
            before = State(wall=tick, journal=h.units[low])
            after = State(wall=tick, journal=got)
            _invariants(out, before, after, b, step_property=w.mode == "always")
            _file_l1(out, path)
            if torn:  # the next append must cut the tail and keep it in .broken
                fresh = _after_id(w)
                ok = journal.lease(fresh, AFTER_RANK)
                journal.close()
                expected = mjo.lease_work(got, fresh, AFTER_RANK, tick, 0)[1]
                with WorkLeaseJournal(path, clock=clock) as again:
                    if not ok or journal_state(again) != expected or again.torn_tail:
                        out.problems.append(
                            "after a torn tail, the next lease did not survive a reopen"
                        )
                broken = path.with_name(path.name + ".broken")
                if not broken.exists() or not broken.read_bytes().endswith(torn):
                    out.problems.append("the torn tail was not kept in .broken")
        finally:
            journal.close()
        return out
    snap = directory / SNAPSHOT_NAME
    try:
        coord = StateShardCoordinator(snap, clock=clock)
        reloaded = StateShardCoordinator(snap, clock=clock)
    except Exception as exc:
        out.problems.append(f"loading the snapshot raised {type(exc).__name__}: {exc}")
        return out
    got_c = coordinator_state(coord)
    candidates = [Coordinator() if u is None else mco.restart_coordinator(u) for u in h.units]
    _match(out, w, h, got_c, low, high, candidates)
    if coordinator_state(reloaded) != mco.restart_coordinator(got_c):
        out.problems.append("a second restart did not load the first restart's snapshot")
    durable = h.units[low] if h.units[low] is not None else Coordinator()
    _invariants(out, State(wall=tick, coordinator=durable), State(wall=tick, coordinator=got_c), b)
    return out


def _match(
    out: Outcome,
    w: Workload,
    h: History,
    got: object,
    low: int,
    high: int,
    candidates: list[Any] | None = None,
) -> None:
    units = h.units if candidates is None else candidates
    hits = [k for k, u in enumerate(units) if u == got]
    if any(low <= k <= high for k in hits):
        return
    older = [k for k in hits if k < low]
    if older:
        k = max(older)
        lost = [
            i
            for i in range(1, len(w.ops))
            if k < h.written[i] <= low and h.written[i - 1] < h.written[i]
        ]
        out.lost += len(lost)
        out.problems.append(
            f"lost acknowledged operation(s): the files hold the state after unit {k}, but unit "
            f"{low} was durable when the last acknowledgement was sent; lost: "
            f"{_describe_steps(w, h, k, low)}"
        )
    elif hits:
        out.problems.append(
            f"unacknowledged effect: the files hold unit {min(hits)}, beyond what the steps up to "
            f"the one in flight could write (unit {high}): {_describe_steps(w, h, high, min(hits))}"
        )
    else:
        out.problems.append(
            f"recovered state is no state the history allows (units {low}..{high}): got {got!r}, "
            f"expected {units[low]!r}"
        )


def _invariants(
    out: Outcome, before: State, after: State, b: Bounds, *, step_property: bool = True
) -> None:
    """The model's state invariants on ``after``; L3 and L6's statistics from ``before`` (the
    last durable state). L3 is a one-step property: it is checked only when the crash window
    spans one call (not over a group-commit batch, where a lease may end and be granted again)."""
    bad = violated(None, after, b)
    if step_property and not l3_refusal_changes_nothing(before, after, b):
        bad.append("L3_RefusalChangesNothing")
    if not l6_statistics_survive(before, after, b):
        bad.append("L6_StatisticsSurvive")
    if bad:
        out.problems.append(f"invariant(s) violated by the recovered state: {', '.join(bad)}")


def _file_l1(out: Outcome, path: Path) -> None:
    """L1 on the file itself: no lease record while the same work ID is leased (by replay)."""
    if not path.exists():
        return
    held: dict[str, int | None] = {}
    for r in scan_file(path).records:
        if r.event == "lease":
            if r.work_id in held:
                out.problems.append(
                    f"L1_SingleOwner: line {r.line} leases {r.work_id[:8]}… to {r.worker} while "
                    f"{held[r.work_id]} holds it"
                )
                return
            held[r.work_id] = r.worker
        else:
            held.pop(r.work_id, None)


# -- family "power": replaying recorded operations -----------------------------------------------

_DATA = ("write", "trunc", "ftrunc")
_NAMES = ("create", "rename", "unlink")


@dataclass
class _Disk:
    names: dict[str, int]
    inodes: dict[int, bytearray]

    def apply(self, ev: list[Any], cut: int | None = None) -> None:
        kind = ev[0]
        if kind == "create":
            self.names[ev[1]] = ev[2]
            self.inodes.setdefault(ev[2], bytearray())
        elif kind == "write":
            data = bytes.fromhex(ev[3])
            if cut is not None:
                data = data[:cut]
            buf = self.inodes.setdefault(ev[1], bytearray())
            off = ev[2]
            if len(buf) < off:
                buf.extend(bytes(off - len(buf)))
            buf[off : off + len(data)] = data
        elif kind == "trunc":
            self.inodes[ev[1]] = bytearray()
        elif kind == "ftrunc":
            buf = self.inodes.setdefault(ev[1], bytearray())
            del buf[ev[2] :]
            buf.extend(bytes(max(0, ev[2] - len(buf))))
        elif kind == "rename":
            if ev[1] in self.names:
                self.names[ev[2]] = self.names.pop(ev[1])
        elif kind == "unlink":
            self.names.pop(ev[1], None)

    def files(self) -> dict[str, bytes]:
        return {n: bytes(self.inodes.get(i, b"")) for n, i in sorted(self.names.items())}


def _cuts(size: int) -> list[int]:
    if size <= 1:
        return []
    if size <= CUT_EVERY_BYTE_UP_TO:
        return list(range(1, size))
    n = CUTS_OF_LONG_WRITES
    return sorted({1 + (size - 2) * i // (n - 1) for i in range(n)})


@dataclass(frozen=True)
class PowerPoint:
    """A simulated power loss: after ``p`` file operations, losing the unforced ones from ``q``
    on; ``cut`` bytes of operation ``q`` (a write) kept when not None."""

    p: int
    q: int
    cut: int | None

    def __str__(self) -> str:
        return f"{self.p},{self.q},{'-' if self.cut is None else self.cut}"

    @staticmethod
    def parse(text: str) -> PowerPoint:
        p, q, cut = text.split(",")
        return PowerPoint(int(p), int(q), None if cut == "-" else int(cut))


def power_points(events: list[list[Any]]) -> Iterator[tuple[PowerPoint, int]]:
    """Every simulated power loss over the recorded ``events``, with the last step acknowledged
    before it. ``p`` and ``q`` count file operations (acknowledgements excluded)."""
    ops = [e for e in events if e[0] != "ack"]
    acked_before: list[int] = []
    acked = -1
    for e in events:
        if e[0] == "ack":
            acked = e[1]
        else:
            acked_before.append(acked)
    acked_before.append(acked)
    inode_of_name: dict[str, int] = {}
    unforced: list[int] = []
    for p in range(len(ops) + 1):
        a = acked_before[p] if p < len(ops) else acked
        yield PowerPoint(p, p, None), a
        for q in unforced:
            yield PowerPoint(p, q, None), a
            if ops[q][0] == "write":
                for cut in _cuts(len(ops[q][3]) // 2):
                    yield PowerPoint(p, q, cut), a
        if p == len(ops):
            break
        ev = ops[p]
        if ev[0] == "create":
            inode_of_name[ev[1]] = ev[2]
        if ev[0] in _DATA or ev[0] in _NAMES:
            unforced.append(p)
        elif ev[0] == "fsync":
            unforced = [i for i in unforced if not (ops[i][0] in _DATA and ops[i][1] == ev[1])]
        elif ev[0] == "dsync":
            unforced = [i for i in unforced if ops[i][0] not in _NAMES]


def power_disk(
    events: list[list[Any]], initial: dict[str, bytes], point: PowerPoint
) -> dict[str, bytes]:
    """The files after the power loss ``point``: name -> content."""
    ops = [e for e in events if e[0] != "ack"]
    disk = _Disk({}, {})
    for n, (name, data) in enumerate(sorted(initial.items()), start=1):
        disk.names[name] = n
        disk.inodes[n] = bytearray(data)
    lost = _unforced(ops, point.p)
    for i, ev in enumerate(ops[: point.p]):
        if i in lost and i >= point.q:
            if i == point.q and point.cut is not None:
                disk.apply(ev, point.cut)
            continue
        disk.apply(ev)
    return disk.files()


def _unforced(ops: list[list[Any]], p: int) -> set[int]:
    unforced: set[int] = set()
    for i, ev in enumerate(ops[:p]):
        if ev[0] in _DATA or ev[0] in _NAMES:
            unforced.add(i)
        elif ev[0] == "fsync":
            unforced -= {k for k in unforced if ops[k][0] in _DATA and ops[k][1] == ev[1]}
        elif ev[0] == "dsync":
            unforced -= {k for k in unforced if ops[k][0] in _NAMES}
    return unforced


def _materialize(directory: Path, files: dict[str, bytes]) -> None:
    for entry in os.listdir(directory):
        (directory / entry).unlink()
    for name, data in files.items():
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)


def _initial_files(w: Workload, scratch: Path) -> dict[str, bytes]:
    _materialize(scratch, {})
    prepare(w, scratch)
    return {n: (scratch / n).read_bytes() for n in sorted(os.listdir(scratch))}


# -- the harness -----------------------------------------------------------------------------------


@dataclass
class Report:
    """Figures of a crashcheck run and every violation found."""

    seed: int
    kill_points: int = 0
    power_points: int = 0
    power_states: int = 0  # distinct (files, acknowledgement window) reopened
    acked_checked: int = 0
    lost: int = 0
    workloads: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    stopped_early: list[str] = field(default_factory=list)  # families cut short at MAX_KEPT
    seconds: float = 0.0

    @property
    def points(self) -> int:
        return self.kill_points + self.power_points

    @property
    def invariant_violations(self) -> int:
        return sum("invariant" in v.what or "L1_" in v.what for v in self.violations)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["crash_points"] = self.points
        doc["invariant_violations"] = self.invariant_violations
        doc["violations"] = [{**asdict(v), "replay": v.replay} for v in self.violations]
        return doc

    def summary(self) -> str:
        return (
            f"crash points tried: {self.points:,} ({self.kill_points:,} SIGKILL, "
            f"{self.power_points:,} power loss; {self.power_states:,} distinct power-loss states "
            f"reopened)\nacknowledged operations checked: {self.acked_checked:,}\n"
            f"acknowledged operations lost: {self.lost}\n"
            f"invariant violations: {self.invariant_violations}\n"
            f"violations: {len(self.violations)}"
            + (
                f" (stopped after {MAX_KEPT} in: {', '.join(self.stopped_early)})"
                if self.stopped_early
                else ""
            )
            + f"\nworkloads: {len(self.workloads)}; "
            f"time: {self.seconds:.1f} s"
        )


Progress = Callable[[str], None]
#: A workload's family stops at this many violations (a broken implementation would otherwise
#: report every one of thousands of crash points); the report says it stopped early.
MAX_KEPT = 20


def _scratch_root() -> Path:
    shm = Path("/dev/shm")
    base = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="leasefence-crash-", dir=base))


def _note(
    report: Report,
    w: Workload,
    family: Family,
    acked: int,
    point: str,
    out: Outcome,
    kept: list[int],
) -> None:
    report.acked_checked += out.acked_checked
    report.lost += out.lost
    for what in out.problems:
        step = min(acked + 1, len(w.ops) - 1)
        v = Violation(family, w.spec, step, w.ops[step].describe(), point, what)
        if kept[0] < MAX_KEPT:
            report.violations.append(v)
        kept[0] += 1


def _check_results(
    report: Report, w: Workload, h: History, run: ChildRun, family: Family, point: str
) -> None:
    if run.end.startswith("raised"):
        v = Violation(
            family, w.spec, max(run.acks, default=-1) + 1, "", point, f"the workload {run.end}"
        )
        report.violations.append(v)
    for step, result in run.acks.items():
        if result != _result_json(h.results[step]):
            report.violations.append(
                Violation(
                    family,
                    w.spec,
                    step,
                    w.ops[step].describe(),
                    point,
                    f"the implementation returned {result!r}, the model {h.results[step]!r}",
                )
            )


def check_kill(
    w: Workload,
    report: Report,
    scratch: Path,
    progress: Progress | None = None,
    only: int | None = None,
) -> None:
    """Family ``kill`` on ``w``: SIGKILL after every mutating file call (or only after ``only``)."""
    h = history(w)
    directory = scratch / "kill"
    directory.mkdir(exist_ok=True)
    _materialize(directory, {})
    prepare(w, directory)
    full = kill_run(w, directory, None)
    _check_results(report, w, h, full, "kill", "-")
    total = next((e[1] for e in full.events if e[0] == "count"), 0)
    kept = [0]
    points: range | list[int] = range(total + 1) if only is None else [only] if only >= 0 else []
    for k in points:
        if kept[0] >= MAX_KEPT:
            report.stopped_early.append(f"kill {w.spec}")
            break
        _materialize(directory, {})
        prepare(w, directory)
        run = kill_run(w, directory, k)
        acked = max(run.acks, default=-1)
        _check_results(report, w, h, run, "kill", str(k))
        out = check_directory(w, h, directory, acked)
        report.kill_points += 1
        _note(report, w, "kill", acked, str(k), out, kept)
    if progress:
        progress(f"kill  {w.spec}: {len(points)} points")


def check_power(
    w: Workload,
    report: Report,
    scratch: Path,
    progress: Progress | None = None,
    only: PowerPoint | None = None,
) -> None:
    """Family ``power`` on ``w``: every simulated power loss over its recorded operations."""
    h = history(w)
    directory = scratch / "power"
    directory.mkdir(exist_ok=True)
    initial = _initial_files(w, directory)
    _materialize(directory, initial)
    rec = record_run(w, directory)
    _check_results(report, w, h, rec, "power", "-")
    seen: set[bytes] = set()
    kept = [0]
    n = 0
    for point, acked in power_points(rec.events):
        if kept[0] >= MAX_KEPT:
            report.stopped_early.append(f"power {w.spec}")
            break
        if only is not None and point != only:
            continue
        n += 1
        files = power_disk(rec.events, initial, point)
        key = hashlib.sha256(repr((sorted(files.items()), h.window(acked))).encode()).digest()
        report.power_points += 1
        if key in seen:
            continue
        seen.add(key)
        report.power_states += 1
        _materialize(directory, files)
        out = check_directory(w, h, directory, acked)
        _note(report, w, "power", acked, str(point), out, kept)
    if progress:
        progress(f"power {w.spec}: {n} points, {len(seen)} distinct states")


def workloads_for_round(seed: int, r: int, size: int) -> list[Workload]:
    """The four workloads of round ``r``: journal (always, group), coordinator (autosave, manual)."""
    s = seed * 1000 + r
    return [
        journal_workload(s, size, "always"),
        journal_workload(s, size, "group"),
        coordinator_workload(s, size, "autosave"),
        coordinator_workload(s, size, "manual"),
    ]


def run(
    seed: int = 1,
    points: int = 10_000,
    size: int = 40,
    kill_rounds: int = 5,
    progress: Progress | None = None,
) -> Report:
    """Rounds of four workloads: the first ``kill_rounds`` get family ``kill``; family ``power``
    runs on each round that starts with fewer than ``points`` crash points tried. Rounds go on
    until both are done."""
    report = Report(seed=seed)
    start = time.perf_counter()
    scratch = _scratch_root()
    try:
        r = 0
        while report.points < points or r < kill_rounds:
            power = report.points < points
            for w in workloads_for_round(seed, r, size):
                report.workloads.append(w.spec)
                if r < kill_rounds:
                    check_kill(w, report, scratch, progress)
                if power:
                    check_power(w, report, scratch, progress)
            if progress:
                progress(
                    f"round {r}: {report.points:,}/{points:,} crash points, "
                    f"{len(report.violations)} violations, {time.perf_counter() - start:.1f} s"
                )
            r += 1
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    return report


def replay(spec: str, progress: Progress | None = None) -> Report:
    """Run one crash point again: ``kill:<workload>:<k>`` or ``power:<workload>:<p>,<q>,<cut>``."""
    family, rest = spec.split(":", 1)
    workload, point = rest.rsplit(":", 1)
    w = make_workload(workload)
    report = Report(seed=w.seed, workloads=[w.spec])
    scratch = _scratch_root()
    start = time.perf_counter()
    try:
        if family == "kill":  # point "-": only the uninterrupted run (its results)
            check_kill(w, report, scratch, progress, only=-1 if point == "-" else int(point))
        elif family == "power":
            check_power(w, report, scratch, progress, only=PowerPoint.parse(point))
        else:
            raise ValueError(f"unknown family {family!r} (kill or power)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report.seconds = time.perf_counter() - start
    if progress:
        for line in describe(w).splitlines():
            progress(line)
    return report


def describe(w: Workload) -> str:
    """The workload's steps, one per line, with the model's result of each."""
    h = history(w)
    return "\n".join(f"step {i}: {op.describe()} -> {h.results[i]!r}" for i, op in enumerate(w.ops))


def main_progress(line: str) -> None:
    print(f"[crashcheck] {line}", file=sys.stderr, flush=True)


def layer_crashcheck(deep: bool) -> list[Any]:
    """The ``crashcheck`` row of ``leasefence verify``: the quick run, or with ``--deep`` the
    default one (at least 10,000 crash points). Returns ``verify.Row`` objects."""
    from leasefence.report import FAIL, PASS, Row

    if deep:
        report = run()
        ran = f"crashcheck (seed {report.seed}, {len(report.workloads)} workloads)"
    else:
        report = run(points=400, size=6, kill_rounds=1)
        ran = f"crashcheck --quick (seed {report.seed}; --deep: 10,000+ points)"
    figures = (
        f"{report.points:,} crash points ({report.kill_points:,} SIGKILL, "
        f"{report.power_points:,} power loss), {report.acked_checked:,} acked ops checked, "
        f"{report.lost} lost, {report.invariant_violations} invariant violations"
    )
    return [
        Row(
            "crashcheck",
            ran,
            figures,
            FAIL if report.violations else PASS,
            report.seconds,
            "\n".join(str(v) for v in report.violations),
        )
    ]
