"""Immutable state values of the model (named tuples: cheap to build and hash); every ``repr``
pastes back as Python.

A map (``Map``) is a sorted tuple of ``(key, value)`` pairs holding only the keys present while it
has at most ``SMALL`` entries, and a ``Hamt`` map beyond; a set of IDs (``Ids``) is a
``frozenset`` up to ``SMALL`` members and a ``HamtSet`` beyond. Which form a value takes is a
function of its size alone, so equal contents always have the same form and states hash, compare
and print deterministically. The model checker's states are all small: its hot path runs on
plain tuples and frozensets (C code). A run of 10⁵ work IDs grows large values: a hash array
mapped trie (``immutables.Map``, C code) underneath, read and edited in time that does not grow
with the map, and ``changed`` finds what a step changed without reading everything (between a
value and one it was edited from a few edits before, by reading only the keys of those edits). The helpers
below (``get``, ``put``, ``drop``, ``revalued``, ``add``, ``discard``, ``changed``) are the only
way the model reads by key and edits them.
"""

from __future__ import annotations

from collections import abc
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Generic, NamedTuple, Protocol, TypeAlias, TypeVar

from immutables import Map as _Trie


class _Ordered(Protocol):
    """A key that sorts and hashes: what ``sorted``, ``bisect`` and a ``Hamt`` need."""

    def __lt__(self, other: Any, /) -> bool: ...

    def __hash__(self) -> int: ...


K = TypeVar("K", bound=_Ordered)
V = TypeVar("V")

#: Most entries a map or set holds in its plain form (tuple, frozenset); beyond, it is a ``Hamt``.
#: The model checker's states hold at most a few (its bounds have three work IDs), so they stay
#: plain; a run's maps of tens of entries (its leases in flight) read and edit faster as a trie
#: than as a tuple scanned, bisected and copied (callgrind, a real 2,000-item trace: 393,000
#: instructions a step at 64, 377,000 at 32, 367,000 at 8).
SMALL = 8
#: How many edits back a ``Hamt`` remembers the maps it was edited from (``Hamt.changed``).
LINEAGE = 4

_NO_LINEAGE: tuple[Any, ...] = ()
_ABSENT: Any = object()


