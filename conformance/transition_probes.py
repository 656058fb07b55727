"""Refusal probes: at a state the transition replay reached, every implementation API is called
with what the model has no action for (another owner, a stale or malformed generation, an
unknown or malformed ID, an amount out of range, a malformed message), and every file is read
back hostile (torn, zero-padded, corrupted). The model's answer to each is the same: refused,
nothing changes. ``probe(machine)`` checks that answer on the live system machine: each call
returns False or raises the named error, the journal and snapshot bytes are unchanged after
each, and the mapped state is unchanged after all; the hostile reads run on copies, and each
must be refused by name or read as the file without its damage (or as the same records written
otherwise: a batch line, a longer spelling of a timestamp), the journal's bulk reader agreeing
with its reference reader on every one; and every record the journal wrote is its own line
again when encoded from its fields, by the fast encoder and by ``json``.

They reach branches no model step does (``leasefence verify``'s branch rows); they are run once
per kind of state (which IDs are leased, completed, held by the coordinator; the epoch's parity;
fencing), not at every arrival.
"""

from __future__ import annotations

import json
import math
import re
import tempfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from operator import methodcaller
from pathlib import Path
from typing import Any

from leasefence.conformance.machines.system import SystemMachine
from leasefence.conformance.refinement import persisted_coordinator, persisted_journal
from leasefence.conformance.transition_scratch import (
    journal_line,
    readers_agree,
    scratch_probes,
    unix_record,
)
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.errors import (
    JournalCorrupt,
    LeaseError,
    RankBusy,
    RecordOutOfRange,
    SnapshotError,
    UnknownTask,
    UnknownWork,
)
from leasefence.impl.journal import WorkLeaseJournal, encode_record, legacy_lease_line
from leasefence.impl.master import Master, Reservations
from leasefence.impl.transport import Envelope, deliver
from leasefence.impl.wire import Rank, Result, Tag, WorkId
from leasefence.impl.wire import encode as wire_encode
from leasefence.model.state import State

#: What a probe expects: ``False`` (refused) or the error class (classes) it must raise.
Expect = bool | type[BaseException] | tuple[type[BaseException], ...]

#: An argument of the wrong type or out of range: refused by the first check, by name.
ARGUMENT = (TypeError, ValueError)

#: A generation no dispatch of a run at the model's bounds ever has.
ALIEN = (999, 999)


@dataclass(frozen=True)
class Probe:
    """One call the model cannot express, and the refusal expected of it."""

    name: str
    call: Callable[[], object]
    expect: Expect = False


class ProbeFailure(AssertionError):
    """A probe was not refused as expected, or changed something."""


def kind(m: SystemMachine) -> tuple[object, ...]:
    """What decides which probes run and how they are answered: each work ID's journal status
    (free, leased by whom with or without a generation, completed), each task's coordinator
    lease (none, stale, active), the epoch's parity, whether the files hold legacy records."""
    s: State = m.m
    work = tuple(
        (w, None if x is None else (x.owner, bool(x.gen)), w in s.journal.completed)
        for w, x in ((w, dict(s.journal.leases).get(w)) for w, _ in m.BOUNDS.task_of)
    )
    tasks = tuple(
        sorted((t, x.owner, x.epoch == s.coordinator.epoch) for t, x in s.coordinator.leases)
    )
    busy = tuple(sorted({r for r, _ in s.active}))
    return (work, tasks, busy, s.coordinator.epoch % 2, m.legacy_start)


