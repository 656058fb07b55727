"""Immutable state values of the model (named tuples: cheap to build and hash); every ``repr``
pastes back as Python.

A map (``Map``) is a sorted tuple of ``(key, value)`` pairs holding only the keys present while it
has at most ``SMALL`` entries, and a ``Chunked`` map beyond; a set of IDs (``Ids``) is a
``frozenset`` up to ``SMALL`` members and a ``ChunkedSet`` beyond. Which form a value takes is a
function of its size alone, so equal contents always have the same form and states hash, compare
and print deterministically. The model checker's states are all small: its hot path runs on
plain tuples and frozensets (C code). A run of 10⁵ work IDs grows chunked values: an edit copies
one chunk, and ``changed`` finds what a step changed without reading everything (between a value
and one it was edited from a few edits before, by reading only the keys of those edits). The helpers
below (``get``, ``put``, ``drop``, ``add``, ``discard``, ``changed``) are the only way the model
reads by key and edits them.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import abc
from collections.abc import Iterable, Iterator, Mapping
from itertools import chain, compress, count
from math import isqrt
from operator import is_not
from typing import Any, Generic, NamedTuple, Protocol, TypeAlias, TypeVar
from weakref import ref


class _Ordered(Protocol):
    """A key that sorts: what ``sorted`` and ``bisect`` need."""

    def __lt__(self, other: Any, /) -> bool: ...


K = TypeVar("K", bound=_Ordered)
V = TypeVar("V")

#: Most entries a map or set holds in its plain form (tuple, frozenset); beyond, it is chunked.
#: A chunk holding more keys than this, or than twice the square root of the map's size, is
#: split in two: chunks and the list of chunks then grow alike, as the square root of the size.
SMALL = 64
#: How many edits back a chunked map remembers the maps it was edited from (``Chunked.changed``).
LINEAGE = 4

_NO_LINEAGE: tuple[Any, ...] = ()
_ABSENT: Any = object()


class Chunked(Generic[K, V]):
    """An immutable map of more than ``SMALL`` entries, keys in sorted order: ``Chunked({...})``.

    Stored as consecutive chunks of sorted keys with their values (a two-level B-tree): ``get``
    is two bisections, ``set`` and ``delete`` copy one chunk and the list of chunks. Iterates as
    the sorted tuple of pairs it stands for.

    Lineage: a map made by ``set`` or ``delete`` remembers, by weak reference, the maps it was
    edited from (up to ``LINEAGE`` edits back) and the key of each edit, so ``changed`` between
    a map and one of its recent ancestors reads only the keys edited in between. It is not part
    of the value: equality, hash, ``repr`` and pickling ignore it.
    """

    __slots__ = (
        "__weakref__",
        "_edits",
        "_firsts",
        "_hash",
        "_keys",
        "_len",
        "_origins",
        "_sure",
        "_vals",
    )

    _keys: tuple[tuple[K, ...], ...]
    _vals: tuple[tuple[V, ...], ...]
    _firsts: tuple[K, ...]
    _len: int
    _hash: int | None
    #: Weak references to the maps this one was edited from, the nearest first, and the key of
    #: each edit since: ``_edits[: i + 1]`` are the keys edited since ``_origins[i]``.
    _origins: tuple[ref[Chunked[K, V]], ...]
    _edits: tuple[K, ...]
    #: Whether the last edit certainly changed its entry (a value of another type may be equal).
    _sure: bool

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]]) -> None:
        pairs = sorted(dict(items).items())
        if len(pairs) <= SMALL:
            raise ValueError(f"a chunked map holds more than {SMALL} entries (use as_map)")
        half = max(SMALL, 2 * isqrt(len(pairs))) // 2
        keys = tuple(tuple(k for k, _ in pairs[i : i + half]) for i in range(0, len(pairs), half))
        vals = tuple(tuple(v for _, v in pairs[i : i + half]) for i in range(0, len(pairs), half))
        self._keys, self._vals, self._len, self._hash = keys, vals, len(pairs), None
        self._firsts = tuple(ks[0] for ks in keys)
        self._origins = self._edits = _NO_LINEAGE
        self._sure = False

    def __reduce__(self) -> tuple[type[Chunked[K, V]], tuple[dict[K, V]]]:
        """Pickled and copied as its pairs (a copy has no lineage)."""
        return Chunked, (dict(self),)

    def _edited(
        self,
        sure: bool,
        key: K,
        keys: tuple[tuple[K, ...], ...],
        vals: tuple[tuple[V, ...], ...],
        firsts: tuple[K, ...],
        size: int,
    ) -> Chunked[K, V]:
        """The map of these chunks, made from this one by an edit at ``key``."""
        m: Chunked[K, V] = Chunked.__new__(Chunked)
        m._keys, m._vals, m._firsts, m._len, m._hash = keys, vals, firsts, size, None
        m._origins = (ref(self), *self._origins[: LINEAGE - 1])
        m._edits = (key, *self._edits[: LINEAGE - 1])
        m._sure = sure
        return m

    def _find(self, key: K) -> tuple[int, int, bool]:
        """(chunk, position in it, whether ``key`` is there); ``key`` belongs at that place."""
        i = max(bisect_right(self._firsts, key) - 1, 0)
        ks = self._keys[i]
        j = bisect_left(ks, key)
        return i, j, j < len(ks) and ks[j] == key

    def get(self, key: K) -> V | None:
        """The value at ``key``, or None."""
        i = bisect_right(self._firsts, key) - 1
        if i < 0:  # before the first key
            return None
        ks = self._keys[i]
        j = bisect_left(ks, key)
        return self._vals[i][j] if j < len(ks) and ks[j] == key else None

    def _has(self, key: K) -> bool:
        i = bisect_right(self._firsts, key) - 1
        if i < 0:  # before the first key
            return False
        ks = self._keys[i]
        j = bisect_left(ks, key)
        return j < len(ks) and ks[j] == key

    def __getitem__(self, key: K) -> V:
        i, j, hit = self._find(key)
        if hit:
            return self._vals[i][j]
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return self._has(key)  # type: ignore[arg-type]

    def set(self, key: K, value: V) -> Chunked[K, V]:
        """This map with ``key`` set to ``value`` (itself when it already holds exactly that)."""
        i, j, hit = self._find(key)
        ks, vs = self._keys[i], self._vals[i]
        if hit:
            old = vs[j]
            if old is value:
                return self
            sure = old != value
            if not sure and type(old) is type(value):
                return self
            vals = self._vals  # the same keys: only one chunk of values is copied
            return self._edited(
                sure,
                key,
                self._keys,
                (*vals[:i], (*vs[:j], value, *vs[j + 1 :]), *vals[i + 1 :]),
                self._firsts,
                self._len,
            )
        nks, nvs, size = (*ks[:j], key, *ks[j:]), (*vs[:j], value, *vs[j:]), self._len + 1
        keys, vals, firsts = self._keys, self._vals, self._firsts
        if len(nks) <= SMALL or len(nks) <= 2 * isqrt(size):
            m = self._edited(
                True,
                key,
                (*keys[:i], nks, *keys[i + 1 :]),
                (*vals[:i], nvs, *vals[i + 1 :]),
                firsts if j else (*firsts[:i], key, *firsts[i + 1 :]),
                size,
            )
        else:
            h = len(nks) // 2  # split the chunk in two
            m = self._edited(
                True,
                key,
                (*keys[:i], nks[:h], nks[h:], *keys[i + 1 :]),
                (*vals[:i], nvs[:h], nvs[h:], *vals[i + 1 :]),
                (*firsts[:i], nks[0], nks[h], *firsts[i + 1 :]),
                size,
            )
        return m

    def delete(self, key: K) -> Map[K, V]:
        """This map without ``key`` (itself when ``key`` is absent; a tuple once small)."""
        i, j, hit = self._find(key)
        if not hit:
            return self
        if self._len - 1 <= SMALL:
            return tuple(kv for kv in self if kv[0] != key)
        ks, vs = self._keys[i], self._vals[i]
        nks, nvs = ks[:j] + ks[j + 1 :], vs[:j] + vs[j + 1 :]
        new_k, new_v, new_f = ((nks,), (nvs,), (nks[0],)) if nks else ((), (), ())
        return self._edited(
            True,
            key,
            self._keys[:i] + new_k + self._keys[i + 1 :],
            self._vals[:i] + new_v + self._vals[i + 1 :],
            self._firsts[:i] + new_f + self._firsts[i + 1 :],
            self._len - 1,
        )

    def keys(self) -> Iterator[K]:
        """The keys, in order."""
        return chain.from_iterable(self._keys)

    def __iter__(self) -> Iterator[tuple[K, V]]:
        """The ``(key, value)`` pairs, in key order (as the sorted tuple this map stands for)."""
        return chain.from_iterable(map(zip, self._keys, self._vals))

    def __len__(self) -> int:
        return self._len

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Chunked):
            return NotImplemented
        if self._len != other._len:
            return False
        if self._firsts == other._firsts:  # same chunks if the same keys: compare in C
            return self._keys == other._keys and self._vals == other._vals
        return tuple(self) == tuple(other)

    def __hash__(self) -> int:
        """The hash of the sorted tuple of pairs (computed once)."""
        if self._hash is None:
            self._hash = hash(tuple(self))
        return self._hash

    def __repr__(self) -> str:
        return f"Chunked({dict(self)!r})"

    def _since(self, other: Chunked[K, V]) -> tuple[K, ...] | None:
        """The keys edited since ``other``, if ``other`` is a recent ancestor (else None)."""
        for i, origin in enumerate(self._origins):
            if origin() is other:
                return self._edits[: i + 1]
        return None

    def _entry(self, key: K) -> tuple[V] | tuple[()]:
        """``(value,)`` at ``key``, or ``()`` when absent (values may be None)."""
        i, j, hit = self._find(key)
        return (self._vals[i][j],) if hit else ()

    def changed(self, other: Chunked[K, V]) -> list[K]:
        """The keys whose entry differs between this map and ``other`` (present in one only, or
        with unequal values). When one was edited from the other a few edits ago (its lineage),
        only the keys edited in between are read. Otherwise chunks the two share are skipped
        unread, and within a chunk only the stretch between the first and the last difference
        is read."""
        a, b = self, other
        if b._origins and b._origins[0]() is a and b._sure:  # the common case: one edit
            return [b._edits[0]]
        if a._origins and a._origins[0]() is b and a._sure:
            return [a._edits[0]]
        edited = b._since(a) if b._origins else None
        if edited is None and a._origins:
            edited = a._since(b)
        if edited is not None:  # an edit may have been undone by a later one: compare each key
            return [k for k in dict.fromkeys(edited) if a._entry(k) != b._entry(k)]
        if len(a._keys) == len(b._keys):
            at = set(compress(count(), map(is_not, a._keys, b._keys)))
            at.update(compress(count(), map(is_not, a._vals, b._vals)))
            pairs = [(a._keys[i], a._vals[i], b._keys[i], b._vals[i]) for i in sorted(at)]
        else:  # a chunk was split or emptied: compare every chunk the two do not share
            ids_a = {
                (id(k), id(v)): n for n, (k, v) in enumerate(zip(a._keys, a._vals, strict=True))
            }
            ids_b = {
                (id(k), id(v)): n for n, (k, v) in enumerate(zip(b._keys, b._vals, strict=True))
            }
            mine = [n for key, n in ids_a.items() if key not in ids_b]
            theirs = [n for key, n in ids_b.items() if key not in ids_a]
            pairs = [
                (
                    tuple(chain.from_iterable(a._keys[n] for n in mine)),
                    tuple(chain.from_iterable(a._vals[n] for n in mine)),
                    tuple(chain.from_iterable(b._keys[n] for n in theirs)),
                    tuple(chain.from_iterable(b._vals[n] for n in theirs)),
                )
            ]
        out: list[K] = []
        da: dict[K, V] = {}
        db: dict[K, V] = {}
        for ka, va, kb, vb in pairs:
            if ka is kb:  # the same keys: compare the values in place
                out += [ka[i] for i in compress(count(), map(is_not, va, vb)) if va[i] != vb[i]]
                continue
            n, m = len(ka), len(kb)
            p = next(compress(count(), map(is_not, ka, kb)), min(n, m))
            q = next(compress(count(), map(is_not, reversed(ka), reversed(kb))), min(n, m))
            q = min(q, min(n, m) - p)  # same keys in ka[:p], kb[:p] and in the last q of both
            out += [ka[i] for i in compress(count(), map(is_not, va[:p], vb[:p])) if va[i] != vb[i]]
            out += [
                ka[n - q + i]
                for i in compress(count(), map(is_not, va[n - q :], vb[m - q :]))
                if va[n - q + i] != vb[m - q + i]
            ]
            da.update(zip(ka[p : n - q], va[p : n - q], strict=True))
            db.update(zip(kb[p : m - q], vb[p : m - q], strict=True))
        out += da.keys() ^ db.keys()
        out += [k for k in da.keys() & db.keys() if da[k] is not db[k] and da[k] != db[k]]
        return out


class ChunkedSet(abc.Set[K]):
    """An immutable set of more than ``SMALL`` members, in sorted order: ``ChunkedSet({...})``;
    a ``Chunked`` map to None underneath."""

    __slots__ = ("_cached_hash", "_map")

    def __init__(self, members: Iterable[K]) -> None:
        self._map: Chunked[K, None] = Chunked((m, None) for m in members)
        self._cached_hash: int | None = None

    @classmethod
    def _of(cls, m: Chunked[K, None]) -> ChunkedSet[K]:
        s: ChunkedSet[K] = cls.__new__(cls)
        s._map, s._cached_hash = m, None
        return s

    def add(self, member: K) -> ChunkedSet[K]:
        """This set with ``member`` (itself when already there)."""
        m = self._map.set(member, None)
        return self if m is self._map else ChunkedSet._of(m)

    def discard(self, member: K) -> Ids[K]:
        """This set without ``member`` (itself when absent; a frozenset once small)."""
        m = self._map.delete(member)
        if m is self._map:
            return self
        return ChunkedSet._of(m) if isinstance(m, Chunked) else frozenset(k for k, _ in m)

    def __contains__(self, member: object) -> bool:
        return self._map._has(member)  # type: ignore[arg-type]

    def __iter__(self) -> Iterator[K]:
        return self._map.keys()

    def __len__(self) -> int:
        return len(self._map)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ChunkedSet):
            return other is self or self._map == other._map
        return NotImplemented

    def __hash__(self) -> int:
        """The hash of the sorted tuple of members (computed once)."""
        if self._cached_hash is None:
            self._cached_hash = hash(tuple(self))
        return self._cached_hash

    def __repr__(self) -> str:
        return f"ChunkedSet({{{', '.join(repr(m) for m in self)}}})"


#: A map: a sorted tuple of (key, value) pairs up to ``SMALL`` entries, else ``Chunked``.
Map: TypeAlias = tuple[tuple[K, V], ...] | Chunked[K, V]
#: A set: a frozenset up to ``SMALL`` members, else ``ChunkedSet``.
Ids: TypeAlias = frozenset[K] | ChunkedSet[K]


def as_map(items: Mapping[K, V] | Iterable[tuple[K, V]]) -> Map[K, V]:
    """The map holding ``items`` (a dict, or pairs; a later pair wins), in its form for its size."""
    pairs = dict(items)
    return Chunked(pairs) if len(pairs) > SMALL else tuple(sorted(pairs.items()))


def as_ids(members: Iterable[K]) -> Ids[K]:
    """The set holding ``members``, in its form for its size."""
    s = frozenset(members)
    return ChunkedSet(s) if len(s) > SMALL else s


def get(m: Map[K, V], key: K) -> V | None:
    """The value at ``key``, or None."""
    if type(m) is tuple:
        if len(m) > 8:  # bisect the sorted pairs: ``(key,)`` sorts just before ``(key, value)``
            i = bisect_left(m, (key,))
            return m[i][1] if i < len(m) and m[i][0] == key else None
        for k, v in m:
            if k == key:
                return v
        return None
    return m.get(key)  # type: ignore[union-attr]


def put(m: Map[K, V], key: K, value: V) -> Map[K, V]:
    """``m`` with ``key`` set to ``value`` (keys stay sorted)."""
    if type(m) is not tuple:
        return m.set(key, value)  # type: ignore[union-attr]
    for i, (k, _) in enumerate(m):
        if k == key:
            return (*m[:i], (key, value), *m[i + 1 :])
        if key < k:
            out = (*m[:i], (key, value), *m[i:])
            break
    else:
        out = (*m, (key, value))
    return Chunked(out) if len(out) > SMALL else out


def drop(m: Map[K, V], key: K) -> Map[K, V]:
    """``m`` without ``key``."""
    if type(m) is not tuple:
        return m.delete(key)  # type: ignore[union-attr]
    for i, (k, _) in enumerate(m):
        if k == key:
            return m[:i] + m[i + 1 :]
    return m


def add(s: Ids[K], member: K) -> Ids[K]:
    """``s`` with ``member``."""
    if type(s) is not frozenset:
        return s.add(member)  # type: ignore[union-attr]
    if member in s:
        return s
    out = s | {member}
    return ChunkedSet(out) if len(out) > SMALL else out


def discard(s: Ids[K], member: K) -> Ids[K]:
    """``s`` without ``member``."""
    if type(s) is not frozenset:
        return s.discard(member)  # type: ignore[union-attr]
    return s - {member}


T = TypeVar("T")


def unshared(a: tuple[T, ...], b: tuple[T, ...]) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """``a`` and ``b`` without the items both hold, the same objects, at the same place from
    either end: what an edit (``put``, ``drop``) did not copy, found by identity in C."""
    n, m = len(a), len(b)
    lim = min(n, m)
    i = next(compress(count(), map(is_not, a, b)), lim)
    j = min(next(compress(count(), map(is_not, reversed(a), reversed(b))), lim), lim - i)
    return a[i : n - j], b[i : m - j]


def changed(a: Map[K, Any] | Ids[K], b: Map[K, Any] | Ids[K]) -> list[K]:
    """The keys (of maps) or members (of sets) in which ``a`` and ``b`` differ: present in one
    only, or with unequal values. Chunked values read only the chunks a step did not share."""
    if a is b:
        return []
    ta, tb = type(a), type(b)
    if ta is Chunked and tb is Chunked:
        return a.changed(b)  # type: ignore[union-attr,arg-type]
    if ta is ChunkedSet and tb is ChunkedSet:
        return a._map.changed(b._map)  # type: ignore[union-attr]
    if ta is frozenset and tb is frozenset:
        return list(a ^ b)  # type: ignore[operator]
    if isinstance(a, abc.Set):
        return list(set(a) ^ set(b))  # type: ignore[arg-type]
    if ta is tuple and tb is tuple:
        a, b = unshared(a, b)  # type: ignore[arg-type]
        # One side's rest empty (an insertion or a removal, most edits): the other's keys are
        # absent from the shared parts of both (each map's keys are distinct), so all differ.
        if not a:
            return [k for k, _ in b]
        if not b:
            return [k for k, _ in a]
    rest = dict(a)
    out: list[K] = []
    for k, v in b:  # type: ignore[misc]
        old = rest.pop(k, _ABSENT)
        if old is not v and (old is _ABSENT or old != v):
            out.append(k)
    out += rest
    return out


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

    leases: Map[str, Lease] = ()
    completed: Ids[str] = frozenset()
    attempts: Map[str, int] = ()


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
    leases: Map[str, StateLease] = ()
    stats: Map[str, Stats] = ()


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
    restarts are counted by the coordinator's epoch. ``gens`` is the master's counter of dispatch
    generations per rank (``Master._generations``; empty under rank fencing): lost at a restart
    and resumed from the journal (``system.resume_generations``).
    """

    wall: int = 0
    mono: int = 0
    journal: Journal = Journal()
    coordinator: Coordinator = Coordinator()
    active: tuple[tuple[int, Dispatch], ...] = ()
    net: Ids[tuple[int, str]] = frozenset()
    dups: int = 0
    reboots: int = 0
    rollbacks: int = 0
    gnet: Ids[tuple[int, str, int]] = frozenset()
    gens: Map[int, int] = ()  # per rank, its dispatch generation counter (0s absent)
