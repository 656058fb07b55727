"""The persistent maps of the model state and the incremental invariant checks of trace replay
give the same answers as the plain definitions they stand in for."""

from __future__ import annotations

import collections.abc
import copy
import gc
import operator
import pickle
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from leasefence.model import incremental, invariants, state, system
from leasefence.model.check import reachable
from leasefence.model.flavours import Flavour
from leasefence.model.rules import (
    CLOCK_LEGACY,
    CLOCK_MONO,
    CLOCK_UNIX,
    reclaimable,
    reclaimable_within,
)
from leasefence.model.state import (
    LINEAGE,
    SMALL,
    Coordinator,
    Dispatch,
    Hamt,
    HamtSet,
    Ids,
    Journal,
    Lease,
    Map,
    State,
    StateLease,
    Stats,
    add,
    as_ids,
    as_map,
    changed,
    discard,
    drop,
    get,
    put,
    unshared,
)
from leasefence.model.system import Bounds, successors

#: The CI graph: the bounds of ``leasefence model check --max-wall 1 --dups 0`` (10,718 states).
CI = Bounds(max_wall=1, max_dups=0)

edits = st.lists(
    st.tuples(st.booleans(), st.integers(0, 400), st.integers(0, 3)), min_size=1, max_size=300
)


@settings(max_examples=60, deadline=None)
@given(edits)
def test_a_map_edited_at_random_reads_compares_and_prints_as_the_dict_it_stands_for(
    ops: list[tuple[bool, int, int]],
) -> None:
    m: Map[int, int] = ()
    ref: dict[int, int] = {}
    versions = [(m, dict(ref))]
    for is_set, key, value in ops:
        if is_set:
            m, ref[key] = put(m, key, value), value
        else:
            m = drop(m, key)
            ref.pop(key, None)
        versions.append((m, dict(ref)))
        assert isinstance(m, Hamt) == (len(ref) > SMALL)
        assert isinstance(m, tuple) == (len(ref) <= SMALL)
    pairs = tuple(sorted(ref.items()))
    assert tuple(m) == pairs
    assert len(m) == len(ref)
    assert dict(m) == ref
    assert m == as_map(ref)
    assert hash(m) == hash(as_map(ref))
    assert eval(repr(m), {"Hamt": Hamt}) == m
    assert all(get(m, k) == ref.get(k) for k in range(-1, 402))
    rng = random.Random(len(ops))
    for _ in range(20):
        (a, ra), (b, rb) = rng.choice(versions), rng.choice(versions)
        want = sorted(k for k in ra.keys() | rb.keys() if ra.get(k, -1) != rb.get(k, -1))
        assert sorted(changed(a, b)) == want
        assert (a == b) == (ra == rb)


def test_a_map_crossing_small_either_way_takes_the_form_as_map_gives_it() -> None:
    # At exactly SMALL + 1 entries a map is a Hamt; one entry fewer, the sorted tuple. A map
    # that kept the Hamt form at SMALL entries would compare unequal to the same map built
    # otherwise (a tuple), and hash otherwise: two equal model states told apart. (The random
    # edits above seldom reach SMALL + 1 keys; fails if ``delete`` turns tuple one entry late.)
    ref = {k: k * 2 for k in range(SMALL + 1)}
    m: Map[int, int] = ()
    for k, v in ref.items():
        m = put(m, k, v)
    assert isinstance(m, Hamt)
    assert m == as_map(ref)
    for k in (0, SMALL // 2, SMALL):
        smaller = drop(m, k)
        rest = {x: v for x, v in ref.items() if x != k}
        assert isinstance(smaller, tuple)
        assert smaller == as_map(rest)
        assert hash(smaller) == hash(as_map(rest))
        assert put(smaller, k, ref[k]) == m


def test_a_map_given_new_values_keeps_the_form_for_its_size() -> None:
    # ``revalued`` (a restart's and the live tick's leases, each value replaced): a map beyond
    # SMALL stays a trie equal to ``as_map``'s, a small one a tuple. (Fails if the new pairs are
    # kept as a tuple whatever their number: a state equal to another but unequal to it.)
    for size in (SMALL, SMALL + 1, 3 * SMALL):
        m: Map[int, int] = as_map({k: k for k in range(size)})
        pairs = tuple((k, -v) for k, v in m)
        out = state.revalued(m, pairs)
        assert type(out) is type(m)
        assert out == as_map(dict(pairs))
        assert hash(out) == hash(as_map(dict(pairs)))


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 300)), min_size=1, max_size=300))
def test_a_set_edited_at_random_holds_compares_and_prints_as_the_set_it_stands_for(
    ops: list[tuple[bool, int]],
) -> None:
    s: Ids[int] = frozenset()
    ref: set[int] = set()
    versions = [(s, set(ref))]
    for adding, member in ops:
        if adding:
            s = add(s, member)
            ref.add(member)
        else:
            s = discard(s, member)
            ref.discard(member)
        versions.append((s, set(ref)))
        assert isinstance(s, HamtSet) == (len(ref) > SMALL)
        assert isinstance(s, frozenset) == (len(ref) <= SMALL)
    assert set(s) == ref
    assert s == as_ids(ref)
    assert hash(s) == hash(as_ids(ref))
    if isinstance(s, HamtSet):
        assert list(s) == sorted(ref)
    assert eval(repr(s), {"HamtSet": HamtSet}) == s
    rng = random.Random(len(ops))
    for _ in range(20):
        (a, ra), (b, rb) = rng.choice(versions), rng.choice(versions)
        assert sorted(changed(a, b)) == sorted(ra ^ rb)
        assert (a == b) == (ra == rb)


