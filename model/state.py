"""Immutable state values of the model (named tuples: cheap to build and hash); every ``repr``
pastes back as Python.

Maps are sorted tuples of ``(key, value)`` pairs holding only the keys present, so that states
hash, compare and print deterministically. The helpers below are the only way they are edited.
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

K = TypeVar("K", str, int)
V = TypeVar("V")

Map = tuple[tuple[K, V], ...]


def get(m: tuple[tuple[K, V], ...], key: K) -> V | None:
    """The value at ``key``, or None."""
    for k, v in m:
        if k == key:
            return v
    return None


def put(m: tuple[tuple[K, V], ...], key: K, value: V) -> tuple[tuple[K, V], ...]:
    """``m`` with ``key`` set to ``value`` (keys stay sorted)."""
    kept = [(k, v) for k, v in m if k != key]
    kept.append((key, value))
    kept.sort(key=lambda kv: kv[0])
    return tuple(kept)


def drop(m: tuple[tuple[K, V], ...], key: K) -> tuple[tuple[K, V], ...]:
    """``m`` without ``key``."""
    return tuple((k, v) for k, v in m if k != key)


class Lease(NamedTuple):
    """An active work lease as the journal persists it: owner rank, timestamp, clock domain, and
    the owner's dispatch generation (``0``: none, a rank-only owner as in F314 and the old
    protocol). The owner token is ``(owner, gen)``; fenced calls must match it exactly."""

    owner: int
    updated: int
    clock: str
    gen: int = 0


class Journal(NamedTuple):
    """The work journal (``WorkLeaseJournal``) after replaying its records.

    ``leases``: active leases by work ID. ``completed``: completed work IDs. ``attempts``: leases
    ever granted per work ID (carried by every record, so compaction keeps it). The number of
    records in the file is not part of the abstract state: compaction changes only that, and the
    conformance machines check it on the implementation's file directly.
    """

    leases: tuple[tuple[str, Lease], ...] = ()
    completed: frozenset[str] = frozenset()
    attempts: tuple[tuple[str, int], ...] = ()


class StateLease(NamedTuple):
    """An active state-task lease: owner rank, Unix lease time, coordinator epoch it was taken in.

    A lease of an older epoch than the coordinator's is stale: it grants no ownership (L6).
    """

    owner: int
    updated: int
    epoch: int
    gen: int = 0  # the owner's dispatch generation (0: none); the owner token is (owner, gen)


class Stats(NamedTuple):
    """Cumulative statistics of one state task.

    ``complete`` adds one completion, its reward and its cost; ``abandon`` adds one failure and
    its cost; ``discard`` and refused calls add nothing. They survive coordinator restarts.
    """

    completions: int = 0
    failures: int = 0
    reward: int = 0
    cost: int = 0


class Coordinator(NamedTuple):
    """The state-shard coordinator (``StateShardCoordinator``): epoch, leases, statistics."""

    epoch: int = 1
    leases: tuple[tuple[str, StateLease], ...] = ()
    stats: tuple[tuple[str, Stats], ...] = ()


class Dispatch(NamedTuple):
    """A rank's active dispatch as the master stored it: the work ID, the authoritative task and
    its dispatch generation (``0`` under rank fencing: the rank alone is the owner token)."""

    work: str
    task: str
    gen: int = 0


class State(NamedTuple):
    """The whole system: clocks, journal, coordinator, master and the results workers can send.

    ``wall`` is Unix time and ``mono`` monotonic time, in ticks. ``active`` holds the master's
    active dispatches as sorted ``(rank, Dispatch)`` pairs: one per rank at pipeline depth 1 (a
    map from rank), up to ``Bounds.pipeline`` per rank beyond (a rank may then repeat). ``net``
    holds the results in flight, one per (rank, work) payload sent: any of them may be delivered
    at any time (late, reordered, across a master restart), naming any state ID or none; under
    generation fencing they carry their dispatch generation and sit in ``gnet`` as
    ``(rank, work, gen)`` instead. ``dups`` counts deliveries that left their message in flight
    (duplicated results). ``reboots`` and ``rollbacks`` count clock faults. All four are bounded; master
    restarts are counted by the coordinator's epoch.
    """

    wall: int = 0
    mono: int = 0
    journal: Journal = Journal()
    coordinator: Coordinator = Coordinator()
    active: tuple[tuple[int, Dispatch], ...] = ()
    net: frozenset[tuple[int, str]] = frozenset()
    dups: int = 0
    reboots: int = 0
    rollbacks: int = 0
    gnet: frozenset[tuple[int, str, int]] = frozenset()