class Hamt(Generic[K, V]):
    """An immutable map of more than ``SMALL`` entries that reads as its sorted tuple of pairs:
    ``Hamt({...})``.

    Stored as a hash array mapped trie (``immutables.Map``, in C): ``get`` is a few hashed
    steps, ``set`` and ``delete`` copy one path of the trie (at most seven nodes of 32 slots), so
    neither grows with the map in practice. It iterates, compares, hashes and prints as the
    sorted tuple of pairs it stands for (that tuple is made once, when first asked for: the
    model never iterates a large map on a replay's hot path).

    Lineage: a map made by ``set`` or ``delete`` remembers the tries of the maps it was edited
    from (up to ``LINEAGE`` edits back) and the key of each edit, so ``changed`` between a map
    and one of its recent ancestors reads only the keys edited in between. A trie holds no
    lineage of its own, so what a map keeps alive is bounded (the paths its last few edits
    copied), not a chain of every map before it; a trie stands for one map (each edit makes a
    new one), so finding an ancestor's trie is finding that ancestor. It is not part of the
    value: equality, hash, ``repr`` and pickling ignore it.
    """

    __slots__ = ("_edits", "_hash", "_m", "_origins", "_pairs", "_sure")

    _m: _Trie[K, V]
    _hash: int | None
    _pairs: tuple[tuple[K, V], ...] | None
    #: The tries of the maps this one was edited from, the nearest first, and the key of each
    #: edit since: ``_edits[: i + 1]`` are the keys edited since the map of ``_origins[i]``.
    _origins: tuple[_Trie[K, V], ...]
    _edits: tuple[K, ...]
    #: Whether the last edit certainly changed its entry (a value of another type may be equal).
    _sure: bool

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] | None = None) -> None:
        if items is None:  # ``Hamt.__new__(Hamt)`` compiled (mypyc) calls ``__init__``
            return
        m: _Trie[K, V] = _Trie(dict(items))
        if len(m) <= SMALL:
            raise ValueError(f"a Hamt holds more than {SMALL} entries (use as_map)")
        self._m, self._hash, self._pairs = m, None, None
        self._origins = self._edits = _NO_LINEAGE
        self._sure = False

    def __reduce__(self) -> tuple[type[Hamt[K, V]], tuple[dict[K, V]]]:
        """Pickled and copied as its pairs (a copy has no lineage)."""
        return Hamt, (dict(self._m.items()),)

    def _edited(self, sure: bool, key: K, m: _Trie[K, V]) -> Hamt[K, V]:
        """The map of trie ``m``, made from this one by an edit at ``key``."""
        h: Hamt[K, V] = Hamt.__new__(Hamt)
        h._m, h._hash, h._pairs = m, None, None
        # Concatenated: half the cost of (m, *...), and four maps are edited at every step.
        h._origins = (self._m,) + self._origins[: LINEAGE - 1]  # noqa: RUF005
        h._edits = (key,) + self._edits[: LINEAGE - 1]  # noqa: RUF005
        h._sure = sure
        return h

    def get(self, key: K) -> V | None:
        """The value at ``key``, or None."""
        return self._m.get(key)

    def _has(self, key: K) -> bool:
        return key in self._m

    def __getitem__(self, key: K) -> V:
        return self._m[key]

    def __contains__(self, key: object) -> bool:
        return key in self._m

    def set(self, key: K, value: V) -> Hamt[K, V]:
        """This map with ``key`` set to ``value`` (itself when it already holds exactly that)."""
        m = self._m
        old = m[key] if key in m else _ABSENT  # noqa: SIM401  # C slots: see ``get``
        if old is value:
            return self
        sure = True
        if old is not _ABSENT:
            sure = old != value
            if not sure and type(old) is type(value):
                return self
        return self._edited(sure, key, self._m.set(key, value))

    def delete(self, key: K) -> Map[K, V]:
        """This map without ``key`` (itself when ``key`` is absent; a tuple once small)."""
        if key not in self._m:
            return self
        if len(self._m) - 1 <= SMALL:
            return tuple(kv for kv in self._sorted() if kv[0] != key)
        return self._edited(True, key, self._m.delete(key))

    def _sorted(self) -> tuple[tuple[K, V], ...]:
        """The sorted tuple of pairs this map stands for (made once)."""
        if self._pairs is None:
            self._pairs = tuple(sorted(self._m.items()))
        return self._pairs

    def keys(self) -> Iterator[K]:
        """The keys, in order."""
        return (k for k, _ in self._sorted())

    def __iter__(self) -> Iterator[tuple[K, V]]:
        """The ``(key, value)`` pairs, in key order (as the sorted tuple this map stands for)."""
        return iter(self._sorted())

    def __len__(self) -> int:
        return len(self._m)

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Hamt):
            return NotImplemented
        return bool(self._m == other._m)

    def __hash__(self) -> int:
        """The hash of the sorted tuple of pairs (computed once)."""
        if self._hash is None:
            self._hash = hash(self._sorted())
        return self._hash

    def __repr__(self) -> str:
        return f"Hamt({dict(self._sorted())!r})"

    def _since(self, other: Hamt[K, V]) -> tuple[K, ...] | None:
        """The keys edited since ``other``, if ``other`` is a recent ancestor (else None)."""
        m = other._m
        for i, origin in enumerate(self._origins):
            if origin is m:
                return self._edits[: i + 1]
        return None

    def _entry(self, key: K) -> tuple[V] | tuple[()]:
        """``(value,)`` at ``key``, or ``()`` when absent (values may be None)."""
        m = self._m
        return (m[key],) if key in m else ()

    def changed(self, other: Hamt[K, V]) -> list[K]:
        """The keys whose entry differs between this map and ``other`` (present in one only, or
        with unequal values). When one was edited from the other a few edits ago (its lineage),
        only the keys edited in between are read; otherwise every entry is."""
        a, b = self, other
        if b._origins and b._origins[0] is a._m and b._sure:  # the common case: one edit
            return [b._edits[0]]
        if a._origins and a._origins[0] is b._m and a._sure:
            return [a._edits[0]]
        edited = b._since(a) if b._origins else None
        if edited is None and a._origins:
            edited = a._since(b)
        if edited is not None:  # an edit may have been undone by a later one: compare each key
            return [k for k in dict.fromkeys(edited) if a._entry(k) != b._entry(k)]
        ma, mb = a._m, b._m
        out: list[K] = [k for k in ma if k not in mb]
        for k, v in mb.items():
            old = ma.get(k, _ABSENT)
            if old is not v and (old is _ABSENT or old != v):
                out.append(k)
        return out