def _journal_probes(
    j: WorkLeaseJournal, works: list[str], ranks: tuple[int, ...]
) -> Iterator[Probe]:
    first = ranks[0]
    for w in works:
        held = j.leases.get(w)
        if held is not None or w in j.completed:
            yield Probe(f"journal.lease({w}) while leased or completed", partial(j.lease, w, first))
        if held is None:
            yield Probe(f"journal.abandon({w}) without a lease", partial(j.abandon, w, first))
            if w in j.completed:
                yield Probe(f"journal.complete({w}) completed", partial(j.complete, w))
            else:
                yield Probe(f"journal.complete({w}) without a lease", partial(j.complete, w, first))
            continue
        for r in ranks:
            if r != held.owner:
                g = held.generation
                yield Probe(f"journal.complete({w}, another rank)", partial(j.complete, w, r, g))
                yield Probe(f"journal.abandon({w}, another rank)", partial(j.abandon, w, r, g))
        other = None if held.generation is not None else ALIEN
        owner = held.owner
        yield Probe(
            f"journal.complete({w}, another generation)", partial(j.complete, w, owner, other)
        )
        yield Probe(
            f"journal.abandon({w}, another generation)", partial(j.abandon, w, owner, ALIEN)
        )
    w = works[0]
    bad_generation: Any = (1,)
    yield Probe("journal.lease(malformed ID)", partial(j.lease, "no such/id", first), ARGUMENT)
    yield Probe("journal.lease(a long malformed ID)", partial(j.lease, "x" * 100, first), ARGUMENT)
    yield Probe("journal.lease(negative worker)", partial(j.lease, w, -1), ARGUMENT)
    yield Probe("journal.lease(bool worker)", partial(j.lease, w, True), ARGUMENT)
    yield Probe(
        "journal.lease(malformed generation)", partial(j.lease, w, first, bad_generation), ARGUMENT
    )
    yield Probe("journal.complete(malformed ID)", partial(j.complete, "", first), ARGUMENT)
    yield Probe("journal.abandon(negative worker)", partial(j.abandon, w, -1), ARGUMENT)


def _coordinator_probes(
    c: StateShardCoordinator, tasks: list[str], ranks: tuple[int, ...]
) -> Iterator[Probe]:
    first = ranks[0]
    for t in tasks:
        owner = c.active_owner(t)
        held = c.leases.get(t)
        if owner is not None:
            yield Probe(f"coordinator.lease({t}) while held", partial(c.lease, t, first))
        g = held.generation if held is not None else None
        for r in ranks:
            if r == owner:
                other = None if g is not None else ALIEN
                yield Probe(
                    f"coordinator.complete({t}, another generation)",
                    partial(c.complete, t, r, reward=1, generation=other),
                )
                yield Probe(
                    f"coordinator.abandon({t}, another generation)",
                    partial(c.abandon, t, r, cost=1, generation=other),
                )
                yield Probe(
                    f"coordinator.discard({t}, another generation)", partial(c.discard, t, r, ALIEN)
                )
                continue
            yield Probe(
                f"coordinator.complete({t}, not the owner)",
                partial(c.complete, t, r, reward=1, cost=1, generation=g),
            )
            yield Probe(
                f"coordinator.abandon({t}, not the owner)",
                partial(c.abandon, t, r, cost=1, generation=g),
            )
            yield Probe(f"coordinator.discard({t}, not the owner)", partial(c.discard, t, r, g))
    t = tasks[0]
    text: Any = "1"
    yield Probe("coordinator.lease(empty task)", partial(c.lease, "", first), ARGUMENT)
    yield Probe("coordinator.lease(bool worker)", partial(c.lease, t, True), ARGUMENT)
    yield Probe(
        "coordinator.lease(malformed generation)", partial(c.lease, t, first, (0, -1)), ARGUMENT
    )
    yield Probe(
        "coordinator.complete(NaN reward)", partial(c.complete, t, first, reward=math.nan), ARGUMENT
    )
    yield Probe(
        "coordinator.complete(huge cost)", partial(c.complete, t, first, cost=1e300), ARGUMENT
    )
    yield Probe(
        "coordinator.abandon(string cost)", partial(c.abandon, t, first, cost=text), ARGUMENT
    )
    yield Probe("coordinator.stats(a task never leased)", partial(c.stats, "s-never"), UnknownTask)