@settings(max_examples=40, deadline=None)
@given(
    st.frozensets(st.integers(0, 2 * SMALL), max_size=2 * SMALL),
    st.frozensets(st.integers(0, 2 * SMALL), max_size=2 * SMALL),
)
def test_a_large_set_compares_and_combines_with_any_set_as_the_set_it_stands_for(
    ra: frozenset[int], rb: frozenset[int]
) -> None:
    """``HamtSet`` writes out the comparisons and operators ``collections.abc.Set`` would mix in
    (a compiled class inherits none): each gives what Python's sets give, either operand large or
    small, and every result has the form of its size."""
    a, b = as_ids(ra), as_ids(rb)
    assert isinstance(a, collections.abc.Set)
    assert isinstance(b, collections.abc.Set)
    assert not isinstance(frozenset(ra), HamtSet)  # a frozenset is never taken for a large set
    for x, y in ((a, b), (a, frozenset(rb)), (frozenset(ra), b)):
        if type(x) is not HamtSet and type(y) is not HamtSet:
            continue  # two frozensets: Python's own
        rx, ry = ra, rb
        assert (x <= y, x < y, x >= y, x > y) == (rx <= ry, rx < ry, rx >= ry, rx > ry)
        assert x.isdisjoint(y) == rx.isdisjoint(ry)
        for got, want in ((x & y, rx & ry), (x | y, rx | ry), (x - y, rx - ry), (x ^ y, rx ^ ry)):
            assert got == as_ids(want)
            assert type(got) is type(as_ids(want))
    for other in (5, [1, 2], "ab"):  # not sets: refused as a frozenset refuses them
        for op in (operator.and_, operator.or_, operator.sub, operator.xor, operator.le):
            with pytest.raises(TypeError):
                op(a, other)
            with pytest.raises(TypeError):
                op(other, a)


def _full(before: State, after: State, b: Bounds) -> list[str]:
    return invariants.violated(before, after, b)


def test_incremental_and_full_verdicts_agree_on_every_transition_of_the_ci_graph() -> None:
    check = incremental.Checker()
    transitions = 0
    for s, _label, t in reachable(CI):
        transitions += 1
        want = _full(s, t, CI)
        assert incremental.violated(s, t, CI, since=s) == want, (s, t)
        assert check(s, t, CI, s) == want, (s, t)
    assert transitions == 129_910  # 102,850 before the crash actions


@pytest.mark.parametrize("flavour", list(Flavour))
def test_incremental_and_full_verdicts_agree_on_every_transition_of_each_flavour(
    flavour: Flavour,
) -> None:
    b = Bounds(
        task_of=(("w1", "s1"), ("w2", "s1")),
        max_wall=1,
        max_reboots=0,
        max_rollbacks=0,
        max_dups=0,
        flavour=flavour,
    )
    for s, _label, t in reachable(b):
        want = _full(s, t, b)
        since = None if invariants.violated(None, s, b) else s
        assert incremental.violated(s, t, b, since=since) == want, (s, t)


