"""The crash harness's simulated disk: which recorded file operations survive a power loss at
each point, and the files they leave.

Three models of the first lost write (``PowerPoint.model``): ``whole`` (lost whole), ``torn``
(a prefix kept, cut at a byte) and ``sectors`` (any subset of its 512-byte sectors kept, in any
order, as ext4 and XFS may leave it: the file grown to its end, the other sectors zero where the
file grew and old content elsewhere)."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Writes up to this size are cut at every byte; longer ones (whole snapshots) at
#: ``CUTS_OF_LONG_WRITES`` spread offsets, first and last byte included.
CUT_EVERY_BYTE_UP_TO = 256
CUTS_OF_LONG_WRITES = 64

#: The sectors model: a write's 512-byte sectors (aligned to the file) persist independently.
#: Writes of up to ``ALL_SUBSETS_UP_TO`` sectors are tried with every subset kept; longer ones
#: (whole snapshots) with ``SECTOR_SAMPLES`` seeded subsets, the empty one included.
SECTOR = 512
ALL_SUBSETS_UP_TO = 8
SECTOR_SAMPLES = 64

#: The models of the first lost write, in the order the report prints them.
MODELS = ("whole", "torn", "sectors")

_DATA = ("write", "trunc", "ftrunc")
_NAMES = ("create", "rename", "unlink")


@dataclass
class _Disk:
    names: dict[str, int]
    inodes: dict[int, bytearray]

    def apply(self, ev: list[Any], cut: int | None = None, sectors: int | None = None) -> None:
        kind = ev[0]
        if kind == "write" and sectors is not None:
            self._write_sectors(ev, sectors)
        elif kind == "create":
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

    def _write_sectors(self, ev: list[Any], mask: int) -> None:
        """The write ``ev`` with only the sectors in ``mask`` (bit k: its k-th sector) kept; the
        file grows to the write's end, zeros where no kept sector reached."""
        data = bytes.fromhex(ev[3])
        off = ev[2]
        buf = self.inodes.setdefault(ev[1], bytearray())
        if len(buf) < off + len(data):
            buf.extend(bytes(off + len(data) - len(buf)))
        first = off // SECTOR
        for k in range(_sector_count(off, len(data))):
            if mask >> k & 1:
                a = max(off, (first + k) * SECTOR)
                b = min(off + len(data), (first + k + 1) * SECTOR)
                buf[a:b] = data[a - off : b - off]

    def files(self) -> dict[str, bytes]:
        return {n: bytes(self.inodes.get(i, b"")) for n, i in sorted(self.names.items())}


def _cuts(size: int) -> list[int]:
    if size <= 1:
        return []
    if size <= CUT_EVERY_BYTE_UP_TO:
        return list(range(1, size))
    n = CUTS_OF_LONG_WRITES
    return sorted({1 + (size - 2) * i // (n - 1) for i in range(n)})


def _sector_count(off: int, size: int) -> int:
    return 0 if size <= 0 else (off + size - 1) // SECTOR - off // SECTOR + 1


def _subsets(n: int, seed: str) -> list[int]:
    """The sector masks tried for a write of ``n`` sectors: every one but "all kept" (the write
    whole), or a seeded sample of them for long writes."""
    full = (1 << n) - 1
    if n <= ALL_SUBSETS_UP_TO:
        return list(range(full))
    rng = random.Random(seed)
    picks = {0}
    while len(picks) < SECTOR_SAMPLES:
        mask = rng.getrandbits(n)
        if mask != full:
            picks.add(mask)
    return sorted(picks)


@dataclass(frozen=True)
class PowerPoint:
    """A simulated power loss: after ``p`` file operations, losing the unforced ones from ``q``
    on; of operation ``q`` (a write), ``cut`` bytes kept when not None (model torn), or the
    sectors in the bit mask ``sectors`` when not None (model sectors)."""

    p: int
    q: int
    cut: int | None
    sectors: int | None = None

    @property
    def model(self) -> str:
        """Which model of the first lost write this point belongs to (one of ``MODELS``)."""
        if self.sectors is not None:
            return "sectors"
        return "whole" if self.cut is None else "torn"

    def __str__(self) -> str:
        if self.sectors is not None:
            return f"{self.p},{self.q},s{self.sectors:x}"
        return f"{self.p},{self.q},{'-' if self.cut is None else self.cut}"

    @staticmethod
    def parse(text: str) -> PowerPoint:
        p, q, cut = text.split(",")
        if cut.startswith("s"):
            return PowerPoint(int(p), int(q), None, int(cut[1:], 16))
        return PowerPoint(int(p), int(q), None if cut == "-" else int(cut))


def _partial_writes(p: int, q: int, ev: list[Any], models: tuple[str, ...]) -> Iterator[PowerPoint]:
    """The points that keep part of the write ``ev`` (operation ``q``) under ``models``."""
    size = len(ev[3]) // 2
    if "torn" in models:
        for cut in _cuts(size):
            yield PowerPoint(p, q, cut)
    if "sectors" in models:
        for mask in _subsets(_sector_count(ev[2], size), f"{p}:{q}"):
            yield PowerPoint(p, q, None, mask)


def power_points(
    events: list[list[Any]], models: tuple[str, ...] = MODELS
) -> Iterator[tuple[PowerPoint, int]]:
    """Every simulated power loss over the recorded ``events`` under ``models``, with the last
    step acknowledged before it. ``p`` and ``q`` count file operations (acknowledgements
    excluded). The points where nothing unforced is kept are model ``whole``."""
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
        if "whole" in models:
            yield PowerPoint(p, p, None), a
        for q in unforced:
            if "whole" in models:
                yield PowerPoint(p, q, None), a
            if ops[q][0] == "write":
                for point in _partial_writes(p, q, ops[q], models):
                    yield point, a
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
            if i == point.q and (point.cut is not None or point.sectors is not None):
                disk.apply(ev, point.cut, point.sectors)
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
