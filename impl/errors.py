"""Every error leasefence raises on purpose, under one base class.

::

    LeaseError
    ├── UnsafePath (OSError)              a symbolic link or a non-regular file where leasefence
    │                                     opens one of its files (nothing opened or written)
    ├── InvalidWorkId (ValueError)        a work ID that is not 64 hexadecimal characters
    ├── InvalidTtl (ValueError)           a negative, NaN or infinite lease TTL
    ├── JournalError
    │   ├── JournalCorrupt (ValueError)   a bad record followed by good ones (file untouched)
    │   │   └── NotAJournal               a non-empty file without one good record that is not a
    │   │                                 torn first write (file untouched)
    │   ├── JournalLocked                 another writer holds the journal's lock
    │   ├── JournalUnusable               an fsync or write failed: this object refuses all calls
    │   ├── JournalReadOnly               a write through a journal opened read-only, or to a
    │   │                                 journal file without write permission
    │   ├── RecordTooLarge (ValueError)   a record over the line-size limit
    │   └── RecordOutOfRange (ValueError) a record number outside its documented range
    ├── CoordinatorError
    │   ├── UnknownTask (KeyError)        a state task the coordinator has never seen
    │   ├── SnapshotError (ValueError)    a snapshot that does not parse or has the wrong schema
    │   └── InvalidArgument (ValueError)  a task field, task ID, rank, reward or cost it cannot record
    ├── MasterError
    │   ├── RankBusy (RuntimeError)       a dispatch to a rank that already has one active
    │   └── UnknownWork (KeyError)        a work ID the master's catalogue does not hold
    └── ProtocolError (ValueError)        a malformed or unknown MPI message

Messages name what was wrong, with the path, line or ID involved.
"""

from __future__ import annotations


class LeaseError(Exception):
    """Base class of every error leasefence raises on purpose."""


class UnsafePath(LeaseError, OSError):
    """A symbolic link, or anything but a regular file, at a path leasefence opens (its journal,
    a side file, a snapshot or a trace). Nothing is opened or written through it."""

    def __init__(self, path: object, what: str) -> None:
        super().__init__(f"{path} is {what}; leasefence never opens its files through one")
        self.path = str(path)


class InvalidWorkId(LeaseError, ValueError):
    """A work ID that is not 64 hexadecimal characters."""


class InvalidTtl(LeaseError, ValueError):
    """A lease TTL that is negative, NaN or infinite."""


class JournalError(LeaseError):
    """Something is wrong with a work journal file."""


class JournalCorrupt(JournalError, ValueError):
    """A bad record followed by good ones: corruption, not a torn tail. The file is left as it was."""


class NotAJournal(JournalCorrupt):
    """A non-empty file without one good record that cannot be the journal's first write torn by
    a crash (docs/journal-format.md, "Not a journal"): refused, and the file left as it was."""


class JournalLocked(JournalError):
    """Another writer (in this process or another) holds the journal's exclusive lock."""


class JournalUnusable(JournalError):
    """A write or fsync failed; the journal object refuses every further call (no retry)."""


class JournalReadOnly(JournalError):
    """A write (lease, complete, abandon, recover, compact) through a journal opened read-only,
    or a writer's open (including ``journal repair``) of a journal file without write
    permission: a read-only mode is honoured even by root."""


class RecordTooLarge(JournalError, ValueError):
    """A record longer than the journal's line-size limit."""


class RecordOutOfRange(JournalError, ValueError):
    """A record number outside its range (``journal.MAX_WORKER``, ``MAX_ATTEMPT``,
    ``MAX_TIMESTAMP``): refused before it is written, a bad line when read."""


class CoordinatorError(LeaseError):
    """Something is wrong with the state-shard coordinator or its snapshot."""


class UnknownTask(CoordinatorError, KeyError):
    """A state task ID the coordinator has never seen."""


class SnapshotError(CoordinatorError, ValueError):
    """A coordinator snapshot that does not parse, or has an unknown schema version."""


class InvalidArgument(CoordinatorError, ValueError):
    """A value the coordinator cannot record faithfully, refused before any effect.

    A state-task field that is not plain JSON (``state_task_id``), a task ID that is not a
    non-empty string, a worker rank that is not an int, a reward or cost that is not finite.
    """


class MasterError(LeaseError):
    """The master was asked for something its dispatch protocol does not allow."""


class RankBusy(MasterError, RuntimeError):
    """A dispatch to a rank that already has an active dispatch (at most one per rank)."""


class UnknownWork(MasterError, KeyError):
    """A dispatch of a work ID the master's catalogue does not hold."""


class ProtocolError(LeaseError, ValueError):
    """A malformed, oversized or unknown MPI message."""