def _walk(seed: int, steps: int, b: Bounds) -> list[State]:
    """A random run of the model: the states of ``steps`` steps from Init."""
    rng = random.Random(seed)
    s = State()
    out = [s]
    for _ in range(steps):
        s = rng.choice(list(successors(s, b)))[1]
        out.append(s)
    return out


#: Many work IDs (so that the maps are split into chunks), no exploration limit.
WIDE = Bounds(
    task_of=tuple((f"w{i:03}", f"s{i // 2:03}") for i in range(160)),
    ranks=(1, 2),
    max_wall=10**9,
    max_reboots=10**9,
    max_rollbacks=10**9,
    max_restarts=10**9,
    max_attempts=10**9,
    max_leases=10**9,
    max_dups=10**9,
)


def _corrupt(s: State, rng: random.Random) -> State:
    """``s`` with one entry of one map changed to a value at random, often out of range."""
    j, c = s.journal, s.coordinator
    w, t = rng.choice(["w000", "w150", "x9"]), rng.choice(["s000", "s075", "x9"])
    choice = rng.randrange(13)
    if choice == 0:
        return s._replace(journal=j._replace(attempts=put(j.attempts, w, rng.choice([0, 1, 5]))))
    if choice == 1:
        return s._replace(journal=j._replace(completed=add(j.completed, w)))
    if choice == 2:
        lease = Lease(rng.choice([1, 9]), s.wall, rng.choice([CLOCK_MONO, CLOCK_LEGACY, "unix"]))
        return s._replace(journal=j._replace(leases=put(j.leases, w, lease)))
    if choice == 3:
        stats = Stats(rng.choice([-1, 0, 3]), 0, 0, 0)
        return s._replace(coordinator=c._replace(stats=put(c.stats, t, stats)))
    if choice == 4:
        return s._replace(coordinator=c._replace(stats=drop(c.stats, t)))
    if choice == 5:
        lease_s = StateLease(rng.choice([1, 9]), s.wall, c.epoch)
        return s._replace(coordinator=c._replace(leases=put(c.leases, t, lease_s)))
    if choice == 6:
        return s._replace(net=add(s.net, (rng.choice([1, 9]), w)))
    if choice == 7:
        return s._replace(journal=j._replace(attempts=drop(j.attempts, w)))
    if choice == 11:  # a result in flight under generation fencing (L3's network, TypeOK)
        return s._replace(gnet=add(s.gnet, (rng.choice([1, 9]), w, rng.choice([0, 101]))))
    if choice == 12:  # a state lease freed (L3's failures allow a booking with it)
        return s._replace(coordinator=c._replace(leases=drop(c.leases, t)))
    # The active dispatches (read by L1, L2, L6, L7 and TypeOK through an index of them): one
    # more (maybe one already there: a dispatch held twice), one fewer, or one changed.
    active = list(s.active)
    if choice == 8 or not active:
        pick = rng.choice(active) if active and rng.random() < 0.5 else None
        new = pick or (rng.choice([1, 2, 9]), Dispatch(w, WIDE.task(w) if w != "x9" else t))
        return s._replace(active=tuple(sorted([*active, new])))
    i = rng.randrange(len(active))
    if choice == 9:
        return s._replace(active=tuple(active[:i] + active[i + 1 :]))
    r, d = active[i]
    active[i] = (r, d._replace(gen=d.gen + rng.choice([-1, 1])))
    return s._replace(active=tuple(sorted(active)))


#: ``WIDE`` pipelined under generation fencing: several dispatches per rank, as in real runs.
WIDE_PIPELINED = replace(WIDE, pipeline=3, fence="generation")


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 250), st.sampled_from([WIDE, WIDE_PIPELINED]))
def test_incremental_and_full_verdicts_agree_on_random_states(
    seed: int, steps: int, b: Bounds
) -> None:
    run = _walk(seed, steps, b)
    rng = random.Random(seed)
    for since, after in zip(run[-6:], run[-5:], strict=False):
        bad = _corrupt(after, rng)
        worse = _corrupt(bad, rng)
        for t in (after, bad, worse):
            assert incremental.violated(since, t, b, since=since) == _full(since, t, b)
            assert incremental.Checker()(since, t, b, since) == _full(since, t, b)


