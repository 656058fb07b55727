"""Durable file operations shared by the journal and the coordinator snapshot.

Durable means (FIELD-NOTES): the whole buffer written, the file fsynced before a call is
acknowledged, and a file replaced by writing a temporary file in the same directory, fsyncing it,
``os.replace``-ing it over the old one and fsyncing the directory, so that a crash leaves the old
content or the new one, never neither. Files are created owner-only (0600). Errors propagate:
callers make themselves unusable on an ``OSError`` rather than retry.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


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


def replace_durably(path: Path, data: bytes) -> None:
    """Make ``data`` the content of ``path``: ``<name>.tmp`` beside it (0600), fsync, replace,
    fsync the directory. A failure removes the temporary file and propagates."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.fchmod(fd, 0o600)  # an existing .tmp keeps its old mode under O_CREAT
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