class HamtSet(Generic[K]):
    """An immutable set of more than ``SMALL`` members that reads as its sorted members:
    ``HamtSet({...})``; a ``Hamt`` map to None underneath. A ``collections.abc.Set`` by
    registration (below), not by inheritance: compiled by mypyc (``leasefence trace compile``), a
    class that inherits from the ABC inherits none of its mixins, and ``isinstance(frozenset(),
    HamtSet)`` came out true."""

    __slots__ = ("_cached_hash", "_map")

    def __init__(self, members: Iterable[K] | None = None) -> None:
        if members is None:  # ``HamtSet.__new__(HamtSet)`` compiled (mypyc) calls ``__init__``
            return
        self._map: Hamt[K, None] = Hamt((m, None) for m in members)
        self._cached_hash: int | None = None

    @classmethod
    def _of(cls, m: Hamt[K, None]) -> HamtSet[K]:
        s: HamtSet[K] = HamtSet.__new__(HamtSet)
        s._map, s._cached_hash = m, None
        return s

    def add(self, member: K) -> HamtSet[K]:
        """This set with ``member`` (itself when already there)."""
        m = self._map.set(member, None)
        return self if m is self._map else HamtSet._of(m)

    def discard(self, member: K) -> Ids[K]:
        """This set without ``member`` (itself when absent; a frozenset once small)."""
        m = self._map.delete(member)
        if m is self._map:
            return self
        return HamtSet._of(m) if isinstance(m, Hamt) else frozenset(k for k, _ in m)

    def __contains__(self, member: object) -> bool:
        return member in self._map._m

    def __iter__(self) -> Iterator[K]:
        return self._map.keys()

    def __len__(self) -> int:
        return len(self._map)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, HamtSet):
            return other is self or self._map == other._map
        return NotImplemented

    def __hash__(self) -> int:
        """The hash of the sorted tuple of members (computed once)."""
        if self._cached_hash is None:
            self._cached_hash = hash(tuple(self))
        return self._cached_hash

    def __repr__(self) -> str:
        return f"HamtSet({{{', '.join(repr(m) for m in self)}}})"

    # The comparisons and operators of a set, written out: ``abc.Set`` gives them as mixins,
    # which a class compiled by mypyc (``leasefence trace compile``) does not inherit. Results
    # take the form of their size (``as_ids``), as every set of the model does; an operand that
    # is not a set gets NotImplemented, as from a frozenset.
    def __le__(self, other: object) -> bool:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return len(self) <= len(other) and all(m in other for m in self)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return len(self) < len(other) and all(m in other for m in self)

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return len(self) >= len(other) and all(m in self for m in other)

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return len(self) > len(other) and all(m in self for m in other)

    def isdisjoint(self, other: Iterable[Any]) -> bool:
        return not any(m in self for m in other)

    def __and__(self, other: abc.Set[Any]) -> Ids[K]:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return as_ids(m for m in self if m in other)

    def __rand__(self, other: abc.Set[Any]) -> Ids[K]:
        return self.__and__(other)  # symmetric; NotImplemented for a non-set, as there

    def __or__(self, other: abc.Set[Any]) -> Ids[K]:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return as_ids((*self, *other))

    def __ror__(self, other: abc.Set[Any]) -> Ids[K]:
        return self.__or__(other)  # symmetric; NotImplemented for a non-set, as there

    def __sub__(self, other: abc.Set[Any]) -> Ids[K]:
        if not isinstance(other, abc.Set):
            return NotImplemented
        drop = set(other)
        return as_ids(m for m in self if m not in drop)

    def __rsub__(self, other: abc.Set[Any]) -> Ids[K]:
        if not isinstance(other, abc.Set):
            return NotImplemented
        return as_ids(m for m in other if m not in self)

    def __xor__(self, other: abc.Set[Any]) -> Ids[K]:
        if not isinstance(other, abc.Set):
            return NotImplemented
        theirs = set(other)
        return as_ids(
            (*(m for m in self if m not in theirs), *(m for m in theirs if m not in self))
        )

    def __rxor__(self, other: abc.Set[Any]) -> Ids[K]:
        return self.__xor__(other)  # symmetric; NotImplemented for a non-set, as there


abc.Set.register(HamtSet)

#: A map: a sorted tuple of (key, value) pairs up to ``SMALL`` entries, else ``Hamt``.
Map: TypeAlias = tuple[tuple[K, V], ...] | Hamt[K, V]
#: A set: a frozenset up to ``SMALL`` members, else ``HamtSet``.
Ids: TypeAlias = frozenset[K] | HamtSet[K]