def _base() -> State:
    """A state that keeps every invariant under ``WIDE``, with 160 entries per map."""
    works = [w for w, _ in WIDE.task_of]
    tasks = sorted({t for _, t in WIDE.task_of})
    return State(
        wall=5,
        mono=5,
        journal=Journal(
            leases=as_map({"w159": Lease(1, 5, "unix")}),
            completed=as_ids(works[:159]),
            attempts=as_map(dict.fromkeys(works, 1)),
        ),
        coordinator=Coordinator(
            leases=as_map({"s079": StateLease(1, 5, 1)}),
            # two completions per task but s079's (w159 still leased): as the journal holds
            stats=as_map({t: Stats(1 if t == "s079" else 2, 0, 2, 2) for t in tasks}),
        ),
        active=((1, Dispatch("w159", "s079")),),
        net=as_ids((1, w) for w in works),
    )


def _planted() -> dict[str, tuple[State, State, Bounds]]:
    """For each invariant, a step from ``_base()`` to a state that breaks it, and the bounds."""
    s = _base()
    j, c = s.journal, s.coordinator
    mono = replace(WIDE, flavour=Flavour.MONOTONIC_PERSISTED, ttl=3)
    legacy = Lease(2, 100, CLOCK_LEGACY)
    return {
        "TypeOK": (s, s._replace(journal=j._replace(attempts=put(j.attempts, "w007", 0))), WIDE),
        "L1_SingleOwner": (s, s._replace(active=(*s.active, (2, Dispatch("w159", "s079")))), WIDE),
        "L2_OwnerFenced": (s, s._replace(journal=j._replace(leases=())), WIDE),
        "L1_NoOrphanLease": (
            s,
            s._replace(journal=j._replace(leases=put(j.leases, "w158", Lease(2, 5, "unix")))),
            WIDE,
        ),
        "L2_RemovalFenced": (s, s._replace(coordinator=c._replace(leases=())), WIDE),
        "L3_RefusalChangesNothing": (
            s,
            s._replace(journal=j._replace(attempts=put(j.attempts, "w123", 2))),
            WIDE,
        ),
        # F314's reboot scenario: an uptime-stamped lease TTL 0 reclaims, and after the reboot not.
        "L4_UnixClockDomain": (s, s._replace(mono=0, reboots=1), replace(mono, ttl=0)),
        "L5_LegacyMigratable": (
            s,
            s._replace(journal=j._replace(leases=put(j.leases, "w158", legacy))),
            mono,
        ),
        # A restart (the epoch changes) whose recovery kept an untagged record.
        "L5_LegacyMigrated": (
            s,
            s._replace(
                journal=j._replace(leases=put(j.leases, "w158", legacy)),
                coordinator=c._replace(epoch=c.epoch + 1),
            ),
            WIDE,
        ),
        # A restart whose recovery kept a Unix lease dated far in the future.
        "NoStuckLeaseRecovered": (
            s,
            s._replace(
                journal=j._replace(leases=put(j.leases, "w158", Lease(2, 100, "unix"))),
                coordinator=c._replace(epoch=c.epoch + 1),
            ),
            WIDE,
        ),
        "L6_NoInheritedOwnership": (
            s,
            s._replace(coordinator=c._replace(leases=put(c.leases, "s010", StateLease(2, 5, 1)))),
            WIDE,
        ),
        "L6_StatisticsSurvive": (
            s,
            s._replace(coordinator=c._replace(stats=put(c.stats, "s077", Stats(1, 0, 1, 1)))),
            WIDE,
        ),
        "L7_AuthoritativeStateId": (s, s._replace(active=()), WIDE),
        "CompletionsAccounted": (
            s,
            s._replace(coordinator=c._replace(stats=put(c.stats, "s079", Stats(2, 0, 2, 2)))),
            WIDE,
        ),
        "NoStuckLease": (
            s,
            s._replace(journal=j._replace(leases=put(j.leases, "w158", Lease(2, 100, "unix")))),
            mono,
        ),
    }


