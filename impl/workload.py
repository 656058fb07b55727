"""The default workload: seeded programs with branches, one z3 query per (target branch, variant).

A *program* is a complete binary tree of branch conditions over two integer inputs ``x`` and
``y`` (linear, product and modulo tests); its leaves are the *targets*. One exact-work payload
asks: find inputs with ``|x|, |y| <= bound`` whose run ends in leaf ``target``, using solver
``algorithm``. Several payloads (different bound or algorithm) share the same *state task*
``state_task_id(input=program, focus="main", target=leaf, action="reach", ...)``: exactly the
situation of F314 defect 2, where two exact items must not hold one state task at once. The
number of distinct targets reached, over items completed, is the coverage curve.

Everything is a pure function of the seed. ``work_id`` is the SHA-256 of the payload's canonical
JSON. The worker function is pluggable: ``solve_branch`` (z3, reports its CPU time) is the real
one, ``trivial_worker`` answers at once, for tests and benchmarks of the protocol alone.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import random
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from leasefence.impl.frozen import FACTORY, fast_init
from leasefence.impl.wire import Generation, StateTaskId, Work, WorkId, work_text

#: Name and version of this workload's payload format (part of every payload, so of every ID).
WORKLOAD = "branch-reach/1"
DEPTH = 3  # 8 targets per program
BOUNDS = (16, 256, 4096)
ALGORITHMS = ("smt", "qf-nia", "simplify-smt")
TIMEOUT_MS = 10_000
# The state task's remaining coordinates: one focus function, one action, a single schedule.
FOCUS, ACTION, SCHEDULE, CONTINUATION = "main", "reach", "breadth-first", "root"


@dataclass(frozen=True)
class WorkItem:
    """One exact-work payload as the master's catalogue holds it.

    ``state_task_id`` is the authoritative task the master stores at dispatch; ``target``,
    ``parameter`` and ``algorithm`` are the keys of the three reservations of the dispatch
    transaction.
    """

    work_id: WorkId
    state_task_id: StateTaskId
    target: str
    parameter: str
    algorithm: str
    payload: Mapping[str, Any] = field(default_factory=dict)
    #: Its WORK's text after the generation field (``wire.work_text``) when the catalogue made
    #: it (``generate``; None: not known), handed to every WORK of this item so that
    #: ``wire.encode`` does not encode the payload and the IDs again for each dispatch (issue 19).
    #: It must be the text of this item's own IDs and payload: ``dataclasses.replace`` keeps it
    #: (give a replaced item its own, or None). ``encode`` writes the fields instead when the
    #: text does not end with the WORK's work ID.
    work_text: str | None = field(default=None, compare=False, repr=False)

    def work(self, generation: Generation | None = None) -> Work:
        """The WORK message that sends this item (with the dispatch's ``generation``, if any)."""
        return Work(self.work_id, self.state_task_id, self.payload, generation, self.work_text)


@dataclass(frozen=True, init=False)
class Outcome:
    """What a worker function returns: success, solver CPU seconds, a JSON-able output.

    An outcome no RESULT can carry (``ok`` not a bool, ``cpu_s`` not a number of seconds in
    range, ``output`` not a mapping, not an ``Outcome`` at all) is a failed result whose output
    says why, in either engine (``transport.result_of``). Compiled (``harness/compiled.py``), a
    native class, as ``wire.Work`` is: some such values are refused already when it is made
    (``TypeError`` inside the worker function: a failed result too), and ``cpu_s`` is stored as
    ``float()`` of it (an ``int``, a ``Decimal``), as ``result_of`` reads it interpreted."""

    ok: bool
    cpu_s: float = 0.0
    output: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, ok: bool, cpu_s: float = 0.0, output: Mapping[str, Any] = FACTORY) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.ok = ok  # type: ignore[misc]
        self.cpu_s = cpu_s  # type: ignore[misc]
        self.output = {} if output is FACTORY else output  # type: ignore[misc]


fast_init(Outcome)


WorkerFn = Callable[[Work], Outcome]