def as_map(items: Mapping[K, V] | Iterable[tuple[K, V]]) -> Map[K, V]:
    """The map holding ``items`` (a dict, or pairs; a later pair wins), in its form for its size."""
    pairs = dict(items)
    return Hamt(pairs) if len(pairs) > SMALL else tuple(sorted(pairs.items()))


def as_ids(members: Iterable[K]) -> Ids[K]:
    """The set holding ``members``, in its form for its size."""
    s = frozenset(members)
    return HamtSet(s) if len(s) > SMALL else s


def revalued(m: Map[K, V], pairs: tuple[tuple[K, V], ...]) -> Map[K, V]:
    """``m`` with new values: ``pairs`` holds ``m``'s keys, in its order, each with its new
    value; in ``m``'s form (the same keys, so the same size)."""
    return pairs if type(m) is tuple else as_map(pairs)


def get(m: Map[K, V], key: K) -> V | None:
    """The value at ``key``, or None."""
    if type(m) is tuple:
        for k, v in m:
            if k == key:
                return v
        return None
    # A Hamt: ``in`` and ``[]`` reach the trie's C slots; its ``get`` method, called from
    # compiled code (``trace compile``), is looked up on every call (600 instructions).
    t = m._m  # type: ignore[union-attr]
    return t[key] if key in t else None  # noqa: SIM401


def put(m: Map[K, V], key: K, value: V) -> Map[K, V]:
    """``m`` with ``key`` set to ``value`` (keys stay sorted)."""
    if type(m) is not tuple:
        return m.set(key, value)  # type: ignore[union-attr]
    i = _place(m, key)
    if i < len(m) and m[i][0] == key:
        return (*m[:i], (key, value), *m[i + 1 :])
    out = (*m[:i], (key, value), *m[i:])
    return Hamt(out) if len(out) > SMALL else out


def _place(m: tuple[tuple[K, V], ...], key: K) -> int:
    """Where ``key`` is, or would go, in the sorted pairs ``m`` (at most ``SMALL``: a scan)."""
    for i, (k, _) in enumerate(m):
        if not k < key:
            return i
    return len(m)


def drop(m: Map[K, V], key: K) -> Map[K, V]:
    """``m`` without ``key``."""
    if type(m) is not tuple:
        return m.delete(key)  # type: ignore[union-attr]
    i = _place(m, key)
    if i < len(m) and m[i][0] == key:
        return m[:i] + m[i + 1 :]
    return m


def add(s: Ids[K], member: K) -> Ids[K]:
    """``s`` with ``member``."""
    if type(s) is not frozenset:
        return s.add(member)  # type: ignore[union-attr]
    if member in s:
        return s
    out = s | {member}
    return HamtSet(out) if len(out) > SMALL else out


def discard(s: Ids[K], member: K) -> Ids[K]:
    """``s`` without ``member``."""
    if type(s) is not frozenset:
        return s.discard(member)  # type: ignore[union-attr]
    return s - {member}


T = TypeVar("T")


def unshared(a: tuple[T, ...], b: tuple[T, ...]) -> tuple[tuple[T, ...], tuple[T, ...]]:
    """``a`` and ``b`` without the longest prefix and suffix they share: what an edit (``put``,
    ``drop``, ``system._add``) did not copy, the same objects at the same place from either end.
    A long tuple is cut where a bisection on identity says once the stretches left out are
    confirmed equal (one comparison in C), else (a difference before items that are the same)
    by a scan; a short one by a scan."""
    n, m = len(a), len(b)
    lim = min(n, m)
    if lim > _SCAN:
        e = _EDITS.get(id(b))
        if e is not None and e[0] is b and e[1] is a:  # b was made from a by one edit
            i, cut, new = e[2:]
            return a[i : i + cut], b[i : i + new]
        e = _EDITS.get(id(a))
        if e is not None and e[0] is a and e[1] is b:
            i, cut, new = e[2:]
            return a[i : i + new], b[i : i + cut]
        lo, hi = 0, lim
        while lo < hi:  # the first place from the start holding two objects
            mid = (lo + hi) // 2
            if a[mid] is b[mid]:
                lo = mid + 1
            else:
                hi = mid
        if not lo or a[:lo] == b[:lo]:
            i, lo, hi = lo, 0, lim - lo
            while lo < hi:  # the same from the end, in what is left
                mid = (lo + hi) // 2
                if a[n - 1 - mid] is b[m - 1 - mid]:
                    lo = mid + 1
                else:
                    hi = mid
            if not lo or a[n - lo :] == b[m - lo :]:
                return a[i : n - lo], b[i : m - lo]
    # A short one by a plain loop from each end (iterators in C cost more to set up than a few
    # steps of Python save).
    i = 0
    while i < lim and a[i] is b[i]:
        i += 1
    j, lim = 0, lim - i
    while j < lim and a[n - 1 - j] is b[m - 1 - j]:
        j += 1
    return a[i : n - j], b[i : m - j]


