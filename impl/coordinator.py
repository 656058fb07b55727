"""The state-shard coordinator: one owner per state task, fenced completion, snapshots across epochs.

Every method that changes state starts its docstring with the TLA+ action it implements; the
pure twin of each is the function of the same action in ``leasefence.model.coordinator``.

Ownership
    A lease record holds the owner (MPI rank), the Unix time it was taken (``updated``), the
    coordinator epoch it was taken in and, under generation fencing (issue 12, pipelined
    dispatch), the owner's dispatch ``generation`` ``(epoch, counter)``: the owner token is then
    ``(owner, generation)`` and every fenced call must present exactly that token (a lease
    without a generation is a rank-only owner, F314's protocol, and only a call without one
    matches it). It is *active* only while its epoch is the coordinator's
    current epoch; a lease of an older epoch is *stale* and grants no ownership (L6). ``lease``
    refuses while the task has an active lease (L1) and a refusal changes nothing (L3); a stale
    lease is replaced. ``complete``, ``abandon`` and ``discard`` act only for the owner of the
    active lease (L2); every refusal returns ``False`` and changes nothing, in memory or on disk.

Statistics (per task, and summed by ``totals()``)
    * ``completions``: +1 on each accepted ``complete``.
    * ``failures``: +1 on each accepted ``abandon``.
    * ``reward``: + ``reward`` on each accepted ``complete``.
    * ``cost``: + ``cost`` on each accepted ``complete`` and each accepted ``abandon``.
    One booking's ``reward`` or ``cost`` must be finite with ``|amount| <= MAX_AMOUNT`` (1e12;
    else ``InvalidArgument``, nothing changed), so no sum of bookings reaches infinity (it would
    take 1e296 of them) and a snapshot never holds one (JSON has no infinity: a save would fail).
    Nothing else moves them: not ``lease``, not ``discard`` (the work was withdrawn, not tried),
    not ``recover_expired``, not a refused call, not a restart. They survive restarts (L6) and
    accumulate over all the leases a task ever had. A task is *known* from its first granted
    lease on (in this coordinator or in a snapshot it loaded): from then on ``stats(task)``
    answers, with zeros until something is booked; for any other task it raises
    ``UnknownTask``. (The model keeps an entry only once a completion or failure is booked, so
    its statistics map is ours restricted to tasks with ``completions + failures > 0``.)

The snapshot file: a checkpoint, then an append-only log (docs/coordinator-format.md; the bytes
are ``leasefence.impl.coordfile``'s). The checkpoint (schema 1) is one JSON object, the whole
state, exactly what every ``save()`` wrote before issue 19::

    {"schema": 1, "clock": "unix", "epoch": 3,
     "leases": {"<task>": {"owner": 2, "updated": 1764490000.25, "epoch": 3,
                           "generation": [3, 17]}},
     "stats":  {"<task>": {"completions": 1, "failures": 0, "reward": 1.5, "cost": 2.0}}}

    ``generation`` is present only on leases taken with one (issue 12); a snapshot without it
    is exactly F314's schema 1, and is read as rank-only owners.

    After it, one checksummed line per change of the checkpoint's epoch: ``lease`` (a lease
    taken), ``free`` (a lease released, with the task's statistics after it) or ``void`` (leases
    recovered). ``commit()`` appends the changes made since the last one with one write and one
    fsync (group commit); ``save()`` writes a checkpoint: a temporary file in the same directory
    (mode 0600), fsynced, ``os.replace``-d over the file, directory fsynced, so a crash leaves
    the whole old file or the whole new one (a left-over ``.tmp`` file is ignored). A commit
    writes a checkpoint instead when the file is not yet a checkpoint of this epoch (the first
    write of every epoch) or when the log has grown past ``CHECKPOINT_MIN`` records and past
    the checkpoint's own entries, so no change rewrites every task and checkpoints cost O(1)
    per change. Loading applies the records to the checkpoint (a torn tail of bad lines after
    the last good record is ignored; a bad line before a good one is ``SnapshotError``), then
    starts epoch ``saved epoch + 1``, keeps every statistic, and keeps every
    lease with its owner and old epoch but its time zeroed (``updated = 0.0``): no old lease
    grants ownership and the first ``recover_expired()`` voids them all (L6). This is exactly
    the model's ``restart_coordinator``.

Legacy snapshot (written before F314): a JSON object with no ``"schema"`` key and only these
keys, all optional: ``"clock"`` (any string but ``"unix"``), ``"epoch"`` (int >= 0, default 0),
``"leases"`` (task -> ``{"worker" or "owner": int, "updated": number, "clock": str,
"epoch": int}``, only the rank required), ``"stats"`` (task -> any of the four statistics,
missing ones 0). Its times are monotonic values from another boot: they are dropped (every
lease loads with ``updated = 0.0`` and the legacy epoch, so it is stale), never compared with
the Unix clock and never added to a statistic. The first ``save()`` after loading one first
copies the original bytes aside to ``<name>.legacy`` (or ``<name>.legacy.N``).

A file that is not one of these two formats raises ``SnapshotError`` naming the path and what is
wrong, and is left exactly as it was (no coordinator object exists to overwrite it).

Autosave (default on): with a snapshot path, the constructor writes a checkpoint (so the new
epoch is durable) and every *successful* mutation commits (its one record, fsynced) before it
returns; refusals never write. With ``autosave=False`` only explicit ``commit()`` and ``save()``
calls write. A mutation whose save fails is undone
in memory before the error propagates, so memory never differs from the last snapshot written.
If a write fails with an ``OSError`` (a failed write, fsync or replace), ``CoordinatorError`` is
raised and this object refuses every further mutation and save, as the journal does: an fsync
error is fatal, not retried.

Not thread-safe and not locked against a second process using the same snapshot path: the
master owns one coordinator.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from json.encoder import encode_basestring_ascii as _ascii
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import Final, NoReturn

from leasefence.impl.coordfile import (
    SCHEMA,
    EntryCache,
    append_records,
    batch_record,
    decode,
    encode_checkpoint,
    free_record,
    keep_legacy_copy,
    lease_record,
    read_file,
    void_record,
)
from leasefence.impl.coordvalues import StateLease, Stats
from leasefence.impl.durable import replace_durably as _atomic_write
from leasefence.impl.errors import CoordinatorError, InvalidArgument, UnknownTask
from leasefence.impl.generation import (
    Generation,
    plain_generation,
    valid_generation,
)
from leasefence.impl.rules import UNIX, check_ttl, reclaimable

__all__ = [
    "MAX_AMOUNT",
    "SCHEMA",
    "TASK_FIELDS",
    "StateLease",
    "StateShardCoordinator",
    "Stats",
    "state_task_id",
]

#: Records appended after a checkpoint before the next one is written: at least this many, and
#: at least as many as the entries the checkpoint holds, so that checkpoints cost O(1) per change.
CHECKPOINT_MIN: Final = 1024

#: The largest reward or cost one booking may carry, in absolute value (module doc).
MAX_AMOUNT: Final = 1e12

#: The six fields that identify a state task, in signature order.
TASK_FIELDS: Final = ("input", "focus", "target", "action", "schedule", "continuation")


def state_task_id(
    input: object,
    focus: object,
    target: object,
    action: object,
    schedule: object,
    continuation: object,
) -> str:
    """The state task of an exact-work payload: SHA-256 hex of its six fields as canonical JSON.

    Canonical JSON: an object of the six field names, keys sorted, no spaces, ASCII escapes.
    Equal JSON means equal ID (a tuple and a list with the same items are the same; ``1`` and
    ``1.0`` are not). Each field must be plain JSON: None, bool, int, finite float, str, and
    lists, tuples and str-keyed dicts of those; anything else raises ``InvalidArgument``.
    """
    if (
        type(input) is str
        and type(focus) is str
        and type(target) is str
        and type(action) is str
        and type(schedule) is str
        and type(continuation) is str
    ):
        # Six plain strings (every task of the catalogue): the text ``json.dumps`` writes, its
        # keys in sorted order, each value as its ``ensure_ascii`` string (a third of the cost of
        # making a catalogue; tests/unit/test_coordinator.py compares the two)
        text = (
            f'{{"action":{_ascii(action)},"continuation":{_ascii(continuation)},'
            f'"focus":{_ascii(focus)},"input":{_ascii(input)},"schedule":{_ascii(schedule)},'
            f'"target":{_ascii(target)}}}'
        )
        return hashlib.sha256(text.encode("ascii")).hexdigest()
    fields = dict(
        zip(TASK_FIELDS, (input, focus, target, action, schedule, continuation), strict=True)
    )
    for name, value in fields.items():
        _check_plain_json(value, name, set())
    text = json.dumps(fields, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _check_plain_json(value: object, where: str, open_containers: set[int]) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidArgument(f"state task field {where} is not finite: {value!r}")
        return
    if isinstance(value, list | tuple | dict):
        if id(value) in open_containers:
            raise InvalidArgument(f"state task field {where} contains itself")
        open_containers.add(id(value))
        if isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    raise InvalidArgument(
                        f"state task field {where} has a key that is not a str: {key!r}"
                    )
                _check_plain_json(item, f"{where}[{key!r}]", open_containers)
        else:
            for i, item in enumerate(value):
                _check_plain_json(item, f"{where}[{i}]", open_containers)
        open_containers.discard(id(value))
        return
    raise InvalidArgument(
        f"state task field {where} is not plain JSON: a {type(value).__name__}, {value!r:.80}"
    )


def _check_task(task_id: object) -> str:
    if not isinstance(task_id, str) or not task_id:
        raise InvalidArgument(f"a state task ID must be a non-empty str, got {task_id!r}")
    return task_id


def _check_worker(worker: object) -> int:
    if type(worker) is int:  # the common case first
        return worker
    if isinstance(worker, bool) or not isinstance(worker, int):
        raise InvalidArgument(f"a worker rank must be an int, got {worker!r}")
    return worker


def _check_amount(name: str, value: object) -> float:
    if type(value) is float and -MAX_AMOUNT <= value <= MAX_AMOUNT:  # finite: NaN fails too
        return value
    if not isinstance(value, bool) and isinstance(value, int | float):
        try:
            amount = float(value)
        except OverflowError:
            amount = math.inf
        if math.isfinite(amount) and abs(amount) <= MAX_AMOUNT:
            return amount
    raise InvalidArgument(
        f"{name} must be a finite number in -{MAX_AMOUNT:g}..{MAX_AMOUNT:g}, got {value!r:.80}"
    )


class StateShardCoordinator:
    """Leases on abstract state tasks, fenced by owner rank and coordinator epoch."""

    def __init__(
        self,
        snapshot_path: str | os.PathLike[str] | None = None,
        *,
        clock: Callable[[], float] = time.time,
        autosave: object = True,
    ) -> None:
        """A fresh coordinator (epoch 1), or the next epoch of the snapshot at ``snapshot_path``.

        RestartCoordinator when the snapshot exists. Raises ``SnapshotError`` (and touches
        nothing) when it exists but is not a valid snapshot; see the module doc for the format.
        """
        self._path = None if snapshot_path is None else Path(snapshot_path)
        self._clock = clock
        self._autosave = bool(autosave)  # (object: any truth value, compiled or not)
        self._failure: str | None = None
        self._legacy_original: bytes | None = None
        self._epoch = 1
        self._leases: dict[str, StateLease] = {}
        self._stats: dict[str, Stats] = {}
        # The log (module doc): records not yet written; where the good content of the file ends
        # (None: the file is not a checkpoint of this epoch, so the next commit checkpoints);
        # records since the checkpoint and the checkpoint's entries.
        self._pending: list[bytes] = []
        self._entries: EntryCache = {}  # statistics entries of the last checkpoint, as text
        self._good_end: int | None = None
        self._logged = 0
        self._weight = 0
        if self._path is not None:
            raw = read_file(self._path)
            if raw is not None:
                loaded = decode(self._path, raw)
                self._epoch = loaded.epoch + 1
                self._leases = {
                    t: StateLease(
                        owner=x.owner, updated=0.0, epoch=x.epoch, generation=x.generation
                    )
                    for t, x in loaded.leases.items()
                }
                self._stats = dict(loaded.stats)
                for t in self._leases:
                    self._stats.setdefault(t, Stats())
                if loaded.legacy:
                    self._legacy_original = raw
            self._persist()

    # -- queries -------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        """The current coordinator epoch: 1 when fresh, the snapshot's epoch + 1 when loaded."""
        return self._epoch

    @property
    def snapshot_path(self) -> Path | None:
        """Where ``save()`` writes, or None."""
        return self._path

    @property
    def leases(self) -> Mapping[str, StateLease]:
        """Every lease record, active or stale, by task (a live read-only view)."""
        return MappingProxyType(self._leases)

    @property
    def statistics(self) -> Mapping[str, Stats]:
        """The statistics of every known task (a live read-only view); see the module doc."""
        return MappingProxyType(self._stats)

    def active_owner(self, task_id: object) -> int | None:
        """The owner of the active lease of ``task_id``, or None (no lease, or a stale one; a
        ``task_id`` that is not a str names no task)."""
        lease = self._leases.get(task_id) if isinstance(task_id, str) else None
        return None if lease is None or lease.epoch != self._epoch else lease.owner

    def stats(self, task_id: object) -> Stats:
        """The statistics of ``task_id``; ``UnknownTask`` if it was never leased (module doc),
        or is not a str."""
        stats = self._stats.get(task_id) if isinstance(task_id, str) else None
        if stats is None:
            raise UnknownTask(
                f"state task {task_id!r:.80} was never leased by this coordinator "
                "or by one whose snapshot it loaded"
            )
        return stats

    def totals(self) -> Stats:
        """The statistics summed over every known task."""
        total = Stats()
        for s in self._stats.values():
            total = total.plus(s)
        return total

    # -- actions -------------------------------------------------------------------------------

    def lease(self, task_id: object, worker: object, generation: object = None) -> bool:
        """LeaseState(s, r). Succeeds when ``task_id`` has no active lease (L1).

        Records ``worker`` (and ``generation``: the owner token is ``(worker, generation)``) as
        owner with the clock's Unix time and the current epoch, replacing a stale lease. A
        refusal returns False and changes nothing, not even the file (L3).
        """
        task_id, worker, generation = _check_token(task_id, worker, generation)
        if self._failure is not None:
            self._check_usable()
        leases = self._leases
        held = leases.get(task_id)
        if held is not None and held.epoch == self._epoch:
            return False
        lease = StateLease(worker, self._now(), self._epoch, generation)
        # Before any change: if it raises, none was made (none without a file to write it to).
        record = None if self._path is None else lease_record(task_id, lease)
        if self._autosave and record is not None:  # saved as made: undone if saving fails
            with self._change((task_id,)):
                leases[task_id] = lease
                if task_id not in self._stats:
                    self._stats[task_id] = Stats()
                self._log(record)
            return True
        # Nothing after the record can fail: the change alone (issue 19: a context manager
        # on every decision cost a tenth of it).
        leases[task_id] = lease
        if task_id not in self._stats:
            self._stats[task_id] = Stats()
        if record is not None:
            self._pending.append(record)
        return True

    def complete(
        self,
        task_id: object,
        worker: object,
        *,
        reward: object = 0.0,
        cost: object = 0.0,
        generation: object = None,
    ) -> bool:
        """CompleteState(s, r). Succeeds when the token ``(worker, generation)`` owns the active
        lease of ``task_id`` exactly (L2).

        Frees the task and books one completion, ``reward`` and ``cost``.
        """
        if (
            type(reward) is float
            and type(cost) is float
            and 0.0 <= reward <= MAX_AMOUNT
            and 0.0 <= cost <= MAX_AMOUNT
        ):  # (every result's amounts: no call to check them)
            return self._release(task_id, worker, (1, 0, reward, cost), generation)
        booked = (1, 0, _check_amount("reward", reward), _check_amount("cost", cost))
        return self._release(task_id, worker, booked, generation)

    def abandon(
        self,
        task_id: object,
        worker: object,
        *,
        cost: object = 0.0,
        generation: object = None,
    ) -> bool:
        """AbandonState(s, r). Succeeds when the token ``(worker, generation)`` owns the active
        lease of ``task_id`` exactly (L2).

        Frees the task and books one failure and ``cost``.
        """
        booked = (0, 1, 0.0, _check_amount("cost", cost))
        return self._release(task_id, worker, booked, generation)

    def discard(self, task_id: object, worker: object, generation: object = None) -> bool:
        """DiscardState(s, r). Succeeds when the token ``(worker, generation)`` owns the active
        lease of ``task_id`` exactly (L2).

        Frees the task and books nothing (the work was withdrawn, not tried).
        """
        return self._release(task_id, worker, None, generation)

    def recover_expired(self, lease_ttl: object) -> list[str]:
        """RecoverStates. Voids every stale lease and every expired active one; sorted task IDs.

        An active lease expires by ``impl.rules.reclaimable`` on the Unix clock: always when
        ``lease_ttl == 0``, when ``now - updated >= lease_ttl``, or when it is dated more than
        ``lease_ttl`` in the future. Statistics are untouched. ``InvalidTtl`` for a negative,
        NaN or infinite TTL.
        """
        ttl = check_ttl(lease_ttl)  # type: ignore[arg-type]  # (any value: it says what is wrong)
        self._check_usable()
        now = self._now()
        gone = sorted(
            t
            for t, x in self._leases.items()
            if x.epoch != self._epoch or reclaimable(x.updated, UNIX, now, ttl)
        )
        if gone:
            with self._change(gone):
                for t in gone:
                    del self._leases[t]
                self._log(None if self._path is None else void_record(gone))
        return gone

    def save(self) -> None:
        """Write a checkpoint: the whole state, atomically, replacing the file (module doc).
        ``CoordinatorError`` without a path."""
        self._check_usable()
        if self._path is None:
            raise CoordinatorError("save(): this coordinator has no snapshot path")
        data = encode_checkpoint(self._epoch, self._leases, self._stats, self._entries)
        try:
            if self._legacy_original is not None:
                keep_legacy_copy(self._path, self._legacy_original)
                self._legacy_original = None
            _atomic_write(self._path, data)
        except OSError as e:
            self._fail(f"saving the snapshot {self._path} failed: {e}", e)
        self._pending.clear()
        self._good_end = len(data)
        self._logged, self._weight = 0, len(self._leases) + len(self._stats)

    def commit(self) -> None:
        """Make every change so far durable: its records appended with one write and one fsync
        (group commit: the changes since the last commit share them), or a checkpoint
        (``save()``) when the file is not yet a checkpoint of this epoch or the log is due for
        one (module doc). ``CoordinatorError`` without a path."""
        self._check_usable()
        if self._path is None:
            raise CoordinatorError("commit(): this coordinator has no snapshot path")
        due = self._logged + len(self._pending) > max(CHECKPOINT_MIN, self._weight)
        if self._good_end is None or due:
            self.save()
            return
        if not self._pending:
            return
        try:
            end = append_records(self._path, batch_record(self._pending), self._good_end)
        except OSError as e:
            self._fail(f"appending to the snapshot {self._path} failed: {e}", e)
        self._good_end = end
        self._logged += len(self._pending)
        self._pending.clear()

    def pending(self) -> bool:
        """Whether a change is not yet durable (``commit()`` would write)."""
        return bool(self._pending) or (self._path is not None and self._good_end is None)

    # -- internals -----------------------------------------------------------------------------

    def _release(
        self,
        task_id: object,
        worker: object,
        booked: tuple[int, int, float, float] | None,
        generation: object,
    ) -> bool:
        """Free ``task_id`` for its owner's token, booking ``(completions, failures, reward,
        cost)`` (None: nothing) on its statistics."""
        task_id, worker, generation = _check_token(task_id, worker, generation)
        if self._failure is not None:
            self._check_usable()
        lease = self._leases.get(task_id)
        if (
            lease is None
            or lease.epoch != self._epoch  # (stale: not active)
            or lease.owner != worker
            or lease.generation != generation
        ):
            return False
        stats = self._stats.get(task_id)
        if stats is None:  # (never for a leased task: ``lease`` makes its entry)
            stats = Stats()
        if booked is not None:
            completions, failures, reward, cost = booked  # (a call with ``*booked`` is generic)
            stats = stats.booked(completions, failures, reward, cost)
        record = None if self._path is None else free_record(task_id, stats)
        if self._autosave and record is not None:  # as in ``lease``
            with self._change((task_id,)):
                del self._leases[task_id]
                self._stats[task_id] = stats
                self._log(record)
            return True
        del self._leases[task_id]
        self._stats[task_id] = stats
        if record is not None:
            self._pending.append(record)
        return True

    def _now(self) -> float:
        now = float(self._clock())
        if not math.isfinite(now):
            raise CoordinatorError(f"the coordinator's clock returned {now!r}")
        return now

    def _check_usable(self) -> None:
        if self._failure is not None:
            raise CoordinatorError(f"refused: {self._failure}")

    def _persist(self) -> None:
        if self._autosave and self._path is not None:
            self.commit()

    def _log(self, record: bytes | None) -> None:
        """Keep ``record`` for the next commit (None: there is no file to write it to, so no
        record was made: it cost more than the decision, issue 19)."""
        if record is not None:
            self._pending.append(record)

    def _fail(self, failure: str, cause: OSError) -> NoReturn:
        """A write failed: refuse every further change and save (module doc)."""
        self._failure = failure
        raise CoordinatorError(
            f"{self._failure}; this coordinator refuses every further change"
        ) from cause

    def _change(self, tasks: Iterable[str]) -> _Change:
        """One mutation of the entries of ``tasks``: made in memory, then saved (autosave); if
        anything fails on the way, those entries are put back as they were (the views stay the
        same objects), and the error raised. Only the entries changed are copied, so a change
        costs the same however many tasks the coordinator knows (issue 19)."""
        return _Change(self, tuple(tasks))