def test_a_planted_violation_of_each_invariant_is_reported_by_the_full_and_the_incremental_check() -> (
    None
):
    planted = _planted()
    assert set(planted) == set(invariants.STATE_INVARIANTS) | set(invariants.STEP_PROPERTIES)
    assert invariants.violated(None, _base(), WIDE) == []
    for name, (since, bad, b) in planted.items():
        assert name in invariants.violated(since, bad, b), name
        assert name in incremental.violated(since, bad, b, since=since), name
        assert incremental.violated(since, bad, b, since=since) == invariants.violated(
            since, bad, b
        ), name
        assert incremental.Checker()(since, bad, b, since) == invariants.violated(since, bad, b)
        assert name not in incremental.Checker(skip=[name])(since, bad, b, since), name


def test_several_violations_are_named_in_the_full_checks_order_by_the_incremental_one() -> None:
    # NoStuckLease and CompletionsAccounted broken by one step: the incremental checker runs
    # them in two groups, the full one in its order; both name them in the full order. (Fails
    # if the incremental checker leaves the names in the order its groups ran.)
    s = _base()
    j, c = s.journal, s.coordinator
    mono = replace(WIDE, flavour=Flavour.MONOTONIC_PERSISTED, ttl=3)
    bad = s._replace(
        journal=j._replace(leases=put(j.leases, "w158", Lease(2, 100, "unix"))),
        coordinator=c._replace(stats=put(c.stats, "s079", Stats(2, 0, 2, 2))),
    )
    full_names = invariants.violated(s, bad, mono)
    assert {"NoStuckLease", "CompletionsAccounted"} <= set(full_names)
    assert incremental.Checker()(s, bad, mono, s) == full_names
    assert incremental.violated(s, bad, mono, since=s) == full_names


def test_a_coordinator_epoch_lowered_below_an_unchanged_state_lease_is_typeok_for_both_checks() -> (
    None
):
    # When the coordinator's epoch changes every state lease is read again (its epoch is
    # bounded by the coordinator's), not only the leases that changed: here none did. (Fails
    # if the incremental check reads every lease only while the epoch stays the same.)
    s = _base()
    c = s.coordinator
    since = s._replace(
        coordinator=c._replace(epoch=2, leases=as_map({"s079": StateLease(1, 5, 2)}))
    )
    bad = since._replace(coordinator=since.coordinator._replace(epoch=1))
    assert "TypeOK" in invariants.violated(since, bad, WIDE)
    assert incremental.violated(since, bad, WIDE, since=since) == invariants.violated(
        since, bad, WIDE
    )
    assert incremental.Checker()(since, bad, WIDE, since) == invariants.violated(since, bad, WIDE)