def _garbage(master: Master, rank: int) -> bool:
    """A malformed RESULT from ``rank`` (one with nothing to answer: it marks nothing)."""
    return None not in deliver(master, Envelope(rank, int(Tag.RESULT), b"\xff{"))


def _foreign_id(master: Master, rank: int, work: str) -> bool:
    """A well-formed RESULT from ``rank`` but for a work ID that is not 64 hexadecimal
    characters: the wire refuses it, so it is dropped as malformed (True: it was handled)."""
    _, data = wire_encode(Result(WorkId(work), None, True, 1.0))
    doc = json.loads(data)
    doc["work_id"] = "not-a-work-id"
    return None not in deliver(master, Envelope(rank, int(Tag.RESULT), json.dumps(doc).encode()))


def probes(m: SystemMachine) -> Iterator[Probe]:
    """The probes for the machine's current state."""
    master = m.master_()
    j, c = master.journal, master.coordinator
    assert isinstance(j, WorkLeaseJournal)
    assert isinstance(c, StateShardCoordinator)
    works = [w for w, _ in m.BOUNDS.task_of]
    tasks = sorted({t for _, t in m.BOUNDS.task_of})
    ranks = m.BOUNDS.ranks
    yield from _journal_probes(j, works, ranks)
    yield from _coordinator_probes(c, tasks, ranks)
    yield from _master_probes(m, master)
    idle = [r for r in ranks if not master.dispatches(Rank(r))]
    for r in idle:
        yield Probe(f"deliver(garbage from idle rank {r})", partial(_garbage, master, r))
        yield Probe(
            f"deliver(a malformed work ID from idle rank {r})",
            partial(_foreign_id, master, r, works[0]),
        )
    for r in ranks:
        # RankBusy only when every slot of the rank is taken (at depth 2 a rank holding one
        # dispatch may take another: the unknown work is refused as such).
        full = len(master.dispatches(Rank(r))) >= master.pipeline
        yield Probe(
            f"dispatch(unknown work, rank {r})",
            partial(master.dispatch, WorkId("w-unknown"), Rank(r)),
            RankBusy if full else UnknownWork,
        )


class _Hidden:
    """A stand-in container: the live one seen through a proxy that is not a
    ``WorkLeaseJournal`` or ``StateShardCoordinator`` and has no ``commit`` (what the master's
    ``Journal``/``Coordinator`` protocols allow: a container without disk state)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in ("commit", "pending"):
            raise AttributeError(name)
        return getattr(self._inner, name)


def _nested_step(master: Master) -> bool:
    """Two nested steps of the master's clock read the same instant (a step is atomic)."""
    with master.clock.step() as outer, master.clock.step() as inner:
        return inner != outer  # False: the same instant, as expected


def _stand_in(master: Master) -> bool:
    """A master over stand-in containers: it resumes no generation, has no disk state to
    trace, and its group commit has nothing to commit (refusals of a kind: nothing happens)."""
    twin = Master(
        _Hidden(master.journal),
        _Hidden(master.coordinator),
        master.catalogue.values(),
        ttl=master.ttl,
        group_commit=True,
    )
    twin.commit()
    return twin.recovered_state() != {} or bool(twin._generations)  # False: as expected


def _unlimited_release() -> bool:
    """With no pool limited (a run's default), a release gives back nothing and checks only
    that its kind has a pool (issue 19: such pools keep no count)."""
    free = Reservations()
    free.release("target", "never-taken")
    return bool(free.held())  # False: as expected