class _Change:
    """``StateShardCoordinator._change``: a context manager class rather than a generator
    (a change is made on every decision; this costs a third of ``contextlib``'s)."""

    __slots__ = ("_coordinator", "_leases", "_logged", "_stats")

    def __init__(self, coordinator: StateShardCoordinator, tasks: tuple[str, ...]) -> None:
        self._coordinator = coordinator
        leases, stats = coordinator._leases, coordinator._stats
        if len(tasks) == 1:  # every decision's change (a comprehension is a call of its own)
            task = tasks[0]
            self._leases = [(task, leases.get(task))]
            self._stats = [(task, stats.get(task))]
        else:
            self._leases = [(t, leases.get(t)) for t in tasks]
            self._stats = [(t, stats.get(t)) for t in tasks]
        self._logged = len(coordinator._pending)

    def __enter__(self) -> None:
        return None

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            try:
                self._coordinator._persist()
            except BaseException:
                self._undo()
                raise
            return
        self._undo()  # and the error propagates

    def _undo(self) -> None:
        coordinator = self._coordinator
        del coordinator._pending[self._logged :]
        for t, lease in self._leases:
            if lease is None:
                coordinator._leases.pop(t, None)
            else:
                coordinator._leases[t] = lease
        for t, stat in self._stats:
            if stat is None:
                coordinator._stats.pop(t, None)
            else:
                coordinator._stats[t] = stat


def _check_token(
    task_id: object, worker: object, generation: object
) -> tuple[str, int, Generation | None]:
    """The owner token of one call, checked: ``_check_task``, ``_check_worker`` and
    ``_check_generation``, the plain values every call of the master passes tested first,
    inline (a call of each check on every decision cost more than the decision's own work,
    issue 19).

    The public calls take ``object`` and narrow here, so that the compiled coordinator
    (``leasefence.harness.compiled``) refuses a wrong argument exactly as the interpreted one
    does, with ``InvalidArgument`` naming it: a parameter typed ``int`` would take a bool as
    its integer, and one typed ``str`` would refuse an int with ``TypeError``, before the
    check ran."""
    if type(task_id) is str and task_id and type(worker) is int and plain_generation(generation):
        return task_id, worker, generation
    task, rank = _check_task(task_id), _check_worker(worker)
    return task, rank, _check_generation(generation)


def _check_generation(generation: object) -> Generation | None:
    if generation is None or (isinstance(generation, tuple) and valid_generation(generation)):
        return generation
    raise InvalidArgument(f"generation must be None or (epoch, counter), got {generation!r:.80}")