def test_l3s_failures_and_network_are_seen_by_the_full_and_the_incremental_check() -> None:
    # L3's parts beyond attempts and leases (issue 21 "Why" 5), each planted, and the same steps
    # made lawful: the booking frees its task's active lease, the result belongs to a dispatch
    # the step starts (or the epoch changes, for statistics).
    s = _base()
    c = s.coordinator
    booked = Stats(1, 1, 1, 2)  # s079's statistics with one failure more
    gen = replace(WIDE, fence="generation")
    bad = {
        "failure booked, lease kept": (
            s._replace(coordinator=c._replace(stats=put(c.stats, "s079", booked))),
            WIDE,
        ),
        "failure booked on a free task": (
            s._replace(coordinator=c._replace(stats=put(c.stats, "s010", Stats(2, 1, 2, 3)))),
            WIDE,
        ),
        "result sent, no dispatch": (s._replace(net=add(s.net, (2, "w158"))), WIDE),
        "result sent, another dispatch": (
            s._replace(
                net=add(s.net, (2, "w158")), active=(*s.active, (2, Dispatch("w157", "s078")))
            ),
            WIDE,
        ),
        "result with its generation, no dispatch": (
            s._replace(gnet=add(s.gnet, (2, "w158", 101))),
            gen,
        ),
        "result with another generation": (
            s._replace(
                gnet=add(s.gnet, (2, "w158", 101)),
                active=(*s.active, (2, Dispatch("w158", "s079", 102))),
            ),
            gen,
        ),
    }
    good = {
        "failure booked, lease freed": s._replace(
            coordinator=c._replace(
                leases=drop(c.leases, "s079"), stats=put(c.stats, "s079", booked)
            )
        ),
        "statistics changed by a restart": s._replace(
            coordinator=c._replace(epoch=2, stats=put(c.stats, "s010", Stats(2, 1, 2, 3)))
        ),
        "result sent with its dispatch": s._replace(
            net=add(s.net, (2, "w158")), active=(*s.active, (2, Dispatch("w158", "s079")))
        ),
        "result delivered": s._replace(net=discard(s.net, (1, "w000"))),
    }
    name = "L3_RefusalChangesNothing"
    for what, (t, b) in bad.items():
        assert not invariants.l3_refusal_changes_nothing(s, t, b), what
        assert not incremental.l3_refusal_changes_nothing(s, t, b), what
        assert name in incremental.Checker()(s, t, b, s), what
    for what, t in good.items():
        assert invariants.l3_refusal_changes_nothing(s, t, WIDE), what
        assert incremental.l3_refusal_changes_nothing(s, t, WIDE), what
    # A dispatch held before and held twice after is not one the step starts (active' \ active).
    held = s._replace(active=((2, Dispatch("w158", "s079")),))
    twice = held._replace(active=held.active * 2, net=add(held.net, (2, "w158")))
    assert not invariants.l3_refusal_changes_nothing(held, twice, WIDE)
    assert not incremental.l3_refusal_changes_nothing(held, twice, WIDE)
    # the same with a generation-fenced result (fails if the generations sent are those of every
    # dispatch the step adds, not of those it starts)
    gheld = s._replace(active=((2, Dispatch("w158", "s079", 101)),))
    gtwice = gheld._replace(active=gheld.active * 2, gnet=add(gheld.gnet, (2, "w158", 101)))
    assert not invariants.l3_refusal_changes_nothing(gheld, gtwice, gen)
    assert not incremental.l3_refusal_changes_nothing(gheld, gtwice, gen)
    # a generation-fenced result sent with its dispatch
    t = s._replace(
        gnet=add(s.gnet, (2, "w158", 101)), active=(*s.active, (2, Dispatch("w158", "s079", 101)))
    )
    assert invariants.l3_refusal_changes_nothing(s, t, gen)
    assert incremental.l3_refusal_changes_nothing(s, t, gen)


def _plain_diff(a: Map[int, object], b: Map[int, object]) -> list[int]:
    """``changed`` of copies without lineage (pickled): the chunk-by-chunk comparison."""
    return sorted(changed(pickle.loads(pickle.dumps(a)), pickle.loads(pickle.dumps(b))))


def test_changed_between_a_map_and_the_maps_it_was_edited_from_reads_the_edits_and_agrees() -> None:
    base: Map[int, object] = as_map({k: k for k in range(200)})
    assert isinstance(base, Hamt)
    chain: list[Map[int, object]] = [base]
    for key, value in [(5, "x"), (500, 1), (5, 5), (7, None), (500, None), (9, 1), (9, True)]:
        chain.append(put(chain[-1], key, value) if value is not None else drop(chain[-1], key))
    for i, a in enumerate(chain):
        for b in chain[i:]:
            assert sorted(changed(a, b)) == sorted(changed(b, a)) == _plain_diff(a, b), (a, b)
    # An edit undone by a later one, a value replaced by an equal one of another type: unchanged.
    assert changed(chain[0], chain[3]) == [500]  # 5 -> "x" -> 5
    assert changed(chain[2], chain[3]) == [5]
    assert sorted(changed(chain[0], chain[2])) == [5, 500]
    assert sorted(changed(chain[1], chain[5])) == [5, 7]  # 500 added, then dropped
    assert put(chain[5], 0, 0) is chain[5]  # a value set to itself: the same map
    assert chain[7] is not chain[6]
    assert changed(chain[6], chain[7]) == []
    # The lineage is what ``changed`` read: a recent ancestor's diff reads only the edited keys.
    assert chain[2]._since(chain[0]) == (500, 5)  # type: ignore[union-attr]
    assert chain[-1]._since(chain[0]) is None  # more than LINEAGE edits back
    assert len(chain) - 1 > LINEAGE