def _master_probes(m: SystemMachine, master: Master) -> Iterator[Probe]:
    """The master's own refusals: a depth, fence or limit that does not exist, generation fencing
    without a snapshot (its epoch), a restart of a master not made by ``Master.open``, the
    release of a reservation nobody holds; and calls that must change nothing."""
    j, c, items = master.journal, master.coordinator, list(master.catalogue.values())
    for depth in (0, True, 1.5):
        yield Probe(
            f"Master(pipeline={depth!r})",
            partial(Master, j, c, items, ttl=1, pipeline=depth),  # type: ignore[arg-type]
            ValueError,
        )
    yield Probe(
        "Master(fence='epoch')", partial(Master, j, c, items, ttl=1, fence="epoch"), ValueError
    )
    for bad in (0, True):
        yield Probe(
            f"Master(max_failures={bad!r})",
            partial(Master, j, c, items, ttl=1, max_failures=bad),
            ValueError,
        )
        yield Probe(
            f"Master(max_invalid={bad!r})",
            partial(Master, j, c, items, ttl=1, max_invalid=bad),
            ValueError,
        )
    yield Probe(
        "Master.open(generation fence, no snapshot)",
        partial(Master.open, m.dir / "no-journal", None, items, ttl=1, pipeline=2),
        ValueError,
    )
    yield Probe(
        "restart_master() of a master not opened from files",
        Master(j, c, items, ttl=1).restart_master,
        RuntimeError,
    )
    yield Probe(
        "release of an unheld reservation",
        partial(master.reservations.release, "target", "no-such-target"),
        RuntimeError,
    )
    yield Probe(
        "release of a reservation of no pool, no pool limited",
        partial(Reservations().release, "no-such-kind", "k"),
        RuntimeError,
    )
    yield Probe("release of an unlimited pool's reservation", _unlimited_release)
    yield Probe("nested clock steps", partial(_nested_step, master))
    yield Probe("a master over stand-in containers", partial(_stand_in, master))


def _answer(p: Probe) -> Expect:
    try:
        got = p.call()
    except (LeaseError, ValueError, TypeError, KeyError, RuntimeError) as error:
        if not isinstance(p.expect, bool) and isinstance(error, p.expect):
            return p.expect
        raise ProbeFailure(f"probe {p.name}: raised {error!r}, expected {p.expect!r}") from error
    if got is not False:
        raise ProbeFailure(f"probe {p.name}: returned {got!r}, expected a refusal {p.expect!r}")
    return False


def probe(m: SystemMachine) -> int:
    """Run every probe on the machine's live implementation, then the hostile reads; returns how
    many probes ran. Raises ``ProbeFailure`` naming the first one not refused as expected."""
    files = (m.journal_path, m.snapshot_path)
    before = [f.read_bytes() for f in files]
    mapped = m.mapped_now()
    n = 0
    for p in probes(m):
        _answer(p)
        n += 1
        if [f.read_bytes() for f in files] != before:
            raise ProbeFailure(f"probe {p.name} was refused but wrote to the files")
    m.mapped = None
    if m.impl_state() != mapped:
        raise ProbeFailure("the refused probes changed the implementation's state")
    n += scratch_probes(m)
    return n + hostile_reads(m.journal_path, m.snapshot_path, m.BOUNDS.task_of[0][0])


def _judge(name: str, read: Callable[[], object], want: object, expect: Expect) -> None:
    """``read()`` must give ``want`` (``expect`` True) or raise ``expect``."""
    refusals = (JournalCorrupt, RecordOutOfRange, SnapshotError)
    try:
        got = read()
    except refusals as error:
        if isinstance(expect, bool) or not isinstance(error, expect):
            raise ProbeFailure(f"{name} refused with {error!r}, expected {expect!r}") from error
        return
    if expect is not True:
        raise ProbeFailure(f"{name} was read, expected {expect!r}")
    if got != want:
        raise ProbeFailure(f"{name} read as {got}, not {want}")


