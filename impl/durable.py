"""Durable, link-refusing file operations shared by the journal, the coordinator snapshot and the trace.

Durable means (FIELD-NOTES): the whole buffer written, the file fsynced before a call is
acknowledged, and a file replaced by writing a temporary file in the same directory, fsyncing it,
``os.replace``-ing it over the old one and fsyncing the directory, so that a crash leaves the old
content or the new one, never neither. Errors propagate: callers make themselves unusable on an
``OSError`` rather than retry.

Every file leasefence writes is opened by ``open_nofollow``, the one place of the rule: a
symbolic link or anything but a regular file at the path is refused (``UnsafePath``), so nothing
is ever written through a link planted at a journal, lock, snapshot, trace or side-file path.
Files it creates are owner-only (0600); a temporary file gets an unpredictable name and is
created exclusively (``O_EXCL``), so no planted file or link can stand in for it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

from leasefence.impl.errors import UnsafePath


def open_nofollow(path: Path, flags: int, mode: int = 0o600) -> int:
    """``os.open(path, flags, mode)`` refusing a symbolic link at ``path`` (``O_NOFOLLOW``) and
    anything but a regular file (a FIFO, a device, a directory) with ``UnsafePath``; a file it
    creates gets ``mode`` (0600). Opening never blocks on a FIFO."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK, mode)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise UnsafePath(path, "a symbolic link") from None
        if err.errno in (errno.ENXIO, errno.EISDIR):  # a FIFO without a reader; a directory
            raise UnsafePath(path, "not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafePath(path, "not a regular file")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_all(fd: int) -> bytes:
    """Every byte of the open file ``fd``, read from offset 0 (the file offset is not used)."""
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def read_nofollow(path: Path) -> bytes:
    """The content of the regular file ``path``, refusing a link (``FileNotFoundError`` when
    there is nothing at ``path``)."""
    fd = open_nofollow(path, os.O_RDONLY)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd`` (``os.write`` may write less than asked)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def fsync_dir(directory: Path) -> None:
    """fsync a directory, making the names created, renamed or removed in it durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    """A fresh, unpredictable temporary name beside ``path``: ``.<name>.<16 hex>.tmp``."""
    return path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")


def replace_durably(path: Path, data: bytes) -> None:
    """Make ``data`` the content of ``path``: a new temporary file beside it (``temp_path``,
    created exclusively, 0600), fsync, replace, fsync the directory. A failure removes the
    temporary file and propagates. ``os.replace`` swaps the name ``path`` itself, so a link
    there is replaced, never written through."""
    tmp = temp_path(path)
    fd = open_nofollow(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_dir(path.parent)