#: Values a map may hold: some equal but of another type (1, True, 1.0), which is no change.
_VALUES = st.sampled_from([0, 1, True, 1.0, 2, "x"])


@settings(max_examples=300, deadline=None)
@given(st.lists(_VALUES, max_size=90), st.data())
def test_changed_is_the_keys_whose_entries_differ_for_maps_of_every_size_and_form(
    start: list[object], data: st.DataObject
) -> None:
    # Maps short (a scan), long (the noted edit) and beyond SMALL (a trie), and across it; keys
    # 0..n-1, so most edits replace an entry (with an equal value of another type, no change).
    a: Map[int, object] = as_map(enumerate(start))
    key = st.integers(0, len(start))
    edits = data.draw(st.lists(st.tuples(st.booleans(), key, _VALUES), max_size=3))
    b = a
    for keep, k, v in edits:
        b = put(b, k, v) if keep else drop(b, k)
    da, db = dict(a), dict(b)
    want = sorted(
        k
        for k in da.keys() | db.keys()
        if (k in da) != (k in db) or (da[k] is not db[k] and da[k] != db[k])
    )
    assert sorted(changed(a, b)) == want == sorted(changed(b, a))


def test_a_map_keeps_no_map_it_was_edited_from_alive() -> None:
    # Lineage holds the ancestors' tries, which hold no lineage: a replay of 10^5 steps keeps
    # the last few edits' paths alive, not a chain of every map before (memory stays linear).
    m: Map[int, int] = as_map({k: k for k in range(100)})
    for k in range(50):
        m = put(m, k, -k)
    assert isinstance(m, Hamt)
    seen: set[int] = {id(m)}
    todo: list[object] = list(gc.get_referents(m))
    reached = 0
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, type):
            continue  # a class leads to its module's globals: caches other tests filled
        reached += isinstance(x, Hamt)
        todo.extend(gc.get_referents(x))
    assert reached == 0
    assert 0 < len(m._origins) <= LINEAGE


def test_a_copied_or_pickled_map_has_no_lineage_and_still_compares_by_content() -> None:
    a: Map[int, int] = as_map({k: k for k in range(100)})
    b = put(a, 3, -3)
    for c in (copy.copy(b), copy.deepcopy(b), pickle.loads(pickle.dumps(b))):
        assert c == b
        assert hash(c) == hash(b)
        assert repr(c) == repr(b)
        assert c._since(a) is None  # type: ignore[union-attr]
        assert changed(a, c) == [3]


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 150),
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 200)), max_size=4),
)
def test_unshared_leaves_out_a_prefix_and_a_suffix_both_hold_and_no_more_after_one_edit(
    size: int, ops: list[tuple[int, int]]
) -> None:
    # Tuples edited as the model edits them (an item inserted, removed or replaced, the rest the
    # same objects), long enough for the bisection and short enough for the scan.
    base = tuple(Dispatch(f"w{i:03}", "s") for i in range(size))
    b = base
    for op, at in ops:
        at = at % (len(b) + 1)
        if op == 0:
            b = (*b[:at], Dispatch("new", "s"), *b[at:])
        elif op == 1 and at < len(b):
            b = b[:at] + b[at + 1 :]
        elif at < len(b):
            b = (*b[:at], Dispatch(b[at].work, "s"), *b[at + 1 :])  # equal, not the same object
    for x, y in ((base, b), (b, base)):
        rx, ry = unshared(x, y)
        i = next((k for k, (p, q) in enumerate(zip(x, y, strict=False)) if p is not q), None)
        head = min(len(x), len(y)) if i is None else i
        assert x[:head] == y[:head]
        cut = len(x) - len(rx)  # items left out of x: a prefix and a suffix
        k = next(k for k in range(cut + 1) if x[k : k + len(rx)] == rx and y[k : k + len(ry)] == ry)
        assert x[:k] == y[:k]
        assert x[k + len(rx) :] == y[k + len(ry) :]
        if len(ops) == 1 and ops[0][0] < 2 and x != y:  # one insertion or removal: one item left
            assert len(rx) + len(ry) == 1