def hostile_reads(journal: Path, snapshot: Path, work: str) -> int:
    """The journal and snapshot as a crash or a hostile hand could leave them, each read from a
    copy: a torn or zero-padded tail (or a last newline left as zeros) reads as the file without
    it; a corrupt line in the middle, a bad checksum, a record out of range or text that is not
    a journal is refused by name; records written otherwise read as the same records. The bulk
    reader and the reference reader agree on each journal (``readers_agree``)."""
    data, snap = journal.read_bytes(), snapshot.read_bytes()
    want = persisted_journal(journal)
    want_snap = persisted_coordinator(snapshot, [])
    lines = data.splitlines(keepends=True)
    good = legacy_lease_line(work, 1, 5)  # a good record (F314's original format)
    cases: list[tuple[str, bytes, Expect]] = [
        ("torn tail", data + b'{"event":"lease","work_i', True),
        ("zero-padded tail", data + b"\0" * 512, True),
        ("not a journal", b"root:x:0:0:root:/root:/bin/bash\n" + data, JournalCorrupt),
        (
            "out-of-range worker",
            data
            + b'{"event":"lease","work_id":"%s","worker":-5,"updated":1.0}\n' % work.encode()
            + good,
            JournalCorrupt,
        ),
    ]
    w = work
    legacy_bad = {  # F314-format lines (no checksum), each wrong in one field
        "a JSON list": "[]",
        "an unknown event": f'{{"work_id":"{w}","event":"grab","worker":1,"updated":1}}',
        "a short work ID": '{"work_id":"abc","event":"lease","worker":1,"updated":1}',
        "a bool worker": f'{{"work_id":"{w}","event":"lease","worker":true,"updated":1}}',
        "a string timestamp": f'{{"work_id":"{w}","event":"lease","worker":1,"updated":"1"}}',
        "a numeric clock": f'{{"work_id":"{w}","event":"lease","worker":1,"updated":1,"clock":1}}',
        "a lease without a timestamp": f'{{"work_id":"{w}","event":"lease","worker":1}}',
        "a field only checksummed records carry": (
            f'{{"work_id":"{w}","event":"lease","worker":1,"updated":1,"attempt":1}}'
        ),
        "an integer timestamp out of range": (
            f'{{"work_id":"{w}","event":"lease","worker":1,"updated":{10**16}}}'
        ),
    }
    cases += [
        (f"legacy line with {name}", data + line.encode() + b"\n" + good, JournalCorrupt)
        for name, line in legacy_bad.items()
    ]
    # a good record in the layout the journal writes (a reclaim of an ID never leased): after
    # it, the bulk reader reads a damaged line as far as the check that declines it
    written = unix_record("reclaim", "e" * 64, None, 1.0, 0)
    for name, line in _bad_checksummed(work).items():
        cases += [
            (f"checksummed line with {name}", data + line + good, JournalCorrupt),
            (
                f"checksummed line with {name}, in written records",
                data + line + written,
                JournalCorrupt,
            ),
        ]
    whole = data[: data.rfind(b"\n") + 1]  # without a torn tail
    lease = unix_record("lease", "e" * 64, 1, 1.0, 1)
    cases += [
        (
            "a checksum over a timestamp not spelled as repr",
            whole + _misspelled() + written,
            JournalCorrupt,
        ),
        ("two records on one line", whole + lease[:-1] + b"," + written + written, JournalCorrupt),
        (
            "a batch line with a second event",
            whole + b'{"event":"batch","event":"done","work_id":"%s"}\n' % w.encode() + written,
            JournalCorrupt,
        ),
        (
            "text that is not a journal, without a newline",
            b"root:x:0:0:root" + data,
            JournalCorrupt,
        ),
    ]
    if whole:
        cases.append(("a last record whose newline is zeros", whole[:-1] + b"\0" * 3, True))
    if lines and lines[-1].endswith(b"\n"):  # the last line whole (no torn tail)
        last = lines[-1]
        flipped = (
            last.replace(b'"crc":"', b'"crc":"0', 1)
            if b'"crc":"' in last
            else last[:1] + b"#" + last[1:]
        )
        cases.append(
            ("bad checksum mid-file", b"".join(lines[:-1]) + flipped + good, JournalCorrupt)
        )
    n = _encoders_agree(whole)
    readers_agree("the journal", data)
    with tempfile.TemporaryDirectory(prefix="leasefence-probe-", dir=str(journal.parent)) as tmp:
        copy = Path(tmp) / journal.name
        for name, content, expect in cases:
            copy.write_bytes(content)
            _judge(f"hostile journal ({name})", lambda: persisted_journal(copy), want, expect)
            readers_agree(f"hostile journal ({name})", content)
            n += 1
        for name, content, same in _read_alike(whole, w):
            readers_agree(name, content)
            readers_agree(f"{name}, written otherwise", same)
            copy.write_bytes(same)
            other = persisted_journal(copy)
            copy.write_bytes(content)
            _judge(name, lambda: persisted_journal(copy), other, True)
            n += 1
        scopy = Path(tmp) / snapshot.name
        snapshot_cases: list[tuple[str, bytes, Expect]] = [
            ("torn log line", snap + b'{"op":"lease","ta', True),
            ("not a snapshot", b"\x00garbage\n", SnapshotError),
            (
                "bad checksum on the last log line",
                snap + b'{"op":"void","tasks":["t"],"crc":"00000000"}\n',
                True,
            ),
            *_hostile_snapshots(snap),
        ]
        for name, content, expect in snapshot_cases:
            scopy.write_bytes(content)
            _judge(
                f"hostile snapshot ({name})",
                lambda: persisted_coordinator(scopy, []),
                want_snap,
                expect,
            )
            n += 1
    return n


