"""The crash harness's workloads: seeded call sequences on one journal or one coordinator, and
the model's result and next state for each call."""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass
from typing import Any, Literal

from leasefence.model import coordinator as mco
from leasefence.model import journal as mjo
from leasefence.model.state import Coordinator, Journal

#: Unix time of tick 0 (2026-01-01T00:00:00Z); the workloads' clocks return ``BASE + tick``.
BASE = 1_767_225_600.0
JOURNAL_NAME = ".work_leases.jsonl"
SNAPSHOT_NAME = "state.json"
#: The monotonic stamp of the legacy record some journal workloads start with.
LEGACY_STAMP = 900_000
LEGACY_WORKER = 5
#: The rank of the lease written after recovery to check that a torn tail is cut.
AFTER_RANK = 9
RANKS = (1, 2, 3)

Kind = Literal["journal", "coordinator"]


@dataclass(frozen=True)
class Op:
    """One call of a workload: its name, its arguments and the clock tick it runs at."""

    name: str
    args: tuple[Any, ...]
    tick: int

    def describe(self) -> str:
        args = ", ".join(
            a[:8] + "…" if isinstance(a, str) and len(a) > 12 else repr(a) for a in self.args
        )
        return f"{self.name}({args}) @tick {self.tick}"


@dataclass(frozen=True)
class Workload:
    """A seeded call sequence. Step 0 opens the journal or coordinator; ``ops[i]`` is step i."""

    kind: Kind
    mode: str  # journal: "always"/"group"; coordinator: "autosave"/"manual"
    seed: int
    size: int
    legacy: bool
    names: tuple[str, ...]  # the work IDs or state tasks it uses
    ops: tuple[Op, ...]
    #: The legacy record is the file's last bytes without their newline (as a crash may leave
    #: a record): the first append must write the newline without risking the record.
    unterminated: bool = False

    @property
    def spec(self) -> str:
        return f"{self.kind}:{self.mode}:{self.seed}:{self.size}"


def _work_ids(seed: int, n: int) -> tuple[str, ...]:
    return tuple(
        hashlib.sha256(f"leasefence-crash:{seed}:{i}".encode()).hexdigest() for i in range(n)
    )


def after_id(w: Workload) -> str:
    """The work ID of the lease written after recovery (one no step of ``w`` uses)."""
    return _work_ids(w.seed, 6)[-1]


def journal_workload(seed: int, size: int, mode: str) -> Workload:
    """A journal workload of ``size`` calls, biased by the model towards calls that succeed."""
    rng = random.Random(f"journal:{mode}:{seed}")
    works = _work_ids(seed, 5)
    legacy = rng.random() < 0.5
    j = initial_journal(works, legacy)
    tick = 1
    ops: list[Op] = [Op("open", (), tick)]
    for _ in range(size):
        tick += rng.choice((0, 1, 1, 2, 3))
        held = [(w, x.owner) for w, x in j.leases]
        x = rng.random()
        op: Op
        if x < 0.34 or not held:
            op = Op("lease", (rng.choice(works), rng.choice(RANKS)), tick)
        elif x < 0.56:
            w, owner = rng.choice(held)
            who = rng.choice((owner, owner, owner, owner % 3 + 1, None))
            op = Op("complete", (w, who), tick)
        elif x < 0.66:
            w, owner = rng.choice(held)
            op = Op("abandon", (w, rng.choice((owner, owner, owner % 3 + 1, None))), tick)
        elif x < 0.76:
            op = Op("recover", (rng.choice((0, 2, 4)),), tick)
        elif x < 0.84:
            op = Op("compact", (), tick)
        elif x < 0.88:
            op = Op("reopen", (), tick)
        elif mode == "group":
            op = Op("commit", (), tick)
        else:
            op = Op("lease", (rng.choice(works), rng.choice(RANKS)), tick)
        ops.append(op)
        _, j, _ = journal_step(j, op)
    if mode == "group":
        ops.append(Op("commit", (), tick))
    # A draw of its own, so that the calls are those of the workloads without this variant.
    unterminated = legacy and random.Random(f"journal-tail:{mode}:{seed}").random() < 0.5
    return Workload("journal", mode, seed, size, legacy, works, tuple(ops), unterminated)


