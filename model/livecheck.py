"""Exhaustive liveness check of the live system (``model.live``): the TLC of LeaseFenceLive.

The whole reachable graph is built once (no state constraint: the bounds are guards). A
property ``P ~> Q`` fails exactly when some reachable state with ``P /\\ ~Q`` reaches, through
``~Q`` states only, a *fair* cycle of ``~Q`` states. Cycles are found as the strongly connected
components (Tarjan, iterative) of the ``~Q`` subgraph; a component is fair under weak fairness
when, for each fairness class, one of its steps is taken inside the component or the class is
disabled in one of its states (a behaviour can then go round the whole component for ever, or,
for a single state, stutter there). A stuttering step (an edge from a state to itself) is no
step of any class, and a class is enabled in a state when one of its steps leaves the state,
as ``ENABLED <<A>>_vars`` in TLA+. The counterexample is a lasso: the shortest path from Init
to the first such state (BFS order), the shortest path on to a fair component, and a loop in
it that takes or passes every class it must (or stutters for ever).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

from leasefence.model.check import Step
from leasefence.model.invariants import type_ok
from leasefence.model.live import LIVE_PROPERTIES, LeadsTo, LiveBounds, fairness, live_successors
from leasefence.model.state import State
from leasefence.model.system import Label, initial_state


@dataclass
class LiveGraph:
    """The reachable graph: states in BFS order (index 0 is Init), each state's BFS parent and
    the label that reached it, its edges ``(target, class bits, label)`` without self-loops,
    and the fairness classes enabled in it (a bit mask over ``classes``)."""

    classes: list[str]
    states: list[State] = field(default_factory=list)
    parent: list[int] = field(default_factory=list)
    via: list[Label | None] = field(default_factory=list)
    edges: list[list[tuple[int, int, Label]]] = field(default_factory=list)
    enabled: list[int] = field(default_factory=list)
    transitions: int = 0
    depth: int = 0
    type_error: int | None = None


@dataclass
class LiveResult:
    """Figures of one live check and, on a violation, its lasso: ``prefix`` from Init to the
    loop's first state, ``loop`` the steps that return to it (empty: it stutters for ever)."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    violated: list[str] = field(default_factory=list)
    instance: str = ""
    prefix: list[Step] = field(default_factory=list)
    loop: list[Step] = field(default_factory=list)
    fair_note: str = ""

    @property
    def ok(self) -> bool:
        return not self.violated


def build_graph(lb: LiveBounds, check_type: bool = True) -> LiveGraph:
    """Every state reachable under ``live_successors`` (BFS), with TypeOK checked on each."""
    classes = fairness(lb)
    g = LiveGraph([name for name, _ in classes])
    tests = [test for _, test in classes]
    bit_of: dict[str, int] = {}
    init = initial_state()
    index = {init: 0}
    g.states.append(init)
    g.parent.append(-1)
    g.via.append(None)
    depth = [0]
    if check_type and not type_ok(init, lb.base):
        g.type_error = 0
        g.edges.append([])
        g.enabled.append(0)
        return g
    i = 0
    while i < len(g.states):
        s = g.states[i]
        out: list[tuple[int, int, Label]] = []
        en = 0
        for label, t in live_successors(s, lb):
            g.transitions += 1
            if t == s:
                continue
            key = label[0] if label[0] != "DispatchWork" else f"D{label[1][0]}"
            bits = bit_of.get(key)
            if bits is None:
                bits = sum(1 << k for k, test in enumerate(tests) if test(label))
                bit_of[key] = bits
            en |= bits
            j = index.get(t)
            if j is None:
                j = len(g.states)
                index[t] = j
                g.states.append(t)
                g.parent.append(i)
                g.via.append(label)
                depth.append(depth[i] + 1)
                g.depth = max(g.depth, depth[i] + 1)
                if check_type and g.type_error is None and not type_ok(t, lb.base):
                    g.type_error = j
            out.append((j, bits, label))
        g.edges.append(out)
        g.enabled.append(en)
        i += 1
    return g


