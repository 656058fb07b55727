"""Exhaustive breadth-first exploration of the model under ``Bounds`` (the TLC of this model).

Semantics follow TLC's (v1.7.4, ``tlc2.tool.Worker.doNext``) so that the two state graphs can be
compared: a successor that breaks the state constraint is checked (invariants and two-state
properties) but neither counted nor explored; invariants are checked on every distinct state,
two-state properties on every transition. Exploration stops at the first
violation found, which is at minimal depth, and returns the shortest trace to it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field

from leasefence.model.invariants import violated
from leasefence.model.state import State
from leasefence.model.system import Bounds, Label, initial_state, successors, within_constraint


@dataclass(frozen=True)
class Step:
    """One step of a counterexample: the action taken (None for the initial state) and the state."""

    label: Label | None
    state: State


@dataclass
class CheckResult:
    """Figures of one exploration and, on a violation, the shortest counterexample."""

    states: int = 0
    transitions: int = 0
    depth: int = 0
    violated: list[str] = field(default_factory=list)
    trace: list[Step] = field(default_factory=list)
    action_counts: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.violated


Progress = Callable[[CheckResult, int], None]


def explore(
    bounds: Bounds,
    progress: Progress | None = None,
    every: int = 50_000,
    only: Collection[str] | None = None,
) -> CheckResult:
    """Explore every state reachable under ``bounds``; ``progress(result, queued)`` is called
    every ``every`` distinct states. ``only``: check just these invariants and properties (as a
    TLC config names them), else all."""
    result = CheckResult()
    init = initial_state()
    parent: dict[State, tuple[State | None, Label | None]] = {init: (None, None)}
    depth_of: dict[State, int] = {init: 0}
    result.states = 1
    bad = violated(None, init, bounds, only)
    if bad:
        result.violated, result.trace = bad, [Step(None, init)]
        return result
    queue: deque[State] = deque([init])
    while queue:
        s = queue.popleft()
        d = depth_of[s]
        for label, t in successors(s, bounds):
            if not within_constraint(t, bounds):
                bad = [] if t == s else violated(s, t, bounds, only)
                if bad:
                    result.violated = bad
                    result.trace = [*_trace(parent, s), Step(label, t)]
                    result.depth = max(result.depth, d + 1)
                    return result
                continue
            result.transitions += 1
            result.action_counts[label[0]] = result.action_counts.get(label[0], 0) + 1
            if t == s:
                continue  # a stuttering step: every invariant and property holds across it
            new = t not in parent
            if new:
                parent[t] = (s, label)
                depth_of[t] = d + 1
            bad = violated(s, t, bounds, only) if new else _step_only(s, t, bounds, only)
            if bad:
                result.violated = bad
                result.trace = [*_trace(parent, s), Step(label, t)]
                result.depth = max(result.depth, d + 1)
                return result
            if new:
                result.states += 1
                result.depth = max(result.depth, d + 1)
                queue.append(t)
                if progress is not None and result.states % every == 0:
                    progress(result, len(queue))
    return result


def _step_only(s: State, t: State, b: Bounds, only: Collection[str] | None = None) -> list[str]:
    from leasefence.model.invariants import STEP_PROPERTIES

    if only is not None:
        return [n for n, step in STEP_PROPERTIES.items() if n in only and not step(s, t, b)]
    return [name for name, step in STEP_PROPERTIES.items() if not step(s, t, b)]


def _trace(parent: dict[State, tuple[State | None, Label | None]], s: State) -> list[Step]:
    steps: list[Step] = []
    cur: State | None = s
    while cur is not None:
        prev, label = parent[cur]
        steps.append(Step(label, cur))
        cur = prev
    return list(reversed(steps))


def reachable(bounds: Bounds) -> Iterator[tuple[State, Label, State]]:
    """Every transition ``(s, label, t)`` of the reachable graph (for the spec ⇄ model check)."""
    init = initial_state()
    seen = {init}
    queue: deque[State] = deque([init])
    while queue:
        s = queue.popleft()
        for label, t in successors(s, bounds):
            if not within_constraint(t, bounds):
                continue
            yield s, label, t
            if t not in seen:
                seen.add(t)
                queue.append(t)


def flatten(s: State) -> dict[str, object]:
    """``s`` as dotted paths to leaf values, for printing what a step changed."""
    out: dict[str, object] = {
        "wall": s.wall,
        "mono": s.mono,
        "reboots": s.reboots,
        "rollbacks": s.rollbacks,
        "dups": s.dups,
        "epoch": s.coordinator.epoch,
        "completed": sorted(s.journal.completed),
        "net": sorted(s.net),
    }
    if s.gnet:
        out["gnet"] = sorted(s.gnet)
    for r, n in s.gens:
        out[f"gens[{r}]"] = n
    for w, lease in s.journal.leases:
        out[f"journal.leases[{w}]"] = lease
    for w, n in s.journal.attempts:
        out[f"journal.attempts[{w}]"] = n
    for t, sl in s.coordinator.leases:
        out[f"coordinator.leases[{t}]"] = sl
    for t, st in s.coordinator.stats:
        out[f"coordinator.stats[{t}]"] = st
    ranks = [r for r, _ in s.active]
    for r, d in s.active:
        out[f"active[{r}]" if ranks.count(r) == 1 else f"active[{r}:{d.work}]"] = d
    return out


def changes(before: State, after: State) -> list[str]:
    """Human-readable lines ``path: old -> new`` for every leaf the step changed."""
    a, b = flatten(before), flatten(after)
    lines = []
    for key in sorted(a.keys() | b.keys()):
        old, new = a.get(key, "-"), b.get(key, "-")
        if old != new:
            lines.append(f"{key}: {old!r} -> {new!r}")
    return lines


def format_label(label: Label | None) -> str:
    """``Name(arg, ...)`` for an action label; ``Init`` for the initial state."""
    if label is None:
        return "Init"
    name, args = label
    return f"{name}({', '.join(repr(a) for a in args)})"
