"""Every transition of the model's state graph at given bounds, as paths from Init replayed
deterministically on a system machine (the implementation in lockstep with the model).

``graph(bounds)`` is the reachable graph the model checker explores (``model.check.reachable``:
every edge ``(state, label, state')`` within the state constraint, stuttering self-loops
included, as ``model check`` counts them). ``cover(g)`` turns its edges into few long paths from
Init: each still-uncovered edge, in breadth-first order, is reached by the shortest path to its
source (the breadth-first tree) and then the path is extended greedily while an uncovered edge
leaves its last state (self-loops first, then edges towards states that still have uncovered
edges, then one covered edge towards such a state). ``replay(...)`` drives each path through a
system machine (``machines.system.bounded``: journal on a real file, coordinator with its
snapshot, master over the in-process transport, restarts from disk) by calling its ``do_*``
actions directly, so every step gets the machine's comparison (return values, refinement,
persisted fields, step properties, invariants) and the trace is validated at the end; an edge
counts as covered only when the machine's model reached the graph's target state. A failure is
shrunk to the shortest path to the failing edge and saved as a scenario file
(``conformance.scenarios``) that replays it.

The graph is built with the catalogue's work IDs in place of the model checker's ``w1``,
``w2``, ``w3`` (same tasks, same order), so it is the model checker's graph, renamed.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar, cast

from leasefence.conformance.machines.system import MEMORY_DIR, SystemMachine, bounded
from leasefence.conformance.scenarios import MODEL_NAMES, WORK_NAMES, bounds_doc
from leasefence.conformance.transition_loop import PROFILES as LOOP_PROFILES
from leasefence.conformance.transition_loop import run_loop
from leasefence.conformance.transition_probes import kind, probe, torn_restart
from leasefence.model.check import format_label, reachable
from leasefence.model.state import State
from leasefence.model.system import Bounds, Label

#: The bounds ``make test`` replays in full (the CI bounds with one lease in all: every action,
#: two ranks, a fifth of the CI graph's replay time), the CI bounds (``tla/MCLeaseFence.cfg``: ``model
#: check --max-wall 1 --dups 0``), the deep ones (the model's defaults), and pipelined ones.
QUICK = Bounds(max_wall=1, max_dups=0, max_leases=1)
CI = Bounds(max_wall=1, max_dups=0)
DEEP = Bounds()
#: Pipelined dispatch with generation fencing: one rank holding two dispatches (results that
#: overtake, present an older generation or none), two leases in all, no clock faults (1,669
#: states, 21,390 transitions since generations are modelled per rank as the implementation
#: makes them; with reboots and rollbacks 142,536).
PIPELINED = Bounds(
    max_wall=1,
    max_dups=0,
    max_leases=2,
    max_reboots=0,
    max_rollbacks=0,
    ranks=(1,),
    pipeline=2,
    fence="generation",
)
#: A wall clock of three values (0, 1, 2) with one rollback, one lease, no restart: a lease
#: stamped at 2 and a rollback to 0 date it more than the TTL ahead, which the quick and CI
#: bounds (wall 0 and 1) cannot, so the rule that reclaims such a lease is driven (210 states,
#: 1,572 transitions, 36 states with a future-dated lease).
CLOCK = Bounds(max_wall=2, max_dups=0, max_leases=1, max_reboots=0, max_restarts=0)
PROFILES = {"quick": QUICK, "ci": CI, "deep": DEEP, "pipelined": PIPELINED, "clock": CLOCK}


def catalogue_bounds(b: Bounds) -> Bounds:
    """``b`` with the catalogue's work IDs for ``w1`` .. (what the implementation knows)."""
    return replace(b, task_of=tuple((WORK_NAMES.get(w, w), t) for w, t in b.task_of))


def workdir() -> str | None:
    """Where the replay's files go: a memory file system if the machine has one."""
    return MEMORY_DIR if os.path.isdir(MEMORY_DIR) and os.access(MEMORY_DIR, os.W_OK) else None


Edge = tuple[int, Label, int]


@dataclass
class Graph:
    """The reachable graph: states by index (0 is Init), edges ``(source, label, target)`` in
    breadth-first order, each state's outgoing edges and the tree edge that first reached it."""

    bounds: Bounds
    states: list[State] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)
    out: list[list[int]] = field(default_factory=list)
    tree: list[int] = field(default_factory=list)

    @property
    def self_loops(self) -> int:
        return sum(1 for s, _, t in self.edges if s == t)

    def prefix(self, state: int) -> list[int]:
        """The edges of the shortest path from Init to ``state``."""
        path = []
        while state:
            e = self.tree[state]
            path.append(e)
            state = self.edges[e][0]
        return path[::-1]


