"""The crash harness's instrumentation: the ``os`` calls that change files, wrapped in a forked
child so that each one is reported (after it returned) to the harness."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


class Instrument:
    """Wraps the ``os`` calls that change files, in a forked child only, and reports each one
    (after it returned) to ``on_event``. Keeps the fd -> name table the recorder needs.

    Events: ``["create", name, ino]``, ``["trunc", ino]`` (open with ``O_TRUNC``),
    ``["write", ino, offset, hex]``, ``["fsync", ino]``, ``["dsync"]`` (the directory),
    ``["ftrunc", ino, length]``, ``["rename", a, b]``, ``["unlink", name]``.
    """

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

    def install(self) -> None:
        """Replace the ``os`` functions by the wrappers below (for the rest of this process)."""
        os.open = self.open
        os.write = self.write
        os.fsync = self.fsync
        os.ftruncate = self.ftruncate
        os.replace = self.rename
        os.rename = self.rename
        os.unlink = self.unlink
        os.close = self.close

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

    def open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: Any = None) -> int:
        name = self._name(path) if dir_fd is None else None
        existed = name is not None and name in self.names
        fd: int = self.real["open"](path, flags, mode, dir_fd=dir_fd)
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

    def write(self, fd: int, data: Any) -> int:
        n: int = self.real["write"](fd, data)
        ino = self.fds.get(fd)
        if ino is not None:
            end = os.lseek(fd, 0, os.SEEK_CUR)
            self.on_event(["write", ino, end - n, bytes(memoryview(data)[:n]).hex()])
        return n

    def fsync(self, fd: Any) -> None:
        self.real["fsync"](fd)
        if fd in self.fds:
            ino = self.fds[fd]
            self.on_event(["dsync"] if ino is None else ["fsync", ino])

    def ftruncate(self, fd: int, length: int) -> None:
        self.real["ftruncate"](fd, length)
        ino = self.fds.get(fd)
        if ino is not None:
            self.on_event(["ftrunc", ino, length])

    def rename(self, src: Any, dst: Any, **kw: Any) -> None:
        self.real["replace"](src, dst, **kw)
        a, b = self._name(src), self._name(dst)
        if a and b and a in self.names:
            self.names[b] = self.names.pop(a)
            self.on_event(["rename", a, b])

    def unlink(self, path: Any, **kw: Any) -> None:
        self.real["unlink"](path, **kw)
        name = self._name(path)
        if name and name in self.names:
            del self.names[name]
            self.on_event(["unlink", name])

    def close(self, fd: int) -> None:
        self.fds.pop(fd, None)
        self.real["close"](fd)