def sccs(n: int, succ: Sequence[Sequence[int]], inside: Sequence[bool]) -> list[int]:
    """The strongly connected component of every node of the subgraph of nodes ``inside``
    (Tarjan's algorithm, iterative): ``comp[v]`` numbers v's component, -1 outside."""
    comp = [-1] * n
    low = [0] * n
    num = [-1] * n
    on = [False] * n
    stack: list[int] = []
    counter = 0
    ncomp = 0
    for root in range(n):
        if not inside[root] or num[root] >= 0:
            continue
        work = [(root, 0)]
        num[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on[root] = True
        while work:
            v, k = work[-1]
            nexts = succ[v]
            if k < len(nexts):
                work[-1] = (v, k + 1)
                w = nexts[k]
                if not inside[w]:
                    continue
                if num[w] < 0:
                    num[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on[w] = True
                    work.append((w, 0))
                elif on[w] and num[w] < low[v]:
                    low[v] = num[w]
                continue
            work.pop()
            if work:
                u = work[-1][0]
                if low[v] < low[u]:
                    low[u] = low[v]
            if low[v] == num[v]:
                while True:
                    w = stack.pop()
                    on[w] = False
                    comp[w] = ncomp
                    if w == v:
                        break
                ncomp += 1
    return comp


def _path(
    g: LiveGraph, start: int, goal: Collection[int] | None, ok: Sequence[bool], edge_bits: int = 0
) -> list[tuple[int, Label]] | None:
    """Shortest path from ``start`` through ``ok`` nodes to a node of ``goal`` (or, with
    ``edge_bits``, ending with an edge of one of those classes whose ends are ``ok``), as
    ``(node, label)`` steps after ``start``."""
    prev: dict[int, tuple[int, Label] | None] = {start: None}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        if goal is not None and v in goal and (v != start or not edge_bits):
            end = v
            break
        hit = None
        for j, bits, label in g.edges[v]:
            if not ok[j]:
                continue
            if edge_bits and bits & edge_bits:
                hit = (j, label)
                break
            if j not in prev:
                prev[j] = (v, label)
                queue.append(j)
        if hit is not None:
            steps = [hit]
            cur = v
            while prev[cur] is not None:
                p, lab = prev[cur]  # type: ignore[misc]
                steps.append((cur, lab))
                cur = p
            return list(reversed(steps))
    else:
        return None
    steps = []
    cur = end
    while prev[cur] is not None:
        p, lab = prev[cur]  # type: ignore[misc]
        steps.append((cur, lab))
        cur = p
    return list(reversed(steps))


def _loop(g: LiveGraph, entry: int, members: set[int]) -> tuple[list[tuple[int, Label]], str]:
    """A loop from ``entry`` inside the fair component ``members`` that, for each class, takes
    one of its steps or passes a state where it is disabled; empty: stutter at ``entry``."""
    inside = [False] * len(g.states)
    for v in members:
        inside[v] = True
    steps: list[tuple[int, Label]] = []
    cur = entry
    notes = []
    for k, name in enumerate(g.classes):
        bit = 1 << k
        if not g.enabled[cur] & bit:
            notes.append(f"{name} disabled")
            continue
        off = {v for v in members if not g.enabled[v] & bit}
        path = _path(g, cur, off, inside) if off else _path(g, cur, None, inside, bit)
        if path is None:  # cannot happen in a fair component
            raise AssertionError(f"no witness of {name} in a fair component")
        notes.append(f"{name} {'disabled on the way' if off else 'taken'}")
        steps += path
        if path:
            cur = path[-1][0]
    if cur != entry or steps:
        back = _path(g, cur, {entry}, inside) if cur != entry else []
        steps += back or []
        if not steps:  # entry only: every class disabled there
            return [], "stutters for ever: " + ", ".join(notes)
        return steps, "loop: " + ", ".join(notes)
    return [], "stutters for ever" + (": " + ", ".join(notes) if notes else " (no fairness)")


Lasso = tuple[int, list[tuple[int, Label]], list[tuple[int, Label]], str]


def check_leads_to(g: LiveGraph, lt: LeadsTo) -> Lasso | None:
    """A counterexample of ``lt`` in ``g``: the state where P holds, the path on to a fair
    component, the loop in it and what makes the loop fair; None when it holds."""
    n = len(g.states)
    notq = [not lt.q(s) for s in g.states]
    if not any(notq):
        return None
    succ = [[j for j, _, _ in es] for es in g.edges]
    comp = sccs(n, succ, notq)
    every = (1 << len(g.classes)) - 1
    taken: dict[int, int] = {}
    off: dict[int, int] = {}
    for v in range(n):
        c = comp[v]
        if c < 0:
            continue
        off[c] = off.get(c, 0) | (every & ~g.enabled[v])
        for j, bits, _ in g.edges[v]:
            if comp[j] == c:
                taken[c] = taken.get(c, 0) | bits
    fair = {c for c in off if (taken.get(c, 0) | off[c]) == every}
    if not fair:
        return None
    # Backwards from the fair components, through ~Q states: every state that can end in one.
    pred: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        if notq[v]:
            for j in succ[v]:
                if notq[j]:
                    pred[j].append(v)
    bad = [False] * n
    queue = deque(v for v in range(n) if comp[v] in fair)
    for v in queue:
        bad[v] = True
    while queue:
        v = queue.popleft()
        for u in pred[v]:
            if not bad[u]:
                bad[u] = True
                queue.append(u)
    start = next(
        (v for v in range(n) if bad[v] and (v == 0 if lt.p is None else lt.p(g.states[v]))), None
    )
    if start is None:
        return None
    targets = {v for v in range(n) if comp[v] in fair}
    to_comp = _path(g, start, targets, [b and q for b, q in zip(bad, notq, strict=True)]) or []
    entry = to_comp[-1][0] if to_comp else start
    members = {v for v in range(n) if comp[v] == comp[entry]}
    loop, note = _loop(g, entry, members)
    return start, to_comp, loop, note


def check_live(
    lb: LiveBounds, only: Collection[str] | None = None, graph: LiveGraph | None = None
) -> LiveResult:
    """Build the live graph (or take ``graph``, built by ``build_graph(lb)``), check TypeOK on
    every state and each liveness property (with ``only``, those named alone); the first
    violation found, with its lasso."""
    g = graph if graph is not None else build_graph(lb, only is None or "TypeOK" in only)
    r = LiveResult(states=len(g.states), transitions=g.transitions, depth=g.depth)
    if g.type_error is not None:
        r.violated = ["TypeOK"]
        r.prefix = _prefix(g, g.type_error)
        return r
    for name, instances in LIVE_PROPERTIES.items():
        if only is not None and name not in only:
            continue
        for lt in instances(lb):
            found = check_leads_to(g, lt)
            if found is None:
                continue
            start, path, loop, note = found
            r.violated = [name]
            r.instance = lt.instance
            r.prefix = _prefix(g, start) + [Step(lab, g.states[v]) for v, lab in path]
            r.loop = [Step(lab, g.states[v]) for v, lab in loop]
            r.fair_note = note
            return r
    return r


def _prefix(g: LiveGraph, v: int) -> list[Step]:
    steps = []
    while v >= 0:
        steps.append(Step(g.via[v], g.states[v]))
        v = g.parent[v]
    return list(reversed(steps))