def coordinator_workload(seed: int, size: int, mode: str) -> Workload:
    """A coordinator workload of ``size`` calls, biased by the model towards calls that succeed."""
    rng = random.Random(f"coordinator:{mode}:{seed}")
    tasks = tuple(f"s{i}" for i in range(4))
    c = Coordinator()
    tick = 1
    ops: list[Op] = [Op("open", (), tick)]
    for _ in range(size):
        tick += rng.choice((0, 1, 1, 2, 3))
        held = [(t, x.owner) for t, x in c.leases if x.epoch == c.epoch]
        x = rng.random()
        op: Op
        if x < 0.32 or not held:
            op = Op("lease", (rng.choice(tasks), rng.choice(RANKS)), tick)
        else:
            t, owner = rng.choice(held)
            who = rng.choice((owner, owner, owner, owner % 3 + 1))
            if x < 0.52:
                op = Op("complete", (t, who, rng.randint(0, 3), rng.randint(0, 2)), tick)
            elif x < 0.62:
                op = Op("abandon", (t, who, rng.randint(0, 2)), tick)
            elif x < 0.70:
                op = Op("discard", (t, who), tick)
            elif x < 0.80:
                op = Op("recover_expired", (rng.choice((0, 2, 4)),), tick)
            elif x < 0.90 and mode == "manual":
                # a checkpoint, or the changes since the last write appended together
                op = Op(rng.choice(("save", "commit")), (), tick)
            else:
                op = Op("restart", (), tick)
        ops.append(op)
        c = coordinator_step(c, op, [c])[1]
    if mode == "manual":
        ops.append(Op("save", (), tick))
    return Workload("coordinator", mode, seed, size, False, tasks, tuple(ops))


def make_workload(spec: str) -> Workload:
    """The workload named by ``kind:mode:seed:size`` (as printed in a violation)."""
    kind, mode, seed, size = spec.split(":")
    if kind == "journal" and mode in ("always", "group"):
        return journal_workload(int(seed), int(size), mode)
    if kind == "coordinator" and mode in ("autosave", "manual"):
        return coordinator_workload(int(seed), int(size), mode)
    raise ValueError(f"not a workload: {spec!r} (kind:mode:seed:size)")


def workloads_for_round(seed: int, r: int, size: int) -> list[Workload]:
    """The four workloads of round ``r``: journal (always, group), coordinator (autosave, manual)."""
    s = seed * 1000 + r
    return [
        journal_workload(s, size, "always"),
        journal_workload(s, size, "group"),
        coordinator_workload(s, size, "autosave"),
        coordinator_workload(s, size, "manual"),
    ]


# -- what the model says each call does ----------------------------------------------------------


def initial_journal(works: tuple[str, ...], legacy: bool) -> Journal:
    """The model's journal before step 0: empty, or holding the legacy record."""
    if not legacy:
        return Journal()
    return mjo.legacy_record(Journal(), works[-1], LEGACY_WORKER, LEGACY_STAMP)[1]


def journal_step(j: Journal, op: Op) -> tuple[object, Journal, list[Journal]]:
    """The model's result of ``op``, the next state and the state after each record written."""
    if op.name == "lease":
        ok, nxt = mjo.lease_work(j, op.args[0], op.args[1], op.tick, 0)
        return ok, nxt, [nxt] if ok else []
    if op.name == "complete":
        ok, nxt = mjo.complete_work(j, op.args[0], op.args[1])
        return ok, nxt, [nxt] if ok else []
    if op.name == "abandon":
        ok, nxt = mjo.abandon_work(j, op.args[0], op.args[1])
        return ok, nxt, [nxt] if ok else []
    if op.name == "recover":
        gone, _ = mjo.recover_work(j, op.args[0], op.tick, 0)
        states = []
        for w in sorted(gone):  # one reclaim record per ID, in sorted order
            j = mjo.abandon_work(j, w, None)[1]
            states.append(j)
        return sorted(gone), j, states
    if op.name in ("compact", "commit", "reopen", "open"):
        return None, mjo.compact_journal(j), []
    raise ValueError(f"unknown journal call {op.name}")


def coordinator_step(
    c: Coordinator, op: Op, saved: list[Coordinator | None]
) -> tuple[object, Coordinator, bool]:
    """The model's result of ``op``, the next state, and whether it changed (autosave writes)."""
    n = op.name
    if n == "lease":
        ok, nxt = mco.lease_state(c, op.args[0], op.args[1], op.tick, 0)
        return ok, nxt, ok
    if n == "complete":
        ok, nxt = mco.complete_state(c, op.args[0], op.args[1], op.args[2], op.args[3])
        return ok, nxt, ok
    if n == "abandon":
        ok, nxt = mco.abandon_state(c, op.args[0], op.args[1], op.args[2])
        return ok, nxt, ok
    if n == "discard":
        ok, nxt = mco.discard_state(c, op.args[0], op.args[1])
        return ok, nxt, ok
    if n == "recover_expired":
        gone, nxt = mco.recover_states(c, op.args[0], op.tick, 0)
        return list(gone), nxt, bool(gone)
    if n == "restart":
        last = saved[-1]
        return None, Coordinator() if last is None else mco.restart_coordinator(last), True
    if n in ("save", "commit", "open"):
        return None, c, n == "open"
    raise ValueError(f"unknown coordinator call {n}")