def graph(bounds: Bounds) -> Graph:
    """The model checker's reachable graph under ``bounds`` (with catalogue work IDs)."""
    g = Graph(catalogue_bounds(bounds))
    index: dict[State, int] = {}

    def number(s: State) -> int:
        n = index.get(s)
        if n is None:
            n = index[s] = len(g.states)
            g.states.append(s)
            g.out.append([])
            g.tree.append(-1)
        return n

    for s, label, t in reachable(g.bounds):
        a, b = number(s), number(t)
        e = len(g.edges)
        g.edges.append((a, label, b))
        g.out[a].append(e)
        if g.tree[b] < 0 and b:
            g.tree[b] = e
    return g


def cover(g: Graph) -> list[list[int]]:
    """Paths from Init (lists of edge indices) that together take every edge of ``g``."""
    covered = [False] * len(g.edges)
    left = [len(o) for o in g.out]  # uncovered edges leaving each state

    def take(e: int) -> None:
        if not covered[e]:
            covered[e] = True
            left[g.edges[e][0]] -= 1

    def next_edge(state: int) -> int | None:
        best: tuple[int, int] | None = None
        for e in g.out[state]:
            _, _, t = g.edges[e]
            rank = (
                (0 if t == state else 1 if left[t] else 2)
                if not covered[e]
                else (3 if left[t] else 9)
            )
            if rank < 9 and (best is None or rank < best[0]):
                best = (rank, e)
                if rank == 0:
                    break
        return None if best is None else best[1]

    paths = []
    for first in range(len(g.edges)):
        if covered[first]:
            continue
        path = [*g.prefix(g.edges[first][0]), first]
        for e in path:
            take(e)
        state = g.edges[first][2]
        while (step := next_edge(state)) is not None:
            path.append(step)
            take(step)
            state = g.edges[step][2]
        paths.append(path)
    return paths


@dataclass
class Failure:
    """A path whose replay failed: the failing edge, the shortest path to it, the error and the
    scenario file saved (if a directory was given)."""

    edge: int
    path: list[int]
    error: str
    saved: Path | None = None


@dataclass
class Result:
    """What one replay covered: edges driven of all, self-loops among them, paths and steps."""

    bounds: Bounds
    states: int
    total: int
    self_loops: int
    covered: int = 0
    paths: int = 0
    steps: int = 0
    seconds: float = 0.0
    failures: list[Failure] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures and self.covered == self.total


def _call(m: SystemMachine, label: Label) -> None:
    """Drive one model action on the machine (the same calls as a scenario's steps)."""
    name, args = label
    a: Any = args
    steps: dict[str, Callable[[], None]] = {
        "DispatchWork": lambda: m.do_dispatch_work(a[0], a[1]),
        "DeliverResult": lambda: m.do_deliver_result(*a),
        "ReclaimExpired": m.do_reclaim_expired,
        "RestartMaster": m.do_restart_master,
        "CrashDispatchWork": lambda: m.do_crash_dispatch_work(a[0], a[1]),
        "CrashDeliverResult": lambda: m.do_crash_deliver_result(*a),
        "CrashReclaimExpired": m.do_crash_reclaim_expired,
        "Tick": lambda: m.do_tick(1),
        "RollbackClock": lambda: m.do_rollback_clock(a[0]),
        "Reboot": m.do_reboot,
        "CompactJournal": m.do_compact_journal,
        "LegacyRecord": lambda: m.do_legacy_record(a[0], a[1]),
        "TornTail": lambda: torn_restart(m),
    }
    steps[name]()


def step(
    g: Graph, m: SystemMachine, e: int, checked: bytearray, label: Label | None = None
) -> None:
    """Drive edge ``e`` (its label, or ``label`` in its place) on the machine and check that the
    machine's model reached the edge's target; its invariants are checked on both sides unless
    ``checked[target]`` says they were (then it is set)."""
    _, own, t = g.edges[e]
    _call(m, own if label is None else label)
    if m.m != g.states[t]:
        raise AssertionError(
            f"{format_label(label or own)} led the machine's model to {m.m!r}, "
            f"the graph's to {g.states[t]!r}"
        )
    if not checked[t]:
        m.check_invariants_now()
        checked[t] = 1