#: Tuples up to this length are compared by a scan in ``unshared`` (cheaper than a bisection).
_SCAN = 16

#: The last few edits of tuples longer than ``_SCAN`` (the active dispatches: a map that long is a
#: ``Hamt``), by id of the tuple each made: ``(made,
#: source, at, cut, new)``, ``made`` being ``source`` with its ``cut`` items from ``at`` replaced by
#: ``new`` items made for it. Each entry holds both tuples, so their ids cannot be reused while
#: it lives (as ``incremental._INDEX``); ``unshared`` reads a step's edit here instead of looking
#: for it. A cache: what is read through ``unshared`` (the keys that changed, the dispatches that
#: moved) is the same without it (``test_incremental``).
_EDITS: dict[int, tuple[tuple[Any, ...], tuple[Any, ...], int, int, int]] = {}
_EDITS_SIZE = 64


def edited(
    made: tuple[T, ...], source: tuple[T, ...], at: int, cut: int, new: int
) -> tuple[T, ...]:
    """``made``, noted as ``source`` with ``cut`` items from ``at`` replaced by ``new`` items
    that are new objects (what ``system``'s ``_add`` and ``_remove`` do)."""
    if len(source) > _SCAN:
        if len(_EDITS) >= _EDITS_SIZE:
            _EDITS.clear()
        _EDITS[id(made)] = (made, source, at, cut, new)
    return made


def changed(a: Map[K, Any] | Ids[K], b: Map[K, Any] | Ids[K]) -> list[K]:
    """The keys (of maps) or members (of sets) in which ``a`` and ``b`` differ: present in one
    only, or with unequal values. A ``Hamt`` reads only the keys edited in between (``Hamt.changed``)."""
    if a is b:
        return []
    ta, tb = type(a), type(b)
    if ta is Hamt and tb is Hamt:
        return a.changed(b)  # type: ignore[union-attr,arg-type]
    if ta is HamtSet and tb is HamtSet:
        return a._map.changed(b._map)  # type: ignore[union-attr]
    if ta is frozenset and tb is frozenset:
        return list(a ^ b)  # type: ignore[operator]
    if ta is tuple and tb is tuple:
        a, b = unshared(a, b)  # type: ignore[arg-type]
        # One side's rest empty (an insertion or a removal, most edits): the other's keys are
        # absent from the shared parts of both (each map's keys are distinct), so all differ.
        if not a:
            return [k for k, _ in b]
        if not b:
            return [k for k, _ in a]
        if len(a) == 1 == len(b):  # one entry replaced (most other edits)
            (k, old), (key, v) = a[0], b[0]
            if k == key:
                return [] if old is v or old == v else [k]
    elif isinstance(a, (frozenset, HamtSet)):  # a set either side of SMALL
        return list(set(a) ^ set(b))  # type: ignore[arg-type]
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


def _replacer(cls: type[tuple[Any, ...]]) -> Any:
    """``cls._replace`` as ``namedtuple`` defines it (a copy with the named fields set; an
    unknown name is a ValueError) in one Python call instead of two: the model's actions call it
    at every step of a replay."""
    index = {name: i for i, name in enumerate(cls._fields)}  # type: ignore[attr-defined]
    new = tuple.__new__

    def _replace(self: tuple[Any, ...], /, **changes: Any) -> tuple[Any, ...]:
        fields = list(self)
        try:
            for name, value in changes.items():
                fields[index[name]] = value
        except KeyError:
            raise ValueError(f"Got unexpected field names: {list(changes)!r}") from None
        return new(cls, fields)

    _replace.__qualname__ = f"{cls.__name__}._replace"
    return _replace


for _cls in (State, Journal, Coordinator):
    setattr(_cls, "_replace", _replacer(_cls))  # noqa: B010  # a NamedTuple body may not define it