def canonical(payload: Mapping[str, Any]) -> bytes:
    """The canonical JSON encoding of a payload (sorted keys, no spaces, UTF-8)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def work_id_of(payload: Mapping[str, Any]) -> WorkId:
    """The work ID of an exact-work payload: SHA-256 hex of its canonical encoding."""
    return WorkId(hashlib.sha256(canonical(payload)).hexdigest())


# -- programs ----------------------------------------------------------------------------------

Cond = tuple[Any, ...]  # ("lin", a, b, c) | ("mul", c) | ("mod", a, b, m, r)


@dataclass(frozen=True)
class Program:
    """A complete binary tree of ``2**depth - 1`` conditions, in heap order (children of node
    ``i`` are ``2i+1`` when false and ``2i+2`` when true); leaves are numbered left to right."""

    conds: tuple[Cond, ...]
    depth: int

    @property
    def leaves(self) -> int:
        return 1 << self.depth

    def run(self, x: int, y: int) -> int:
        """The leaf a concrete run with inputs ``x``, ``y`` reaches."""
        node = 0
        for _ in range(self.depth):
            node = 2 * node + 1 + int(holds(self.conds[node], x, y))
        leaf: int = node - (self.leaves - 1)
        return leaf

    def path(self, leaf: int) -> list[tuple[int, bool]]:
        """The (node, outcome) pairs on the way to ``leaf``, root first."""
        node, steps = leaf + self.leaves - 1, []
        while node > 0:
            parent = (node - 1) // 2
            steps.append((parent, node == 2 * parent + 2))
            node = parent
        return steps[::-1]


def holds(cond: Cond, x: int, y: int) -> bool:
    """Concrete semantics of one condition (Python's ``%`` and z3's agree for a divisor > 0)."""
    kind = cond[0]
    if kind == "lin":
        return bool(cond[1] * x + cond[2] * y > cond[3])
    if kind == "mul":
        return bool(x * y > cond[1])
    return bool((cond[1] * x + cond[2] * y) % cond[3] == cond[4])


def _condition(rng: random.Random) -> Cond:
    kind = rng.choice(("lin", "lin", "mul", "mod"))
    if kind == "lin":
        return ("lin", rng.randint(-9, 9) or 1, rng.randint(-9, 9), rng.randint(-400, 400))
    if kind == "mul":
        return ("mul", rng.randint(-3000, 3000))
    m = rng.randint(2, 7)
    return ("mod", rng.randint(1, 5), rng.randint(0, 5), m, rng.randrange(m))


@functools.lru_cache(maxsize=256)
def program(seed: int, index: int, depth: int = DEPTH) -> Program:
    """Program ``index`` of workload ``seed`` (a pure function of its arguments)."""
    rng = random.Random(f"{WORKLOAD}/{seed}/{index}")
    return Program(tuple(_condition(rng) for _ in range(2**depth - 1)), depth)


# -- the catalogue ----------------------------------------------------------------------------


def _items(seed: int, task_id: Callable[..., str]) -> Iterator[WorkItem]:
    variants = [(b, a) for b in BOUNDS for a in ALGORITHMS]
    for index in range(1_000_000):
        rng = random.Random(f"{WORKLOAD}/{seed}/{index}/items")
        leaves = list(range(2**DEPTH))
        rng.shuffle(leaves)
        name = f"{WORKLOAD}/{seed}/p{index}"
        for leaf in leaves:
            task = StateTaskId(task_id(name, FOCUS, f"leaf{leaf}", ACTION, SCHEDULE, CONTINUATION))
            for bound, algorithm in rng.sample(variants, rng.choice((1, 2, 2, 3))):
                payload = {
                    "workload": WORKLOAD,
                    "seed": seed,
                    "program": index,
                    "depth": DEPTH,
                    "target": leaf,
                    "bound": bound,
                    "algorithm": algorithm,
                    "timeout_ms": TIMEOUT_MS,
                }
                text = _payload_text(payload)
                work_id = WorkId(hashlib.sha256(text).hexdigest())
                yield WorkItem(
                    work_id=work_id,
                    state_task_id=task,
                    target=f"p{index}/leaf{leaf}",
                    parameter=f"bound={bound}",
                    algorithm=algorithm,
                    payload=payload,
                    work_text=work_text(work_id, task, text.decode("ascii")),
                )


#: The JSON text of the payload fields ``_payload_text`` writes straight away.
_ALGORITHM_TEXT = {a: json.dumps(a) for a in ALGORITHMS}
_WORKLOAD_TEXT = json.dumps(WORKLOAD)


def _payload_text(payload: Mapping[str, Any]) -> bytes:
    """``canonical(payload)`` for a payload ``_items`` made: its eight fields in sorted order,
    ints as ``int.__repr__`` writes them, built without ``json.dumps`` (a third of the cost of
    making a catalogue, issue 19); ``canonical`` itself for anything else (a seed that is not a
    plain int). tests/unit/test_wire.py compares the two."""
    seed = payload["seed"]
    if type(seed) is not int:
        return canonical(payload)
    return (
        f'{{"algorithm":{_ALGORITHM_TEXT[payload["algorithm"]]},"bound":{payload["bound"]},'
        f'"depth":{payload["depth"]},"program":{payload["program"]},"seed":{int.__repr__(seed)},'
        f'"target":{payload["target"]},"timeout_ms":{payload["timeout_ms"]},'
        f'"workload":{_WORKLOAD_TEXT}}}'
    ).encode("ascii")


def generate(n: int, seed: int = 0) -> list[WorkItem]:
    """The first ``n`` work items of workload ``seed``: programs in order, each program's targets
    in a seeded order, and one to three variants (bound, algorithm) per target, adjacent, so that
    several ranks ask for the same state task at once."""
    from leasefence.impl.coordinator import state_task_id

    items: list[WorkItem] = []
    for item in _items(seed, state_task_id):
        if len(items) == n:
            break
        items.append(item)
    return items


# -- worker functions -------------------------------------------------------------------------


def trivial_worker(work: Work) -> Outcome:
    """Answers at once without solving anything: for tests and protocol benchmarks."""
    return Outcome(True, 0.0, {"status": "trivial"})


def solve_branch(work: Work) -> Outcome:
    """The real worker function: a z3 query for inputs reaching the payload's target leaf.

    ``ok`` is True when z3 answers (sat with a witness, or unsat: the leaf is unreachable within
    the bound) and False when it gives up (unknown, timeout) or the payload is not one of ours.
    """
    z3: Any = importlib.import_module("z3")  # heavy; only workers import it (untyped)

    p = work.payload
    try:
        prog = program(int(p["seed"]), int(p["program"]), int(p["depth"]))
        leaf, bound, algorithm = int(p["target"]), int(p["bound"]), str(p["algorithm"])
        timeout_ms = int(p["timeout_ms"])
    except (KeyError, TypeError, ValueError) as exc:
        return Outcome(False, 0.0, {"error": f"not a {WORKLOAD} payload: {exc!r}"})
    if p.get("workload") != WORKLOAD or not 0 <= leaf < prog.leaves or algorithm not in ALGORITHMS:
        return Outcome(False, 0.0, {"error": f"not a {WORKLOAD} payload"})
    start = time.process_time()
    x, y = z3.Int("x"), z3.Int("y")
    if algorithm == "qf-nia":
        solver = z3.SolverFor("QF_NIA")
    elif algorithm == "simplify-smt":
        solver = z3.Then("simplify", "solve-eqs", "smt").solver()
    else:
        solver = z3.Solver()
    solver.set("timeout", timeout_ms)
    solver.add(x >= -bound, x <= bound, y >= -bound, y <= bound)
    for node, taken in prog.path(leaf):
        solver.add(_z3_cond(z3, prog.conds[node], x, y) == taken)
    answer = solver.check()
    if answer == z3.sat:
        model = solver.model()
        wx = model.eval(x, model_completion=True).as_long()
        wy = model.eval(y, model_completion=True).as_long()
        output: dict[str, Any] = {"status": "sat", "x": wx, "y": wy}
    elif answer == z3.unsat:
        output = {"status": "unsat"}
    else:
        output = {"status": "unknown", "reason": solver.reason_unknown()}
    cpu = time.process_time() - start
    return Outcome(answer != z3.unknown, cpu, output)


def _z3_cond(z3: Any, cond: Cond, x: Any, y: Any) -> Any:
    kind = cond[0]
    if kind == "lin":
        return cond[1] * x + cond[2] * y > cond[3]
    if kind == "mul":
        return x * y > cond[1]
    return (cond[1] * x + cond[2] * y) % cond[3] == cond[4]


def reached(item: WorkItem, output: Mapping[str, Any]) -> bool:
    """Whether ``output`` is a verified witness for ``item``: a sat answer whose inputs, run
    concretely, end in the target leaf within the bound (the master checks every witness)."""
    if output.get("status") != "sat":
        return False
    x, y = output.get("x"), output.get("y")
    if not isinstance(x, int) or not isinstance(y, int) or isinstance(x, bool | float):
        return False
    p = item.payload
    if max(abs(x), abs(y)) > int(p["bound"]):
        return False
    return program(int(p["seed"]), int(p["program"]), int(p["depth"])).run(x, y) == int(p["target"])


WORKERS: dict[str, WorkerFn] = {"z3": solve_branch, "trivial": trivial_worker}