def run_path(
    g: Graph,
    path: list[int],
    machine: type[SystemMachine],
    checked: bytearray | None = None,
    probed: set[object] | None = None,
) -> int:
    """Replay ``path`` from Init; returns how many of its edges were driven (all, or the index
    of the failing one, whose error is raised). ``checked``: the graph states whose invariants
    were already checked on both sides (an invariant is a function of the state, and each step
    has compared the mapped implementation state equal to the model's, which is the graph's):
    each is checked once per replay, not at every arrival. ``probed``: with it, the refusal
    probes (``conformance.transition_probes``, the scratch probes of
    ``conformance.transition_scratch`` among them) and the dispatch loop's profiles
    (``conformance.transition_loop``: the files reopened from disk and run to the end by
    ``master_dispatch``) run at Init and at each state of a kind not in it, and the first
    RestartMaster from each kind is driven as a crash in the middle of an append (``TornTail``:
    the same model step, the journal left with a torn last line)."""
    checked = bytearray(len(g.states)) if checked is None else checked
    m = machine(start=0)
    done = 0
    try:
        m.do_open(None)
        if not checked[0]:
            m.check_invariants_now()
            checked[0] = 1
        _probe(m, g.bounds, probed)
        for e in path:
            label: Label | None = None
            if probed is not None and g.edges[e][1][0] == "RestartMaster":
                torn = ("torn tail before", kind(m))
                if torn not in probed:
                    probed.add(torn)
                    label = ("TornTail", ())
            step(g, m, e, checked, label)
            _probe(m, g.bounds, probed)
            done += 1
    finally:
        m.teardown()  # validates the run's trace
    return done


def _probe(m: SystemMachine, bounds: Bounds, probed: set[object] | None) -> None:
    """The refusal probes and the dispatch loop's profiles at the machine's state, once per
    kind of state (``probed``: the kinds done; None: none run)."""
    if probed is not None and (k := kind(m)) not in probed:
        probe(m)
        for profile in LOOP_PROFILES:
            run_loop(m.journal_path, m.snapshot_path, m.clock.now, bounds, profile)
        probed.add(k)


def scenario(g: Graph, path: list[int], origin: str) -> dict[str, Any]:
    """``path`` as a scenario document (``conformance.scenarios``) with its bounds."""
    b = g.bounds
    return {
        "name": f"transition {format_label(g.edges[path[-1]][1])}",
        "origin": origin,
        "machine": "system",
        "start": 0,
        "legacy": None,
        "bounds": bounds_doc(b),
        "steps": [
            {
                "action": g.edges[e][1][0],
                "args": [
                    MODEL_NAMES.get(x, x) if isinstance(x, str) else x for x in g.edges[e][1][1]
                ],
            }
            for e in path
        ],
    }


