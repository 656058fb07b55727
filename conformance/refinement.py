"""Refinement mappings: the implementation's objects seen as the model's abstract states.

Each function reads a live implementation object and returns the value of ``leasefence.model``
that it must equal after every step of a conformance machine:

==============================  =====================  ==========================================
implementation                  model                  mapping
==============================  =====================  ==========================================
``WorkLeaseJournal``            ``state.Journal``      ``journal_state``
``StateShardCoordinator``       ``state.Coordinator``  ``coordinator_state``
``Master`` (+ the environment)  ``state.State``        ``master_state``
==============================  =====================  ==========================================

Time: the machines drive one injected ``TickClock`` in whole seconds, and one second is one
model tick, so a Unix timestamp maps to the tick of the same number (``tick``). A harness whose
clock starts elsewhere (the crash harness: ``BASE + tick``) passes ``origin``, the Unix time of
tick 0; it shifts Unix times only, not a legacy record's monotonic stamp nor the zero a restart
writes into a state lease (the model's ``restart_coordinator`` zeroes it too). The model's
monotonic clock has no counterpart in the implementation (F314 persists Unix time only): it,
the results in flight, and the fault counters are the environment's, kept by the machine in an
``Environment`` and copied into the mapped state unchanged.

Clock domains: the implementation's ``"unix"`` tag is the model's ``unix``; an untagged lease
(``clock is None``, a record in F314's original format) is the model's ``legacy``.

Generations (issue 12): the implementation's dispatch generation is ``(epoch, counter)``, per
rank; the model's is the same pair as one integer, ``epoch * GEN_BASE + counter``
(``next_generation``), and each rank's counter is the model's ``gens`` (``Master.
generation_counters``: both advance when the journal grants a lease, both restart at a restart).
The mapping of the tokens is still a bijection learnt as the run goes (a harness may start the
implementation's epochs elsewhere), since only equality matters to an exact-match fence:
``GenerationNames.bind`` pairs the implementation's token ``(rank, epoch, counter)`` with the
model generation of the same dispatch; a token never bound (read from files the run did not
write) gets a fresh name from ``FRESH`` up, far beyond any generation the model issues in a run. ``None`` (no generation, a
rank-only owner) is the model's ``0``.

Persisted fields: ``persisted_differences`` compares, unabstracted, every field the journal and
the snapshot persist (each lease record whole, completed IDs, attempts, record counts; epoch,
every state lease with its time and generation, every task's statistics, the legacy copies)
as a fresh read of the files gives them with the objects in memory; the system machines check
it after every step, restarts from disk included.

Statistics: the implementation knows a task (with zero statistics) from its first lease; the
model keeps an entry only once a completion or failure is booked. The mapping keeps the tasks
with ``completions + failures > 0``; amounts are whole numbers on both sides.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from leasefence.conformance.generations import GenerationNames
from leasefence.impl.coordfile import decode
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import LeaseRecord, WorkLeaseJournal
from leasefence.impl.master import Master
from leasefence.impl.rules import UNIX
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_UNIX
from leasefence.model.state import (
    Coordinator,
    Dispatch,
    Journal,
    Lease,
    State,
    StateLease,
    Stats,
    as_ids,
    as_map,
)


class TickClock:
    """The injected Unix clock of a conformance run: whole seconds, moved only by the machine."""

    def __init__(self, now: int = 0) -> None:
        self.now = now

    def __call__(self) -> float:
        return float(self.now)


def tick(seconds: float, origin: int = 0) -> int:
    """The model tick of an implementation timestamp (``origin``: the Unix time of tick 0); it
    must be a whole second."""
    if not math.isfinite(seconds) or seconds != int(seconds):
        raise AssertionError(f"timestamp {seconds!r} is not a whole second (a model tick)")
    return int(seconds) - origin


def clock_domain(tag: str | None) -> str:
    """The model's clock domain of an implementation clock tag."""
    if tag == UNIX:
        return CLOCK_UNIX
    if tag is None:
        return CLOCK_LEGACY
    raise AssertionError(f"unknown clock tag {tag!r} in the journal")


def lease_of(x: LeaseRecord, names: GenerationNames | None = None, origin: int = 0) -> Lease:
    """One active work lease in the model's terms (a legacy stamp is monotonic: not shifted)."""
    gen = (names or GenerationNames()).name(x.owner, x.generation)
    domain = clock_domain(x.clock)
    updated = tick(x.updated, origin if domain == CLOCK_UNIX else 0)
    return Lease(owner=x.owner, updated=updated, clock=domain, gen=gen)