@settings(max_examples=200, deadline=None)
@given(
    st.integers(state._SCAN + 5, 90),  # long enough to be noted after four edits
    st.lists(st.tuples(st.booleans(), st.integers(0, 99)), min_size=1, max_size=4),
)
def test_unshared_reads_the_edit_add_and_remove_noted_as_the_one_it_would_find(
    size: int, ops: list[tuple[bool, int]]
) -> None:
    # The model's edits of long tuples (the active dispatches: a map that long is a trie) note
    # what they changed (``state.edited``) and ``unshared`` reads the note instead of looking:
    # the dispatches read as moved through it must be those found without the note, in both
    # directions, and the note must leave out only a prefix and a suffix both hold (a note one
    # place off fails here).
    active = tuple(sorted((1 + i % 2, Dispatch(f"w{i:03}", "s", i)) for i in range(size)))
    for insert, at in ops:
        x = active
        if insert:
            active = system._add(active, 1 + at % 2, Dispatch(f"n{at:03}", "s", at))
        else:
            active = system._remove(active, *active[at % len(active)])
        y = active
        if y is x:
            continue  # nothing added: no edit
        assert state._EDITS[id(y)][:2] == (y, x)  # noted
        noted = [sorted(incremental._moves(x, y)), sorted(incremental._moves(y, x))]  # type: ignore[arg-type]
        for a, b in ((x, y), (y, x)):
            ra, rb = unshared(a, b)
            assert len(ra) + len(rb) <= 2
            assert any(
                a[k : k + len(ra)] == ra
                and b[k : k + len(rb)] == rb
                and a[:k] == b[:k]
                and a[k + len(ra) :] == b[k + len(rb) :]
                for k in range(len(a) + 1)
            )
        state._EDITS.clear()
        assert [sorted(incremental._moves(x, y)), sorted(incremental._moves(y, x))] == noted  # type: ignore[arg-type]


def test_a_map_is_a_tuple_only_while_small_and_its_edits_are_not_noted() -> None:
    # ``unshared`` reads a noted edit only for tuples longer than ``_SCAN``; a map is a trie
    # long before that, so ``put`` and ``drop`` note nothing (and a scan reads it).
    assert SMALL <= state._SCAN
    m: Map[int, int] = as_map({k: k for k in range(SMALL)})
    state._EDITS.clear()
    assert type(put(m, 0, -1)) is tuple
    assert type(drop(m, 0)) is tuple
    assert type(put(m, SMALL, SMALL)) is Hamt
    assert not state._EDITS


def test_reclaimable_within_is_the_scan_of_the_horizon_it_stands_for() -> None:
    # NoStuckLease asks it of every lease at every replayed step: the closed form must give the
    # spec's \E d \in 0..2*TTL at every point of a range that covers each branch.
    for flavour in Flavour:
        for clock in (CLOCK_UNIX, CLOCK_LEGACY, CLOCK_MONO):
            for ttl in range(4):
                for horizon in range(-1, 9):
                    for updated in range(-3, 14):
                        for wall in range(0, 9, 2):
                            for mono in (0, 3):
                                scan = any(
                                    reclaimable(updated, clock, wall + d, mono + d, ttl, flavour)
                                    for d in range(horizon + 1)
                                )
                                args = (updated, clock, wall, mono, ttl, horizon, flavour)
                                assert reclaimable_within(*args) == scan, args


@pytest.mark.parametrize("cls", [State, Journal, Coordinator])
def test_replace_sets_exactly_the_named_fields_and_refuses_an_unknown_name(cls: type) -> None:
    # state._replacer stands in for namedtuple's _replace on the classes the actions edit: each
    # field alone, and all at once, land where the constructor puts them (an index off by one,
    # or a field left as it was, fails here); a misspelt field is refused as namedtuple does.
    base = cls()
    marks = {name: ("mark", name) for name in cls._fields}
    for name, mark in marks.items():
        got = base._replace(**{name: mark})
        assert type(got) is cls
        assert got == cls(**{**base._asdict(), name: mark})
    assert base._replace(**marks) == cls(**marks)
    assert base._replace() == base
    with pytest.raises(ValueError, match="unexpected field names"):
        base._replace(no_such_field=1)
