"""The crash harness's simulated disk: which recorded file operations survive a power loss at
each point, and the files they leave."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Writes up to this size are cut at every byte; longer ones (whole snapshots) at
#: ``CUTS_OF_LONG_WRITES`` spread offsets, first and last byte included.
CUT_EVERY_BYTE_UP_TO = 256
CUTS_OF_LONG_WRITES = 64

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
        unforced = sorted(_forced_out(ops, p, set(unforced)))


def _forced_out(ops: list[list[Any]], i: int, unforced: set[int]) -> set[int]:
    """The unforced operations once operation ``i`` is done: a data or name change joins them,
    an fsync of a file forces that file's data, an fsync of the directory forces the names."""
    ev = ops[i]
    if ev[0] in _DATA or ev[0] in _NAMES:
        return unforced | {i}
    if ev[0] == "fsync":
        return {k for k in unforced if not (ops[k][0] in _DATA and ops[k][1] == ev[1])}
    if ev[0] == "dsync":
        return {k for k in unforced if ops[k][0] not in _NAMES}
    return unforced


def power_disk(
    events: list[list[Any]], initial: dict[str, bytes], point: PowerPoint
) -> dict[str, bytes]:
    """The files after the power loss ``point``: name -> content."""
    ops = [e for e in events if e[0] != "ack"]
    disk = _Disk({}, {})
    for n, (name, data) in enumerate(sorted(initial.items()), start=1):
        disk.names[name] = n
        disk.inodes[n] = bytearray(data)
    lost: set[int] = set()
    for i in range(point.p):
        lost = _forced_out(ops, i, lost)
    for i, ev in enumerate(ops[: point.p]):
        if i in lost and i >= point.q:
            if i == point.q and point.cut is not None:
                disk.apply(ev, point.cut)
            continue
        disk.apply(ev)
    return disk.files()


def materialize(directory: Path, files: dict[str, bytes]) -> None:
    """Make ``directory`` hold exactly ``files`` (name -> content)."""
    for entry in os.listdir(directory):
        (directory / entry).unlink()
    for name, data in files.items():
        fd = os.open(directory / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