def journal_state(
    j: WorkLeaseJournal, names: GenerationNames | None = None, origin: int = 0
) -> Journal:
    """The journal's abstract state: active leases, completed IDs, attempts per ID."""
    return Journal(
        leases=as_map((w, lease_of(x, names, origin)) for w, x in j.leases.items()),
        completed=as_ids(j.completed),
        attempts=as_map(j.attempts),
    )


def _whole(amount: float) -> int:
    if amount != int(amount):
        raise AssertionError(f"statistic {amount!r} is not a whole number (the model's amounts)")
    return int(amount)


def coordinator_state(
    c: StateShardCoordinator, names: GenerationNames | None = None, origin: int = 0
) -> Coordinator:
    """The coordinator's abstract state: epoch, every lease (active or stale), booked statistics."""
    names = names or GenerationNames()
    return Coordinator(
        epoch=c.epoch,
        leases=as_map(
            (
                t,
                StateLease(
                    owner=x.owner,
                    updated=0 if x.updated == 0.0 else tick(x.updated, origin),
                    epoch=x.epoch,
                    gen=names.name(x.owner, x.generation),
                ),
            )
            for t, x in sorted(c.leases.items())
        ),
        stats=as_map(
            (
                t,
                Stats(
                    completions=s.completions,
                    failures=s.failures,
                    reward=_whole(s.reward),
                    cost=_whole(s.cost),
                ),
            )
            for t, s in sorted(c.statistics.items())
            if s.completions or s.failures
        ),
    )


@dataclass
class Environment:
    """What the model's ``State`` holds beyond the implementation: the clocks as the machine set
    them, the results in flight (the machine is the network) and the fault counters."""

    wall: int = 0
    mono: int = 0
    net: frozenset[tuple[int, str]] = frozenset()
    gnet: frozenset[tuple[int, str, int]] = frozenset()
    dups: int = 0
    reboots: int = 0
    rollbacks: int = 0

    def state(
        self, journal: Journal | None = None, coordinator: Coordinator | None = None
    ) -> State:
        """A model state with this environment and the given containers (no dispatch)."""
        return State(
            wall=self.wall,
            mono=self.mono,
            journal=Journal() if journal is None else journal,
            coordinator=Coordinator() if coordinator is None else coordinator,
            net=as_ids(self.net),  # in the model's form for its size, as its actions keep it
            gnet=as_ids(self.gnet),
            dups=self.dups,
            reboots=self.reboots,
            rollbacks=self.rollbacks,
        )


def active_dispatches(
    m: Master, names: GenerationNames | None = None
) -> tuple[tuple[int, Dispatch], ...]:
    """The master's active dispatches: (rank, (work, the task stored at dispatch time, its
    generation)), sorted as the model keeps them (several per rank beyond depth 1)."""
    names = names or GenerationNames()
    return tuple(
        sorted(
            (int(r), Dispatch(str(d.work_id), str(d.task_id), names.name(r, d.generation)))
            for r, d in m.dispatches()
        )
    )


def master_state(m: Master, env: Environment, names: GenerationNames | None = None) -> State:
    """The whole system's abstract state: the master's journal, coordinator and dispatches
    (generations named by ``names``; see ``GenerationNames``)."""
    journal = m.journal
    coordinator = m.coordinator
    if not isinstance(journal, WorkLeaseJournal) or not isinstance(
        coordinator, StateShardCoordinator
    ):
        raise TypeError("master_state maps a master over a WorkLeaseJournal and a coordinator")
    return env.state(journal_state(journal, names), coordinator_state(coordinator, names))._replace(
        active=active_dispatches(m, names),
        gens=tuple((int(r), n) for r, n in m.generation_counters().items()),
    )


def journal_fields(j: WorkLeaseJournal) -> dict[str, object]:
    """Every field a journal persists, unabstracted: each lease record whole (owner, timestamp,
    clock tag, generation), the completed IDs, the attempts, and the record counts."""
    return {
        "leases": dict(j.leases),
        "completed": j.completed,
        "attempts": dict(j.attempts),
        "records": j.record_count,
        "legacy records": j.legacy_record_count,
    }


def persisted_journal(path: Path) -> dict[str, object]:
    """``journal_fields`` of the journal file at ``path`` as a fresh read-only open replays it."""
    j = WorkLeaseJournal.open_readonly(path)
    try:
        return journal_fields(j)
    finally:
        j.close()


