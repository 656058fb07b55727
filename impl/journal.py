"""The work lease journal (F314's ``WorkLeaseJournal``): one owner per work ID, in a crash-safe JSONL file.

Each public method that changes the journal is one action of ``leasefence.model.journal`` and
starts its docstring with that TLA+ action (``lease`` is ``LeaseWork``); the one table of actions
across layers is ``conformance/actions.py``, rendered in ``tla/README.md``.

The record format is documented field by field, with one example line of each kind, in
``docs/journal-format.md``. In short, one JSON object per line::

    {"event":"lease","work_id":"<64 hex>","worker":3,"updated":1767225600.25,"clock":"unix","attempt":1,"crc":"89abcdef"}

``crc`` is the CRC32 (8 lowercase hex digits) of the record's canonical JSON without ``crc``
(keys sorted, no spaces, ASCII). A line without ``crc`` is a record in F314's original format
(a *legacy-format* record); a lease without ``"clock": "unix"`` is a *legacy lease* (a monotonic
value from another boot) and the first ``recover`` reclaims it whatever its value.

Reading: a bad line (not JSON, wrong checksum, wrong schema) with no good record after it is a
*torn tail*: ignored on open and, before the next append, cut off and appended to
``<journal>.broken``. A final line that is a whole good record but lacks its newline is kept
(the newline is written, and fsynced on its own, before the next record), also when zero bytes
follow it (a torn tail). A bad line followed by a good record is corruption: ``JournalCorrupt``
names the file and line, and the file is left as it was (``leasefence journal repair``
quarantines bad lines). A non-empty file without one good record is a torn tail only if it could
be a torn first write (``could_be_torn_first_write``); anything else is not a journal
(``NotAJournal``) and is never altered. A number outside its range (``MAX_WORKER``,
``MAX_ATTEMPT``, ``MAX_TIMESTAMP``) makes a line bad, and is refused on write.

Writing: every write appends exactly one line, so that a crash can damage only the last line,
however the disk orders the sectors of a write: several records written together (``recover``,
a group ``commit()``) are one ``batch`` line holding them. Every acknowledged record is written
whole and fsynced (``sync="always"``), or, with ``sync="group"``, acknowledged by ``commit()``
after one write and one fsync for the batch. A failed write or fsync makes the object unusable
(``JournalUnusable`` on every later call).
One writer: an exclusive ``flock`` on ``<journal>.lock`` (a side file, because compaction
replaces the journal's inode); a read-only open takes no lock and refuses writes. A journal file
without write permission is refused to writers (``JournalReadOnly``). Every file is opened by
``durable.open_nofollow``: a symbolic link at the journal or a side-file path is refused.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import os
import stat
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Any, NoReturn

from leasefence.impl.durable import fsync_dir as _fsync_dir
from leasefence.impl.durable import open_nofollow
from leasefence.impl.durable import read_all as _read_all
from leasefence.impl.durable import replace_durably as _replace_durably
from leasefence.impl.durable import write_all as _write_all
from leasefence.impl.errors import (
    JournalCorrupt,
    JournalLocked,
    JournalReadOnly,
    JournalUnusable,
    NotAJournal,
    RecordOutOfRange,
    RecordTooLarge,
)
from leasefence.impl.generation import Generation
from leasefence.impl.records import (
    DONE,
    EVENTS,
    LEASE,
    MAX_ATTEMPT,
    MAX_RECORD_BYTES,
    MAX_TIMESTAMP,
    MAX_WORKER,
    RECLAIM,
    BadLine,
    BulkColumns,
    LeaseRecord,
    Record,
    Scan,
    Sync,
    _check_generation,
    _check_worker,
    _number,
    _owns,
    _range_problem,
    _Row,
    _scan,
    bulk_generation,
    could_be_torn_first_write,
    encode_batch,
    encode_record,
    legacy_lease_line,
    owned_record,
    parse_line,
    plain_token,
    record_crc,
    scan_bytes,
    scan_file,
    unix_stamp,
    validate_work_id,
)
from leasefence.impl.rules import UNIX, check_ttl, reclaimable


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a journal is read and replayed.

    Replay allocates a few objects per record and frees none of them, so every collection it
    triggers scans a growing heap for nothing; pausing it makes opening a large journal about a
    third faster (``leasefence bench``, recovery). It is re-enabled even on an error.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


class _Replay:
    """The state a journal's good records build from the empty one, applied in file order
    (docs/journal-format.md, "Replay"): first the bulk reader's records, chunk by chunk as
    columns (``columns``), then the reference reader's rows (``rows``); both apply a record
    alike (tests/unit/test_journal_bulk.py opens journals through either reader). A lease is
    held as its fields while a later record may still end it and becomes a ``LeaseRecord`` only
    if none does (most leases of a run's journal end), so ``leases`` keeps the same order."""

    def __init__(self) -> None:
        # a lease's fields: its row (``_Row``), or the text of its worker, timestamp and
        # generation (``BulkColumns``), told apart by their number
        self.held: dict[str, tuple[Any, ...]] = {}
        self.completed: set[str] = set()
        self.attempts: dict[str, int] = {}
        self.records = 0
        self.legacy = 0

    def columns(self, chunk: BulkColumns) -> None:
        """Apply the bulk reader's records of one chunk."""
        held, completed = self.held, self.completed
        pop, discard, add = held.pop, completed.discard, completed.add
        ids = chunk.work_ids
        # a lease's fields are zipped into their tuple in C, unused but for leases
        fields = zip(chunk.workers, chunk.stamps, chunk.generations, strict=True)
        for event, work_id, lease in zip(chunk.events, ids, fields, strict=True):
            if event == LEASE:
                held[work_id] = lease
                discard(work_id)
            else:
                pop(work_id, None)
                if event == DONE:
                    add(work_id)
        # every record carries its attempt: each sets the count, or drops it when 0
        counts = {a: int(a) for a in set(chunk.attempts)}
        attempts = self.attempts
        if "0" in counts:
            for work_id, attempt in zip(ids, chunk.attempts, strict=True):
                if attempt == "0":
                    attempts.pop(work_id, None)
                else:
                    attempts[work_id] = counts[attempt]
        else:
            attempts.update(zip(ids, map(counts.__getitem__, chunk.attempts), strict=True))
        self.records += len(ids)

    def rows(self, rows: list[_Row]) -> None:
        """Apply the reference reader's records (``Record``'s fields, in order)."""
        held, completed, attempts = self.held, self.completed, self.attempts
        legacy = 0
        for row in rows:
            event, work_id, attempt = row[1], row[2], row[6]
            if not row[7]:
                legacy += 1
            if event == LEASE:
                held[work_id] = row
                completed.discard(work_id)
                if attempt is None:
                    attempt = attempts.get(work_id, 0) + 1
            else:
                held.pop(work_id, None)
                if event == DONE:
                    completed.add(work_id)
                if attempt is None:
                    attempt = attempts.get(work_id, 0)
            if attempt > 0:
                attempts[work_id] = attempt
            else:
                attempts.pop(work_id, None)
        self.records += len(rows)
        self.legacy += legacy

    def leases(self) -> dict[str, LeaseRecord]:
        """The leases no later record ended, by work ID, in the order they were granted."""
        return {w: _lease_record(fields) for w, fields in self.held.items()}


def _lease_record(fields: tuple[Any, ...]) -> LeaseRecord:
    """The ``LeaseRecord`` of a held lease's fields (see ``_Replay.held``). A lease row always
    has its worker and updated (``parse_line`` refuses one without), and a lease the bulk reader
    took its worker (it declines ``null``)."""
    if len(fields) == 3:
        worker, stamp, generation = fields
        return LeaseRecord(int(worker), float(stamp), UNIX, bulk_generation(generation))
    return LeaseRecord(fields[3], fields[4], fields[5], fields[8])


def _refuse_non_journal(path: Path, data: bytes, scan: Scan) -> None:
    """``NotAJournal`` when ``data`` (scanned as ``scan``) is not empty, has no good record and
    cannot be a torn first write; nothing was written."""
    if data and scan.good_end == 0 and not scan.corrupt and not could_be_torn_first_write(data):
        first = scan.bad[0]
        raise NotAJournal(
            f"{path} is not a work lease journal: its {len(data)} bytes hold no good record "
            f"(line {first.line}: {first.reason}); it was left as it was"
        )


def _append_durably(path: Path, data: bytes) -> None:
    """Append ``data`` to ``path`` (created 0600, a link refused) and fsync it (and its
    directory if new)."""
    try:
        fd = open_nofollow(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND)
        created = True
    except FileExistsError:
        fd = open_nofollow(path, os.O_WRONLY | os.O_APPEND)
        created = False
    try:
        _write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)