#: A timestamp's spelling that is not ``repr``'s (1.0's, with 17 digits after the point).
_LONG_ONE = b"1.00000000000000001"


def _misspelled() -> bytes:
    """A lease whose checksum is over its line's text, timestamp spelled as ``_LONG_ONE``: the
    canonical form spells it ``1.0`` (as ``repr`` does), so the checksum does not match it."""
    doc: dict[str, Any] = {"event": "lease", "work_id": "e" * 64, "worker": 1, "updated": 1.0}
    doc.update(clock="unix", attempt=1)
    spell = methodcaller("replace", b'"updated":1.0,', b'"updated":' + _LONG_ONE + b",")
    canonical = spell(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii"))
    line: bytes = spell(journal_line(doc, crc=f"{zlib.crc32(canonical):08x}"))
    assert _LONG_ONE in line
    return line


def _read_alike(whole: bytes, work: str) -> list[tuple[str, bytes, bytes]]:
    """Journals that must read as another one (after ``whole``, the journal's whole lines): a
    timestamp spelled with more digits than ``repr``'s (the record's checksum is over its
    canonical form, which spells it as ``repr``), and records in a batch line or on lines of
    their own (an offline completion of an ID never leased among them: attempt 0)."""
    lease = unix_record("lease", "e" * 64, 1, 1.0, 1)
    spelled = lease.replace(b'"updated":1.0,', b'"updated":' + _LONG_ONE + b",")
    assert spelled != lease
    lines = [
        lease,
        unix_record("reclaim", "e" * 64, 1, 2.0, 1),
        unix_record("done", "f" * 64, None, 2.0, 0),
        unix_record("lease", work, 2, 2.0, 7, generation=[3, 4]),
    ]
    batch = journal_line({"event": "batch", "records": [json.loads(x) for x in lines]})
    return [
        ("a timestamp spelled with more digits than repr's", whole + spelled, whole + lease),
        ("a batch line read as its records", whole + batch, whole + b"".join(lines)),
    ]


def _encoders_agree(whole: bytes) -> int:
    """Every record the journal wrote (``whole``: its whole lines), and a record with a
    generation, encoded again by ``encode_record`` from its fields: the fast encoder and, with
    the generation as a tuple (which only ``json`` writes), the general one give its line."""
    lines = [x + b"\n" for x in whole.splitlines()]
    lines.append(unix_record("lease", "e" * 64, 1, 1.0, 1, generation=[3, 4]))
    n = 0
    for line in lines:
        doc = json.loads(line)
        if "crc" not in doc or doc["event"] == "batch":
            continue  # a legacy record, or a batch (its records are each one's own line)
        doc.pop("crc")
        bodies = [doc]
        if "generation" in doc:
            bodies.append({**doc, "generation": tuple(doc["generation"])})
        for body in bodies:
            if encode_record(body) != line:
                raise ProbeFailure(f"encode_record({body}) is not the line it was read from")
            n += 1
    return n


def _bad_checksummed(work: str) -> dict[str, bytes]:
    """Checksummed journal lines and batches, each wrong in one way (refused as corrupt when a
    good record follows)."""
    lease = {
        "event": "lease",
        "work_id": work,
        "worker": 1,
        "updated": 1.0,
        "clock": "unix",
        "attempt": 1,
    }
    done = {**lease, "event": "done"}
    inner = json.loads(journal_line(done))
    legacy = {k: v for k, v in done.items() if k not in ("clock", "attempt")}
    return {
        "a negative attempt": journal_line({**lease, "attempt": -1}),
        "a bad generation": journal_line({**lease, "generation": [1]}),
        "a lease without a worker": journal_line({**lease, "worker": None}),
        "a timestamp out of range": journal_line({**lease, "updated": 1e300}),
        "a wrong checksum": journal_line(lease, crc="00000000"),
        "a batch with a wrong checksum": journal_line(
            {"event": "batch", "records": [inner, inner]}, crc="00000000"
        ),
        "an empty batch": journal_line({"event": "batch", "records": []}),
        "a batch holding a legacy record": journal_line(
            {"event": "batch", "records": [inner, legacy]}
        ),
        "a batch holding a bad record": journal_line(
            {"event": "batch", "records": [inner, {**inner, "crc": "00000000"}]}
        ),
        "a batch of null-worker leases": journal_line(
            {
                "event": "batch",
                "records": [inner, json.loads(journal_line({**lease, "worker": None}))],
            }
        ),
        "a batch that is a list": json.dumps([inner]).encode("ascii") + b"\n",
    }


def checksummed(doc: dict[str, object]) -> bytes:
    """A coordinator log line as docs/coordinator-format.md says it (written here from the
    document, not with the implementation's encoder): the record with ``crc``, the CRC32 of
    its canonical JSON (keys sorted, no spaces)."""
    canonical = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii")
    return json.dumps({**doc, "crc": f"{zlib.crc32(canonical):08x}"}).encode("ascii") + b"\n"


def _hostile_snapshots(snap: bytes) -> list[tuple[str, bytes, Expect]]:
    """Snapshots refused by name: a bad log record followed by a good one (an empty void), and
    checkpoints that are not one."""
    good = checksummed({"op": "void", "tasks": []})
    lease = {"op": "lease", "task": "t-probe", "owner": 1, "updated": 1.0, "epoch": 1}
    bad_records: list[tuple[str, bytes]] = [
        ("bad checksum", b'{"op":"void","tasks":[],"crc":"00000000"}\n'),
        ("no checksum", b'{"op":"void","tasks":[]}\n'),
        ("not JSON", b'{"op":\n'),
        ("an empty line", b" \n"),
        ("unknown op", checksummed({"op": "grow", "tasks": []})),
        ("unknown key", checksummed({"op": "void", "tasks": [], "why": 1})),
        ("free without a lease", checksummed({"op": "free", "task": "t-none", "stats": {}})),
        ("void without a lease", checksummed({"op": "void", "tasks": ["t-none"]})),
        ("lease of another epoch", checksummed({**lease, "epoch": 10**6})),
        ("lease with a bad generation", checksummed({**lease, "generation": [1]})),
        ("lease with an empty task", checksummed({**lease, "task": ""})),
        ("batch of one", checksummed({"op": "batch", "records": [json.loads(good)]})),
        (
            "batch in a batch",
            checksummed({"op": "batch", "records": [json.loads(good)] * 2 + [{"op": "batch"}]}),
        ),
    ]
    cases: list[tuple[str, bytes, Expect]] = [
        (f"{name} mid-log", snap + bad + good, SnapshotError) for name, bad in bad_records
    ]
    lease2 = {**lease, "task": "t-two"}
    epoch = re.search(rb'"epoch": (\d+)', snap)
    held = checksummed({**lease, "task": "t-three", "epoch": int(epoch[1]) if epoch else 1})
    cases.append(
        (
            "a batch that frees a held task, then is bad (the lease is put back)",
            snap
            + held
            + checksummed(
                {
                    "op": "batch",
                    "records": [
                        json.loads(checksummed({"op": "free", "task": "t-three", "stats": {}})),
                        json.loads(checksummed({"op": "void", "tasks": ["t-none"]})),
                    ],
                }
            )
            + good,
            SnapshotError,
        )
    )
    cases += [
        (
            "a batch whose second record is bad (none of it applies)",
            snap
            + checksummed({"op": "batch", "records": [json.loads(checksummed(lease2)), bad_free]})
            + good,
            SnapshotError,
        )
        for bad_free in (
            json.loads(checksummed({"op": "free", "task": "t-none", "stats": {}})),
            json.loads(checksummed({"op": "batch", "records": []})),
        )
    ]
    cases += [
        (f"checkpoint: {name}", checkpoint(doc), SnapshotError) for name, doc in _bad_checkpoints()
    ]
    cases += [
        ("not UTF-8", b"\xff\xfe{}\n", SnapshotError),
        ("blank", b"  \n", SnapshotError),
        ("a list", b"[]\n", SnapshotError),
        ("data after the checkpoint", snap.replace(b"\n}\n", b"\n} 1\n", 1), SnapshotError),
        ("another schema", snap.replace(b'"schema": 1', b'"schema": 99', 1), SnapshotError),
        ("another clock", snap.replace(b'"clock": "unix"', b'"clock": "mono"', 1), SnapshotError),
        ("negative epoch", snap.replace(b'"epoch": ', b'"epoch": -', 1), SnapshotError),
    ]
    return cases


def checkpoint(doc: dict[str, Any]) -> bytes:
    """A snapshot's checkpoint as docs/coordinator-format.md says it: the JSON object alone."""
    return json.dumps(doc, indent=1).encode("ascii") + b"\n"


def _bad_checkpoints() -> list[tuple[str, dict[str, Any]]]:
    """Checkpoints that break one rule of the format each."""
    lease = {"owner": 1, "updated": 1.0, "epoch": 1}
    stats = {"completions": 1, "failures": 0, "reward": 1.0, "cost": 1.0}
    base: dict[str, Any] = {
        "schema": 1,
        "clock": "unix",
        "epoch": 2,
        "leases": {"t": lease},
        "stats": {"t": stats},
    }
    return [
        ("no stats", {k: v for k, v in base.items() if k != "stats"}),
        ("a bool epoch", {**base, "epoch": True}),
        ("a string updated", {**base, "leases": {"t": {**lease, "updated": "1"}}}),
        ("an infinite updated", {**base, "leases": {"t": {**lease, "updated": 10**400}}}),
        ("a lease that is not an object", {**base, "leases": {"t": [1]}}),
        ("an empty task ID", {**base, "leases": {"": lease}}),
        ("a lease after the epoch", {**base, "leases": {"t": {**lease, "epoch": 3}}}),
        ("a bad generation", {**base, "leases": {"t": {**lease, "generation": [1]}}}),
        ("a lease without an owner", {**base, "leases": {"t": {"updated": 1.0, "epoch": 1}}}),
    ]


def torn_restart(m: SystemMachine) -> None:
    """RestartMaster as a crash in the middle of appending a lease record nobody acknowledged:
    half of it reaches the journal, then the master restarts (the model's RestartMaster)."""
    work, worker = m.BOUNDS.task_of[0][0], m.BOUNDS.ranks[0]
    record = m.would_be_record(work, worker)
    m.do_torn_tail(work, worker, len(record) // 2)