def coordinator_fields(c: StateShardCoordinator) -> dict[str, object]:
    """Every field a coordinator persists, unabstracted: its epoch, every lease (owner, time,
    epoch, generation), the statistics of every known task (zero ones too, exact amounts) and
    the legacy copies beside its snapshot."""
    path = c.snapshot_path
    return {
        "epoch": c.epoch,
        "leases": {
            t: (x.owner, x.updated, x.epoch, x.generation) for t, x in sorted(c.leases.items())
        },
        "stats": {
            t: (s.completions, s.failures, s.reward, s.cost)
            for t, s in sorted(c.statistics.items())
        },
        "legacy copies": legacy_copies(path) if path is not None else [],
    }


def persisted_coordinator(path: Path, legacy: list[str]) -> dict[str, object]:
    """``coordinator_fields`` as the snapshot at ``path`` says them (its checkpoint with the
    log after it applied: docs/coordinator-format.md); ``legacy``: the legacy copies the object
    expects."""
    doc = decode(path, path.read_bytes())
    return {
        "epoch": doc.epoch,
        "leases": {
            t: (x.owner, x.updated, x.epoch, x.generation) for t, x in sorted(doc.leases.items())
        },
        "stats": {
            t: (s.completions, s.failures, s.reward, s.cost) for t, s in sorted(doc.stats.items())
        },
        "legacy copies": legacy,
    }


def legacy_copies(path: Path) -> list[str]:
    """The names of the legacy copies beside the snapshot at ``path`` (``<name>.legacy*``)."""
    prefix = path.name + ".legacy"
    return sorted(n for n in os.listdir(path.parent) if n.startswith(prefix))


#: A fresh read's fields by the bytes read (``persisted_differences(reads=...)``): a read is a
#: function of the file's bytes, so a run that meets the same bytes again may reuse it.
Reads = dict[tuple[str, bytes], dict[str, object]]


def _read(
    reads: Reads | None, kind: str, path: Path, fresh: Callable[[], dict[str, object]]
) -> dict[str, object]:
    if reads is None:
        return fresh()
    key = (kind, path.read_bytes())
    found = reads.get(key)
    if found is None:
        if len(reads) >= READS_KEPT:
            reads.clear()
        found = reads[key] = fresh()
    return found


#: How many reads a ``Reads`` memo keeps before it starts afresh (its memory stays bounded).
READS_KEPT = 50_000


def persisted_differences(
    m: Master, legacy: list[str] | None = None, reads: Reads | None = None
) -> list[str]:
    """Where what the master's journal and coordinator files hold differs from the objects in
    memory (every persisted field, ``journal_fields`` and ``coordinator_fields``): ``legacy``
    are the legacy copies expected beside the snapshot (default: none). With ``reads`` a file
    whose bytes were read before is not parsed again (the memo's fields are a fresh read of
    the same bytes)."""
    journal, coordinator = m.journal, m.coordinator
    if not isinstance(journal, WorkLeaseJournal) or not isinstance(
        coordinator, StateShardCoordinator
    ):
        raise TypeError("a master over a WorkLeaseJournal and a coordinator persists files")
    jpath = journal.path
    disk = _read(reads, "journal", jpath, lambda: persisted_journal(jpath))
    pairs = [("journal", journal_fields(journal), disk)]
    path = coordinator.snapshot_path
    if path is not None:
        memory = coordinator_fields(coordinator)
        copies = memory["legacy copies"]
        memory["legacy copies"] = legacy or []
        spath = path
        snapshot = dict(_read(reads, "snapshot", spath, lambda: persisted_coordinator(spath, [])))
        snapshot["legacy copies"] = copies
        pairs.append(("snapshot", memory, snapshot))
    return [
        f"{name} {key}: memory {mem[key]!r}, disk {disk[key]!r}"
        for name, mem, disk in pairs
        for key in mem
        if mem[key] != disk[key]
    ]


__all__ = [
    "Environment",
    "GenerationNames",
    "TickClock",
    "active_dispatches",
    "clock_domain",
    "coordinator_fields",
    "coordinator_state",
    "journal_fields",
    "journal_state",
    "lease_of",
    "legacy_copies",
    "master_state",
    "persisted_coordinator",
    "persisted_differences",
    "persisted_journal",
    "tick",
]