def lock_path(path: Path) -> Path:
    """The side file whose ``flock`` marks the one writer of the journal at ``path``."""
    return path.with_name(path.name + ".lock")


def _open_writable(path: Path) -> int:
    """The existing journal at ``path`` opened for appending by its writer (a link refused);
    ``JournalReadOnly`` when the file grants no write permission, even to root."""
    try:
        fd = open_nofollow(path, os.O_RDWR | os.O_APPEND)
    except PermissionError as err:
        raise JournalReadOnly(
            f"journal {path} cannot be opened for writing ({err.strerror}); it was left as it was"
        ) from None
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if not mode & 0o222:
        os.close(fd)
        raise JournalReadOnly(
            f"journal {path} is read-only (mode {mode:04o}); it was left as it was "
            f"(make it writable, e.g. chmod u+w, to let leasefence write to it)"
        )
    return fd


def _take_lock(path: Path) -> int:
    fd = open_nofollow(lock_path(path), os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as err:
        os.close(fd)
        if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise JournalLocked(
                f"journal {path} is locked by another writer (lock file {lock_path(path)})"
            ) from None
        raise
    return fd


class WorkLeaseJournal:
    """F314's work lease journal: admission, owner fencing, Unix clock domain, crash safety.

    ``WorkLeaseJournal(path, *, clock=time.time, sync="always", readonly=False, create=True)``
    opens (or creates, 0600) the JSONL journal, takes the writer lock and replays it. ``clock``
    is any zero-argument callable returning Unix seconds. Not thread-safe: one thread, one
    writer. A forked child shares the lock; do not write from both.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        sync: Sync = "always",
        readonly: bool = False,
        create: bool = True,
    ) -> None:
        if sync not in ("always", "group"):
            raise ValueError(f"sync must be 'always' or 'group', got {sync!r}")
        self.path = Path(path)
        self.readonly = readonly
        self.sync: Sync = sync
        self._clock = clock
        self._leases: dict[str, LeaseRecord] = {}
        self._completed: set[str] = set()
        self._attempts: dict[str, int] = {}
        self._records = 0
        self._legacy_records = 0
        self._pending: list[bytes] = []
        self._pending_apply: list[Callable[[], None]] = []
        self._failure: str | None = None
        self._lock_fd: int | None = None
        self._fd: int | None = None
        self._scan = Scan()
        if not create and not readonly and not self.path.exists():
            raise FileNotFoundError(errno.ENOENT, "no such journal", str(self.path))
        if readonly:
            self._fd = open_nofollow(self.path, os.O_RDONLY)
        else:
            self._lock_fd = _take_lock(self.path)
        try:
            if not readonly:
                self._fd = self._open_for_append(create)
            assert self._fd is not None
            with _gc_paused():
                data = _read_all(self._fd)
                replay = _Replay()
                scan, rows = _scan(data, replay.columns)
                _refuse_non_journal(self.path, data, scan)
                if scan.corrupt:
                    first = scan.bad[0]
                    raise JournalCorrupt(
                        f"journal {self.path} is corrupt: line {first.line} ({first.reason}) is "
                        f"followed by good records; the file was left as it was "
                        f"(run `leasefence journal repair {self.path}`)"
                    )
                replay.rows(rows)
                self._leases = replay.leases()
                self._completed = replay.completed
                self._attempts = replay.attempts
                self._records = replay.records
                self._legacy_records = replay.legacy
                self._scan = scan
                # Freed while the collector is paused: the first collection after the pause
                # walks every container made during it that is still alive, and a row per
                # record would make that a walk of the whole journal (a sixth of an open).
                del rows, replay
        except BaseException:
            self._release()
            raise

    @classmethod
    def open_readonly(
        cls, path: str | os.PathLike[str], *, clock: Callable[[], float] = time.time
    ) -> WorkLeaseJournal:
        """Open an existing journal for inspection: no lock, no repair, every write refused."""
        return cls(path, clock=clock, readonly=True)

    # -- opening and replay ------------------------------------------------------------------

    def _open_for_append(self, create: bool) -> int:
        if not create:
            return _open_writable(self.path)
        try:
            fd = open_nofollow(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            return _open_writable(self.path)
        try:
            os.fsync(fd)
            _fsync_dir(self.path.parent)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # -- views -------------------------------------------------------------------------------

    @property
    def leases(self) -> Mapping[str, LeaseRecord]:
        """Active leases by work ID (a snapshot)."""
        self._check_usable()
        return MappingProxyType(dict(self._leases))

    @property
    def completed(self) -> frozenset[str]:
        """Completed work IDs."""
        self._check_usable()
        return frozenset(self._completed)

    @property
    def attempts(self) -> Mapping[str, int]:
        """Leases ever granted per work ID (IDs never leased are absent), a snapshot."""
        self._check_usable()
        return MappingProxyType(dict(self._attempts))

    @property
    def record_count(self) -> int:
        """Records in the journal: good lines in the file plus, in group mode, pending ones."""
        self._check_usable()
        return self._records

    @property
    def legacy_record_count(self) -> int:
        """Records in F314's original format (no checksum) among ``record_count``."""
        self._check_usable()
        return self._legacy_records

    @property
    def torn_tail(self) -> bytes:
        """The bytes of a torn tail found on open and not yet cut off (empty when none)."""
        return b"".join(bad.data for bad in self.torn_lines)

    @property
    def torn_lines(self) -> tuple[BadLine, ...]:
        """The bad lines of that torn tail, each with its line number and reason."""
        self._check_usable()
        return () if self._scan.torn_bytes == 0 else tuple(self._scan.bad)

    @property
    def pending(self) -> int:
        """Records decided but not yet durable (group mode only; always 0 otherwise)."""
        self._check_usable()
        return len(self._pending)

    # -- actions -----------------------------------------------------------------------------

    def lease(self, work_id: str, worker: int, generation: Generation | None = None) -> bool:
        """LeaseWork(w, r). Grants ``work_id`` to ``worker`` unless it is completed or leased.

        A refused lease returns False and changes nothing, on disk or in memory (L1, L3). A
        granted one appends a ``lease`` record stamped with ``clock()`` and ``"clock": "unix"``
        (L4), counts an attempt, and returns True once the record is durable. ``generation``
        (issue 12) is the dispatch generation ``(epoch, counter)``: the owner token is then
        ``(worker, generation)`` and the record carries ``"generation": [epoch, counter]``;
        None (the default) keeps F314's rank-only owner and record format.
        """
        self._check_writable()
        if not plain_token(work_id, worker, generation):
            validate_work_id(work_id)
            _check_worker(worker)
            _check_generation(generation)
        if work_id in self._completed or work_id in self._leases:
            return False
        now = self._now()
        attempt = self._attempts.get(work_id, 0) + 1
        line = self._line(LEASE, work_id, worker, now, attempt, generation)
        self._commit_records([line], None)  # the change after it
        self._leases[work_id] = LeaseRecord(worker, now, UNIX, generation)
        self._attempts[work_id] = attempt
        return True

    def complete(
        self, work_id: str, worker: int | None = None, generation: Generation | None = None
    ) -> bool:
        """CompleteWork(w, r). With ``worker``: only the owner of the active lease completes it,
        and the token ``(worker, generation)`` must be exactly the lease's owner token (a
        generation None matches only a rank-only lease, and the other way round).

        Marks the ID completed, drops its lease and appends a ``done`` record. Without
        ``worker`` (offline maintenance, F314's old behaviour) any ID not yet completed is
        completed. Refused calls return False and write nothing (L2).
        """
        self._check_writable()
        if not plain_token(work_id, worker, generation):
            validate_work_id(work_id)
            if worker is not None:
                _check_worker(worker)
            _check_generation(generation)
        if work_id in self._completed:
            return False
        held = self._leases.get(work_id)
        if worker is not None and (held is None or not _owns(held, worker, generation)):
            return False
        line = self._end_line(DONE, work_id, held, self._now())
        self._commit_records([line], None)  # the change after it
        self._leases.pop(work_id, None)
        self._completed.add(work_id)
        return True

    def abandon(
        self, work_id: str, worker: int | None = None, generation: Generation | None = None
    ) -> bool:
        """AbandonWork(w, r). Drops an active lease; with ``worker``, only its owner may (the
        token ``(worker, generation)`` exactly, as for ``complete``).

        Appends a ``reclaim`` record; the work may be leased again. Refused calls (no active
        lease, or another owner) return False and write nothing (L2).
        """
        self._check_writable()
        validate_work_id(work_id)
        if worker is not None:
            _check_worker(worker)
        _check_generation(generation)
        held = self._leases.get(work_id)
        if held is None or (worker is not None and not _owns(held, worker, generation)):
            return False
        line = self._end_line(RECLAIM, work_id, held, self._now())

        def apply() -> None:
            self._leases.pop(work_id, None)

        self._commit_records([line], apply)
        return True

    def recover(self, lease_ttl: float) -> list[str]:
        """RecoverWork. Reclaims every active lease ``rules.reclaimable`` selects; sorted IDs.

        In order: (1) ``lease_ttl == 0`` reclaims every lease; (2) a legacy lease (no
        ``"clock": "unix"``) is reclaimed whatever its value (L5); (3) a Unix lease dated more
        than ``lease_ttl`` in the future is reclaimed (the wall clock was stepped back), so no
        lease stays stuck longer than twice the TTL of real time; (4) otherwise a Unix lease
        is reclaimed when ``now - updated >= lease_ttl``. One ``reclaim`` record per ID, all
        written and fsynced together. A negative, NaN or infinite ttl raises ``InvalidTtl``.
        """
        self._check_writable()
        ttl = check_ttl(lease_ttl)
        now = self._now()
        gone = sorted(
            w for w, x in self._leases.items() if reclaimable(x.updated, x.clock, now, ttl)
        )
        if not gone:
            return []
        lines = [self._end_line(RECLAIM, w, self._leases[w], now) for w in gone]

        def apply() -> None:
            for w in gone:
                self._leases.pop(w, None)

        self._commit_records(lines, apply)
        return gone

    def compact(self) -> None:
        """CompactJournal. Rewrites the file with one record per work ID it knows.

        A ``done`` record per completed ID, a ``lease`` record per active lease keeping its own
        timestamp and clock tag (a legacy lease stays untagged, never relabelled as Unix), and
        a ``reclaim`` record per other ID that was ever leased, so that attempts survive. The
        abstract state is unchanged. A torn tail is first saved to ``<journal>.broken``. The
        new file is written beside the journal, fsynced, renamed over it and the directory
        fsynced: a crash leaves the old journal or the new one.
        """
        self._check_writable()
        self.commit()
        now = self._now()
        lines = []
        for w in sorted(self._completed | self._leases.keys() | self._attempts.keys()):
            held = self._leases.get(w)
            if w in self._completed:
                lines.append(self._end_line(DONE, w, None, now))
            elif held is not None:
                body: dict[str, Any] = {
                    "event": LEASE,
                    "work_id": w,
                    "worker": held.owner,
                    "updated": held.updated,
                }
                if held.clock is not None:
                    body["clock"] = held.clock
                body["attempt"] = self._attempts.get(w, 0)
                if held.generation is not None:
                    body["generation"] = list(held.generation)
                lines.append(self._encode(body))
            else:
                lines.append(self._end_line(RECLAIM, w, None, now))
        try:
            self._save_torn_tail()
            _replace_durably(self.path, b"".join(lines))
            assert self._fd is not None
            os.close(self._fd)
            self._fd = None
            self._fd = open_nofollow(self.path, os.O_RDWR | os.O_APPEND)
        except OSError as err:
            self._fail("compaction", err)
        self._records = len(lines)
        self._legacy_records = 0
        self._scan = Scan(size=sum(map(len, lines)), good_end=sum(map(len, lines)))

    def commit(self) -> int:
        """Write and fsync the records pending in group mode; returns how many became durable.

        In group mode a True from ``lease``/``complete``/``abandon`` (and a list from
        ``recover``) is an admission decision; it is acknowledged only when ``commit()``
        returns. With ``sync="always"`` there is never anything pending.
        """
        self._check_usable()
        if not self._pending:
            return 0
        lines, self._pending = self._pending, []
        self._write(encode_batch(lines))
        return len(lines)

    def close(self) -> None:
        """Commit pending records (group mode), then release the lock and the file."""
        try:
            if self._failure is None and self._fd is not None and self._pending:
                self.commit()
        finally:
            self._release()
            if self._failure is None:
                self._failure = "closed"

    def __enter__(self) -> WorkLeaseJournal:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        mode = "readonly" if self.readonly else f"sync={self.sync}"
        return f"WorkLeaseJournal({str(self.path)!r}, {mode})"

    # -- internals ---------------------------------------------------------------------------

    def _now(self) -> float:
        """The clock's reading as the journal stamps it (``unix_stamp``: to 10 µs), refused
        when it is not a finite number within ``MAX_TIMESTAMP`` of 0."""
        value = self._clock()
        reading = _number(value)
        if reading is None:
            raise ValueError(
                f"clock() must return a finite number of Unix seconds within {MAX_TIMESTAMP:.0f} "
                f"of 0, got {value!r:.80}"
            )
        return unix_stamp(reading)

    def _end_line(self, event: str, work_id: str, held: LeaseRecord | None, now: float) -> bytes:
        """The ``done`` or ``reclaim`` record ending ``held`` (None: no lease was active); it
        carries the owner token of the lease that ended."""
        worker, generation = (None, None) if held is None else (held.owner, held.generation)
        return self._line(event, work_id, worker, now, self._attempts.get(work_id, 0), generation)

    def _line(
        self,
        event: str,
        work_id: str,
        worker: int | None,
        updated: float,
        attempt: int,
        generation: Generation | None,
    ) -> bytes:
        """The line of the record ``{"event", "work_id", "worker", "updated", "clock": "unix",
        "attempt"[, "generation"]}``: built straight from its values (``owned_record``) when
        they are of the types and ranges it knows, else from the record's dict (``_encode``)."""
        line = owned_record(event, work_id, worker, updated, attempt, generation)
        if line is not None:
            return line
        body: dict[str, Any] = {
            "event": event,
            "work_id": work_id,
            "worker": worker,
            "updated": updated,
            "clock": UNIX,
            "attempt": attempt,
        }
        if generation is not None:
            body["generation"] = list(generation)
        return self._encode(body)

    def _encode(self, body: Mapping[str, Any]) -> bytes:
        """The record's line, refused (nothing written) when it is over the size limit or a
        number is out of range: the journal writes only what its reader accepts."""
        try:
            line = encode_record(body)
        except ValueError as err:  # e.g. an integer too long for json.dumps
            raise RecordTooLarge(
                f"record for journal {self.path} cannot be encoded ({err}): it is over the "
                f"{MAX_RECORD_BYTES}-byte limit"
            ) from None
        if len(line) > MAX_RECORD_BYTES:
            raise RecordTooLarge(
                f"record for journal {self.path} is {len(line)} bytes, over the "
                f"{MAX_RECORD_BYTES}-byte limit"
            )
        if (problem := _range_problem(body.get("worker"), body.get("attempt"))) is not None:
            raise RecordOutOfRange(f"record for journal {self.path} refused: {problem}")
        return line

    def _check_usable(self) -> None:
        if self._failure == "closed":
            raise JournalUnusable(f"journal {self.path} is closed")
        if self._failure is not None:
            raise JournalUnusable(
                f"journal {self.path} is unusable since {self._failure}; reopen it to continue"
            )

    def _check_writable(self) -> None:
        self._check_usable()
        if self.readonly:
            raise JournalReadOnly(f"journal {self.path} is open read-only; writes are refused")

    def _commit_records(self, lines: list[bytes], apply: Callable[[], None] | None) -> None:
        """Write (or, in group mode, queue) ``lines`` from ``_encode``, then ``apply`` (None: the
        caller makes the change itself once this returns, as ``lease`` and ``complete`` do, one
        of each a task: no closure made for each)."""
        if self.sync == "group":
            self._pending.extend(lines)
        else:
            self._write(encode_batch(lines))
        if apply is not None:
            apply()
        self._records += len(lines)

    def _write(self, data: bytes) -> None:
        """Append ``data`` (one line) whole and fsync; any failure makes this object unusable.

        A last record without its newline first gets the newline, fsynced on its own: written
        together with ``data``, a crash could keep the sectors of ``data`` but not the newline's
        (zeros), and the record, already replayed, would be cut with them as a torn tail."""
        assert self._fd is not None
        try:
            self._save_torn_tail()
            if self._scan.unterminated:
                _write_all(self._fd, b"\n")
                os.fsync(self._fd)
                self._scan.unterminated = False
            _write_all(self._fd, data)
            os.fsync(self._fd)
        except OSError as err:
            self._fail("a failed write or fsync", err)

    def _save_torn_tail(self) -> None:
        """Append a torn tail to ``<journal>.broken`` durably, then cut it off the journal."""
        cut = self._scan.torn_bytes
        if cut == 0:
            return
        assert self._fd is not None
        tail = b"".join(bad.data for bad in self._scan.bad)
        _append_durably(self.path.with_name(self.path.name + ".broken"), tail)
        os.ftruncate(self._fd, self._scan.good_end)
        os.fsync(self._fd)
        end = self._scan.good_end
        self._scan = Scan(size=end, good_end=end, unterminated=self._scan.unterminated)

    def _fail(self, what: str, err: OSError) -> NoReturn:
        self._failure = f"{what} ({err})"
        raise JournalUnusable(
            f"journal {self.path}: {what} failed: {err}; this object refuses every further "
            f"call (reopen the journal to continue from what is on disk)"
        ) from err

    def _release(self) -> None:
        for name in ("_fd", "_lock_fd"):
            fd = getattr(self, name)
            if fd is not None:
                setattr(self, name, None)
                with contextlib.suppress(OSError):
                    os.close(fd)  # closing the lock file releases the flock


@dataclass(frozen=True)
class RepairResult:
    """What ``repair_journal`` did: records kept, bad lines moved, and where they went."""

    kept: int
    quarantined: int
    quarantine: Path | None


def quarantine_path(path: Path) -> Path:
    """The file ``repair_journal`` appends bad lines of ``path`` to."""
    return path.with_name(path.name + ".quarantine")


def repair_journal(path: str | os.PathLike[str]) -> RepairResult:
    """Keep every good record of the journal at ``path`` and move its bad lines aside.

    Takes the writer lock (``JournalLocked`` if a writer holds it). Bad lines are appended,
    with their line numbers, to ``<journal>.quarantine`` (fsynced) before the journal is
    atomically replaced by its good lines, byte for byte. Nothing is written when every line
    is good.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(errno.ENOENT, "no such journal", str(p))
    lock_fd = _take_lock(p)
    try:
        fd = _open_writable(p)
        try:
            data = _read_all(fd)
        finally:
            os.close(fd)
        scan = scan_bytes(data)
        _refuse_non_journal(p, data, scan)
        if not scan.bad:
            return RepairResult(len(scan.records), 0, None)
        kept = _good_bytes(data, scan)
        if scan.unterminated:
            kept += b"\n"
        report = b"".join(
            f"# {p} line {bad.line}: {bad.reason}\n".encode()
            + bad.data
            + (b"" if bad.data.endswith(b"\n") else b"\n")
            for bad in scan.bad
        )
        target = quarantine_path(p)
        _append_durably(target, report)
        _replace_durably(p, kept)
        return RepairResult(len(scan.records), len(scan.bad), target)
    finally:
        os.close(lock_fd)


def _good_bytes(data: bytes, scan: Scan) -> bytes:
    bad_spans = [(bad.offset, bad.offset + len(bad.data)) for bad in scan.bad]
    out: list[bytes] = []
    pos = 0
    for start, stop in bad_spans:
        out.append(data[pos:start])
        pos = stop
    out.append(data[pos:])
    return b"".join(out)


__all__ = [
    "EVENTS",
    "MAX_ATTEMPT",
    "MAX_RECORD_BYTES",
    "MAX_TIMESTAMP",
    "MAX_WORKER",
    "BadLine",
    "LeaseRecord",
    "Record",
    "RepairResult",
    "Scan",
    "WorkLeaseJournal",
    "could_be_torn_first_write",
    "encode_batch",
    "encode_record",
    "legacy_lease_line",
    "lock_path",
    "parse_line",
    "quarantine_path",
    "record_crc",
    "repair_journal",
    "scan_bytes",
    "scan_file",
    "validate_work_id",
]
