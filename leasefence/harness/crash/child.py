"""The crash harness's forked child: it runs a workload on real files, acknowledges each call on
a pipe after it returned, and is SIGKILLed mid-call (family kill) or records its file operations
(family power); the parent reads what it reported."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasefence.harness.crash.instrument import Instrument
from leasefence.harness.crash.workloads import (
    BASE,
    JOURNAL_NAME,
    LEGACY_STAMP,
    LEGACY_WORKER,
    SNAPSHOT_NAME,
    Workload,
)
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal, legacy_lease_line

Ack = Callable[[int, object], None]


def result_json(value: object) -> object:
    """A call's result as it travels the pipe (tuples become lists)."""
    if isinstance(value, list | tuple):
        return list(value)
    return value


def prepare(w: Workload, directory: Path) -> None:
    """Put the workload's initial files (a durable legacy journal, perhaps without its last
    newline) into ``directory``."""
    if w.kind == "journal" and w.legacy:
        data = legacy_lease_line(w.names[-1], LEGACY_WORKER, float(LEGACY_STAMP))
        if w.unterminated:
            data = data.rstrip(b"\n")
        fd = os.open(directory / JOURNAL_NAME, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)


def run_workload(w: Workload, directory: Path, ack: Ack) -> None:
    """Run every step of ``w`` on the files in ``directory``; ``ack(i, result)`` after step i."""
    tick = [w.ops[0].tick]

    def clock() -> float:
        return BASE + tick[0]

    if w.kind == "journal":
        _run_journal(w, directory / JOURNAL_NAME, clock, tick, ack)
    else:
        _run_coordinator(w, directory / SNAPSHOT_NAME, clock, tick, ack)


def _run_journal(
    w: Workload, path: Path, clock: Callable[[], float], tick: list[int], ack: Ack
) -> None:
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
        ack(i, result_json(result))


def _run_coordinator(
    w: Workload, snapshot: Path, clock: Callable[[], float], tick: list[int], ack: Ack
) -> None:
    autosave = w.mode == "autosave"
    coord = StateShardCoordinator(snapshot, clock=clock, autosave=autosave)
    ack(0, None)
    for i, op in enumerate(w.ops[1:], start=1):
        tick[0] = op.tick
        result: object = None
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
        elif op.name == "commit":
            coord.commit()
        elif op.name == "restart":
            coord = StateShardCoordinator(snapshot, clock=clock, autosave=autosave)
        ack(i, result_json(result))


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


def _ack_writer(ack_fd: int) -> Ack:
    write = os.write

    def ack(step: int, result: object) -> None:
        write(ack_fd, b"A " + json.dumps([step, result]).encode() + b"\n")

    return ack


def kill_run(w: Workload, directory: Path, point: int | None) -> ChildRun:
    """Run ``w`` in a child and SIGKILL it right after its ``point``-th mutating file call
    (``None``: let it finish and count the calls, reported as ``events``)."""
    return fork_run(directory, lambda ack: run_workload(w, directory, ack), point)


def record_run(w: Workload, directory: Path) -> ChildRun:
    """Run ``w`` to the end in a child that records its file operations and acknowledgements."""
    return fork_run(directory, lambda ack: run_workload(w, directory, ack), None, record=True)


def fork_run(
    directory: Path, work: Callable[[Ack], None], point: int | None, record: bool = False
) -> ChildRun:
    """Run ``work`` in a child whose file calls under ``directory`` are instrumented, and return
    what it reported. Without ``record``: SIGKILLed right after its ``point``-th mutating file
    call (0: before the first), or with ``point`` None run to the end and its calls counted.
    With ``record``: run to the end, every file operation reported as an event."""
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
            if record:
                write(ack_w, b"F " + json.dumps(event).encode() + b"\n")
            elif count[0] == point:
                write(ack_w, b"S\n")
                read(ctl_r, 1)  # blocks until SIGKILL: the parent never writes

        def body() -> None:
            if point == 0 and not record:  # before the first call
                write(ack_w, b"S\n")
                read(ctl_r, 1)
            Instrument(directory, on_event).install()
            work(_ack_writer(ack_w))
            if not record:
                write(ack_w, f"N {count[0]}\n".encode())

        _child(body, ack_w)
    os.close(ack_w)
    os.close(ctl_r)
    run = ChildRun()
    try:
        for line in _read_lines(ack_r, stop=None if record else b"S"):
            _take_line(run, line)
            if line == b"S":
                os.kill(pid, signal.SIGKILL)
    finally:
        os.close(ack_r)
        os.close(ctl_w)
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