def replay(
    bounds: Bounds,
    save: Path | None = None,
    machine: type[SystemMachine] | None = None,
    jobs: int = 1,
    probes: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Result:
    """Drive every edge of the graph under ``bounds`` through the implementation.

    ``machine`` (default: the system machine at these bounds) is what runs the paths (a test
    passes one with a planted bug). ``jobs`` processes share the paths (forked once each after
    the graph is built; path ``i`` runs in process ``i % jobs``, each stopping at its first
    failure): the outcome is the same for every ``jobs``, only the failure reported may be
    another of the same bug. With ``probes`` the refusal probes run at each kind of state
    reached (``conformance.transition_probes``). ``progress``, if given, is told how far each
    process is every ``PROGRESS_PATHS`` paths. A failing path is shrunk to the shortest path to its failing
    edge, run again to confirm, and saved under ``save`` as a scenario file."""
    t0 = time.perf_counter()
    g = graph(bounds)
    machine = machine or bounded(SystemMachine, g.bounds, workdir())
    result = Result(g.bounds, len(g.states), len(g.edges), g.self_loops)
    paths = cover(g)
    runner = machine

    def share(k: int) -> Outcomes:
        return _run_share(g, paths, runner, range(k, len(paths), jobs), probes, progress)

    outcomes = [share(0)] if jobs <= 1 else in_processes(jobs, share)
    done = [0] * len(paths)
    failed: list[tuple[int, str]] = []
    for ran, failure in outcomes:
        for i, n in ran:
            done[i] = n
        if failure is not None:
            failed.append(failure)
    driven = [False] * len(g.edges)
    for i, n in enumerate(done):
        for e in paths[i][:n]:
            driven[e] = True
    result.paths = sum(len(o[0]) for o in outcomes) + len(failed)
    result.steps = sum(len(paths[i]) for o in outcomes for i, _ in o[0])
    if failed:
        i, error = min(failed)
        result.steps += sum(len(paths[j]) for j, _ in failed)
        at = _failed_at(g, paths[i], machine)
        result.failures.append(_shrink(g, paths[i][: at + 1], machine, error, save))
    result.covered = sum(driven)
    result.seconds = time.perf_counter() - t0
    return result


#: What one process's share of the paths gave: ``(path, edges driven)`` for each path run
#: whole, and the first failing path with its error (the share stops there).
Outcomes = tuple[list[tuple[int, int]], tuple[int, str] | None]


#: How often (in paths) ``replay``'s ``progress`` hears from each process.
PROGRESS_PATHS = 20000


def _run_share(
    g: Graph,
    paths: list[list[int]],
    machine: type[SystemMachine],
    share: range,
    probes: bool,
    progress: Callable[[str], None] | None = None,
) -> Outcomes:
    checked = bytearray(len(g.states))
    probed: set[object] | None = set() if probes else None
    ran: list[tuple[int, int]] = []
    t0 = time.perf_counter()
    for n, i in enumerate(share):
        if progress is not None and n and n % PROGRESS_PATHS == 0:
            progress(
                f"process {share.start}: {n:,}/{len(share):,} paths, "
                f"{sum(k for _, k in ran):,} steps, {time.perf_counter() - t0:.0f} s"
            )
        try:
            ran.append((i, run_path(g, paths[i], machine, checked, probed)))
        except AssertionError as error:
            return ran, (i, str(error))
    return ran, None


T = TypeVar("T")


def in_processes(jobs: int, work: Callable[[int], T]) -> list[T]:
    """``[work(0), .., work(jobs - 1)]``, each computed in a process forked from this one (so
    ``work`` sees this process's memory as it is now); an exception in one is raised here."""
    children = []
    for k in range(jobs):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: compute, send, leave without running this process's exit code
            os.close(read)
            _die_with_parent()
            try:
                try:
                    data = pickle.dumps((True, work(k)))
                except BaseException as error:
                    data = pickle.dumps((False, f"{error!r}\n{traceback.format_exc()}"))
                with os.fdopen(write, "wb") as fh:
                    fh.write(data)
            finally:
                os._exit(0)
        os.close(write)
        children.append((pid, read))
    answers = []
    for pid, read in children:
        with os.fdopen(read, "rb") as fh:
            data = fh.read()
        os.waitpid(pid, 0)
        answers.append(pickle.loads(data) if data else (False, "the process sent nothing"))
    errors = [str(a) for ok, a in answers if not ok]
    if errors:
        raise RuntimeError("a replay process failed:\n" + "\n".join(errors))
    return [cast(T, a) for _, a in answers]


def _die_with_parent() -> None:
    """Linux: this process is killed when its parent dies (a replay stopped by a timeout leaves
    no process running on); elsewhere nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def jobs_available() -> int:
    """How many processes a replay may use: the CPUs this process may run on."""
    return max(1, len(os.sched_getaffinity(0)))


def _failed_at(g: Graph, path: list[int], machine: type[SystemMachine]) -> int:
    """The index of the first edge of ``path`` whose replay fails (the whole path failed)."""
    lo, hi = 0, len(path) - 1  # the prefix ending at hi fails
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            run_path(g, path[: mid + 1], machine)
            lo = mid + 1
        except AssertionError:
            hi = mid
    return hi


def _shrink(
    g: Graph, failed: list[int], machine: type[SystemMachine], error: str, save: Path | None
) -> Failure:
    """The shortest failing path ending in the failing edge of ``failed`` (a failing prefix):
    the breadth-first path to the edge's source, then the edge, if that fails too; else
    ``failed`` itself. Saved under ``save`` as a scenario file."""
    edge = failed[-1]
    short = [*g.prefix(g.edges[edge][0]), edge]
    failure = Failure(edge, failed, error)
    if len(short) < len(failed):
        try:
            run_path(g, short, machine)
        except AssertionError as e:
            failure = Failure(edge, short, str(e))
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        failure.saved = save / "transition-failure.json"
        doc = scenario(g, failure.path, f"leasefence transitions: {failure.error[:300]}")
        failure.saved.write_text(json.dumps(doc, indent=1) + "\n")
    return failure
