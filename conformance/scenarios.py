"""Scenario files: saved counterexamples replayed against the model and the implementation.

A scenario is a small JSON document (``tests/scenarios/*.json``)::

    {"name": "...", "origin": "where it came from", "machine": "system", "start": 0,
     "legacy": null,
     "steps": [{"action": "DispatchWork", "args": ["w1", 1]},
               {"action": "DispatchWork", "args": ["w1", 2],
                "expect": {"ok": false, "refused": "lease_work"}}]}

``action`` is a TLA+ action name of ``model.system`` (``DispatchWork``, ``DeliverResult``,
``ReclaimExpired``, ``RestartMaster``, ``Tick``, ``RollbackClock``, ``Reboot``,
``CompactJournal``, ``LegacyRecord``) or a fault of the conformance machines (``TornTail(w, r, cut)``), with the
model checker's arguments; the work names ``w1`` .. ``w4`` are the catalogue's work IDs. Replay
runs the steps through the system machine ``machine`` names (``"system"``, the default, or
``"system-pipelined"``: depth 2 with generation fencing, where ``DeliverResult`` takes the
model checker's seven arguments ``(r, w, t, ok, keep, g, p)``: the message's generation and
the one it presents, 0 for none), so every step is compared between model and
implementation, the two-state properties are checked, and every invariant is checked after it;
An optional ``bounds`` object (the model's ``Bounds`` fields, work names ``w1`` ..; written by
``conformance.transitions`` for a failing transition) runs the machine under those bounds
instead of its own (their TTL, ranks and limits). ``expect`` pins the outcome the fixed protocol must give (the step a defect gets wrong).
A failing Hypothesis example is saved in this format when ``LEASEFENCE_SAVE_SCENARIOS=DIR`` is set.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from leasefence.conformance import strategies as gen
from leasefence.conformance.machines import MACHINES, SystemMachine
from leasefence.conformance.machines.system import bounded
from leasefence.model.system import Bounds

#: The model checker's work names, as the catalogue's work IDs (same tasks: w1, w2 -> s1).
WORK_NAMES = {f"w{i}": str(item.work_id) for i, item in enumerate(gen.CATALOGUE, start=1)}

#: The model checker's name of each catalogue work ID (``w1`` for W1 ...).
MODEL_NAMES = {v: k for k, v in WORK_NAMES.items()}

_FIELDS = {
    "DispatchWork": ("ok", "taken", "refused", "undone"),
    "DeliverResult": ("stale", "task", "mismatch", "work_ok", "state_ok"),
}


def _work(name: str) -> str:
    return WORK_NAMES.get(name, name)


def _call(m: SystemMachine, action: str, args: list[Any]) -> None:
    steps: dict[str, Callable[[], None]] = {
        "DispatchWork": lambda: m.do_dispatch_work(_work(args[0]), int(args[1])),
        "DeliverResult": lambda: m.do_deliver_result(
            int(args[0]),
            _work(args[1]),
            args[2],
            bool(args[3]),
            bool(args[4]),
            *(int(x) for x in args[5:7]),
        ),
        "ReclaimExpired": m.do_reclaim_expired,
        "RestartMaster": m.do_restart_master,
        "Tick": lambda: m.do_tick(int(args[0]) if args else 1),
        "RollbackClock": lambda: m.do_rollback_clock(int(args[0])),
        "Reboot": m.do_reboot,
        "CompactJournal": m.do_compact_journal,
        "TornTail": lambda: m.do_torn_tail(_work(args[0]), int(args[1]), int(args[2])),
        "LegacyRecord": lambda: m.do_legacy_record(_work(args[0]), int(args[1])),
    }
    if action not in steps:
        raise ValueError(f"unknown scenario action {action!r} (known: {', '.join(steps)})")
    steps[action]()


def outcome(action: str, result: object) -> dict[str, Any]:
    """The outcome of a step as a dict (for ``expect``)."""
    fields = _FIELDS.get(action)
    if fields is None or not isinstance(result, tuple):
        return {"result": result}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in zip(fields, result, strict=True)}


def replay(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Replay one scenario; raises on any disagreement, broken invariant or unmet ``expect``.
    Returns each step's outcome."""
    legacy = doc.get("legacy")
    machine = MACHINES.get(str(doc.get("machine", "system")))
    if machine is None or not issubclass(machine, SystemMachine):
        raise ValueError(f"a scenario replays on a system machine, not {doc.get('machine')!r}")
    if "bounds" in doc:
        machine = bounded(machine, bounds_of(doc["bounds"]))
    m = machine(start=int(doc.get("start", gen.START)))
    outcomes = []
    try:
        m.do_open((_work(legacy[0]), int(legacy[1]), int(legacy[2])) if legacy else None)
        m.check_invariants_now()
        for number, step in enumerate(doc["steps"], start=1):
            action, args = step["action"], list(step.get("args", []))
            _call(m, action, args)
            m.check_invariants_now()
            got = outcome(action, m.last)
            outcomes.append(got)
            for key, want in step.get("expect", {}).items():
                if got.get(key) != want:
                    raise AssertionError(
                        f"step {number} {action}{tuple(args)}: {key} is {got.get(key)!r}, "
                        f"the scenario expects {want!r}"
                    )
    finally:
        m.teardown()
    return outcomes


def bounds_doc(b: Bounds) -> dict[str, Any]:
    """``b`` as JSON (model work names), for a scenario file."""
    doc: dict[str, Any] = {
        k: v
        for k, v in vars(b).items()
        if k in Bounds.__dataclass_fields__ and k not in ("task_of", "flavour")
    }
    doc["ranks"] = list(b.ranks)
    doc["task_of"] = [[MODEL_NAMES.get(w, w), t] for w, t in b.task_of]
    return doc


def bounds_of(doc: dict[str, Any]) -> Bounds:
    """The bounds of a scenario's ``bounds`` document (catalogue work IDs)."""
    fields = {k: v for k, v in doc.items() if k in Bounds.__dataclass_fields__}
    fields["ranks"] = tuple(fields.get("ranks", ()))
    fields["task_of"] = tuple((WORK_NAMES.get(w, w), t) for w, t in fields.get("task_of", ()))
    return Bounds(**fields)


def load(path: str | Path) -> dict[str, Any]:
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("steps"), list):
        raise ValueError(f"{path}: a scenario is an object with a 'steps' list")
    return doc
