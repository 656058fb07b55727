"""Trace validation: replay an NDJSON trace of a real run through the model, step by step.

A trace (written by ``leasefence.impl.trace``) starts with a ``Header`` line (TTL, ranks, the map
from work ID to state task) followed by one line per master step, named by its TLA+ action:
``DispatchWork``, ``DeliverResult``, ``ReclaimExpired``, ``RestartMaster``. Each step carries the
master's clock reading ``now`` (Unix seconds) and what the implementation decided. Replay moves
the model's wall clock to ``now`` (a step backwards is a wall-clock rollback), applies the same
action with the same arguments, and compares every decision. The first step the model does not
allow, or decides differently, is reported with the state before it.

Times are compared in integer milliseconds, the model's ticks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from leasefence.model.check import flatten
from leasefence.model.journal import lease_work
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_UNIX
from leasefence.model.state import Coordinator, Journal, Lease, State, StateLease, Stats, get
from leasefence.model.system import (
    DISPATCH_STEPS,
    Bounds,
    deliver_result,
    dispatch_work,
    initial_state,
    reclaim_expired,
    restart_master,
)

ACTIONS = ("DispatchWork", "DeliverResult", "ReclaimExpired", "RestartMaster")


class TraceFormatError(ValueError):
    """A trace line that is not valid JSON or lacks a field its event needs."""


@dataclass
class TraceReport:
    """The outcome of one validation: steps replayed, per-action counts, the first divergence."""

    steps: int = 0
    counts: dict[str, int] = field(default_factory=dict)
    rollbacks: int = 0
    divergence: str | None = None
    line: int | None = None
    torn_tail: bool = False
    lost_steps: int = 0

    @property
    def ok(self) -> bool:
        return self.divergence is None


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _need(event: dict[str, Any], key: str, lineno: int) -> Any:
    if key not in event:
        raise TraceFormatError(f"line {lineno}: {event.get('event')!r} event lacks field {key!r}")
    return event[key]


def parse(lines: Iterable[str]) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """The events of a trace with their line numbers; a torn (unparsable) last line is dropped
    and reported, a bad line followed by good ones raises ``TraceFormatError``."""
    events: list[tuple[int, dict[str, Any]]] = []
    bad: tuple[int, str] | None = None
    for lineno, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        if bad is not None:
            raise TraceFormatError(
                f"line {bad[0]}: not valid JSON ({bad[1]}), and more lines follow"
            )
        try:
            event = json.loads(raw)
        except json.JSONDecodeError as exc:
            bad = (lineno, str(exc))
            continue
        if not isinstance(event, dict) or not isinstance(event.get("event"), str):
            raise TraceFormatError(f"line {lineno}: expected an object with an 'event' name")
        events.append((lineno, event))
    return events, bad is not None


def bounds_from_header(header: dict[str, Any]) -> Bounds:
    """Replay bounds: the header's works, tasks, ranks and TTL (in ms), and no exploration limits."""
    task_of = header.get("task_of")
    ranks = header.get("ranks")
    ttl = header.get("ttl")
    if (
        not isinstance(task_of, dict)
        or not isinstance(ranks, list)
        or not isinstance(ttl, int | float)
    ):
        raise TraceFormatError("the Header needs task_of (object), ranks (list) and ttl (number)")
    big = 10**12
    return Bounds(
        task_of=tuple(sorted((str(w), str(t)) for w, t in task_of.items())),
        ranks=tuple(int(r) for r in ranks),
        ttl=_ms(float(ttl)),
        max_wall=big,
        max_reboots=big,
        max_rollbacks=big,
        max_restarts=big,
        max_attempts=big,
        max_leases=big,
        max_dups=big,
    )


def validate(lines: Iterable[str]) -> TraceReport:
    """Replay the trace through the model; the report names the first divergence, if any."""
    events, torn = parse(lines)
    report = TraceReport(torn_tail=torn)
    if not events or events[0][1]["event"] != "Header":
        raise TraceFormatError("a trace starts with a Header line")
    b = bounds_from_header(events[0][1])
    s: State = initial_state()
    body = events[1:]
    for index, (lineno, ev) in enumerate(body):
        name = ev["event"]
        if name == "Header":
            # A restarted master appends its own header; new work IDs join the bounds.
            merged = dict(b.task_of) | {str(w): str(t) for w, t in ev.get("task_of", {}).items()}
            b = replace(b, task_of=tuple(sorted(merged.items())))
            continue
        if name not in ACTIONS:
            raise TraceFormatError(
                f"line {lineno}: unknown event {name!r} (known: {', '.join(ACTIONS)})"
            )
        now = _ms(float(_need(ev, "now", lineno)))
        if now < s.wall:
            report.rollbacks += 1
        s = s._replace(wall=now, mono=now)
        if name == "RestartMaster" and isinstance(ev.get("recovered"), dict):
            if report.steps == 0:
                # The trace starts on existing files: its history starts from what was on disk.
                s = _adopt(s, ev["recovered"])
            problem, s, lost = _resync(s, ev["recovered"], b)
            report.lost_steps += lost
            if problem is not None:
                report.divergence, report.line = problem, lineno
                return report
        problem, s = _apply(s, name, ev, lineno, b, body[index + 1 :])
        if problem is not None:
            report.divergence, report.line = problem, lineno
            return report
        report.steps += 1
        report.counts[name] = report.counts.get(name, 0) + 1
    return report


def _apply(
    s: State,
    name: str,
    ev: dict[str, Any],
    lineno: int,
    b: Bounds,
    rest: list[tuple[int, dict[str, Any]]],
) -> tuple[str | None, State]:
    def state_text(st: State) -> str:
        return "; ".join(f"{k}={v!r}" for k, v in flatten(st).items())

    if name == "DispatchWork":
        w, r = str(_need(ev, "w", lineno)), int(_need(ev, "r", lineno))
        if w not in b.works:
            return f"DispatchWork of {w!r}, which the Header does not list", s
        if get(s.active, r) is not None:
            return (
                f"DispatchWork to rank {r}, which the model says is still busy with {get(s.active, r)}",
                s,
            )
        refuse = ev.get("refused")
        injected = refuse if refuse in DISPATCH_STEPS[:3] else None
        out, t = dispatch_work(s, w, r, b, refuse=injected)
        if out.ok != bool(_need(ev, "ok", lineno)) or (not out.ok and out.refused != refuse):
            return (
                f"DispatchWork({w!r}, {r}): implementation ok={ev['ok']} refused={refuse!r}, "
                f"model ok={out.ok} refused={out.refused!r}; state before: {state_text(s)}"
            ), s
        return None, t
    if name == "DeliverResult":
        r, w = int(_need(ev, "r", lineno)), str(_need(ev, "w", lineno))
        reported = ev.get("reported")
        if (r, w) not in s.net:
            return (
                f"DeliverResult({r}, {w!r}): no such result in flight in the model (never dispatched)",
                s,
            )
        # A duplicated delivery leaves its message in flight: it is one when the next event
        # about the same (rank, work) is another delivery rather than a new dispatch of it.
        keep = False
        for _, e in rest:
            if int(e.get("r", -1)) != r or e.get("w") != w:
                continue
            if e.get("event") == "DeliverResult":
                keep = True
                break
            if e.get("event") == "DispatchWork" and e.get("ok"):
                break
        res, t = deliver_result(s, r, w, reported, bool(_need(ev, "ok", lineno)), b, keep=keep)
        got = (
            bool(ev.get("stale", False)),
            ev.get("task"),
            bool(ev.get("work_ok")),
            bool(ev.get("state_ok")),
        )
        want = (res.stale, res.task, res.work_ok, res.state_ok)
        if got != want:
            return (
                f"DeliverResult({r}, {w!r}, reported={reported!r}, ok={ev['ok']}): implementation "
                f"(stale, task, work_ok, state_ok)={got}, model {want}; state before: {state_text(s)}"
            ), s
        return None, t
    if name == "ReclaimExpired":
        works, t = reclaim_expired(s, b)
        got_list = sorted(str(x) for x in _need(ev, "reclaimed", lineno))
        if got_list != sorted(works):
            return f"ReclaimExpired: implementation reclaimed {got_list}, model {sorted(works)}", s
        return None, t
    # RestartMaster: first what the new master read from disk (see _resync), then the restart.
    return None, restart_master(s, b)


def _journal_of(doc: dict[str, Any]) -> Journal:
    leases = tuple(
        sorted(
            (
                str(w),
                Lease(int(x[0]), _ms(float(x[1])), CLOCK_UNIX if x[2] == "unix" else CLOCK_LEGACY),
            )
            for w, x in doc.get("leases", {}).items()
        )
    )
    attempts = tuple(sorted((str(w), int(n)) for w, n in doc.get("attempts", {}).items()))
    return Journal(leases=leases, completed=frozenset(doc.get("completed", [])), attempts=attempts)


def _adopt(s: State, recovered: dict[str, Any]) -> State:
    """The model state a trace starts from when its first step is a restart on existing files."""
    doc = recovered.get("coordinator", {})
    epoch = int(doc.get("epoch", 2)) - 1  # the new master had already loaded into the next epoch
    leases = tuple(
        sorted(
            (str(t), StateLease(int(x[0]), 0, int(x[2]))) for t, x in doc.get("leases", {}).items()
        )
    )
    stats = tuple(
        sorted(
            (str(t), Stats(int(x[0]), int(x[1]), int(x[0]), int(x[0]) + int(x[1])))
            for t, x in doc.get("stats", {}).items()
        )
    )
    coordinator = Coordinator(epoch=max(epoch, 1), leases=leases, stats=stats)
    return s._replace(journal=_journal_of(recovered.get("journal", {})), coordinator=coordinator)


def _master_steps(s: State, b: Bounds) -> list[State]:
    """Every state one master step (DispatchWork, DeliverResult, ReclaimExpired) leads to, and
    for DispatchWork also the state after its journal lease alone: a master killed inside the
    transaction, before RejectDispatch gave the lease back, leaves exactly that on disk."""
    out = [reclaim_expired(s, b)[1]]
    for r in b.ranks:
        if get(s.active, r) is None:
            out += [dispatch_work(s, w, r, b)[1] for w in b.works]
            for w in b.works:
                ok, j = lease_work(s.journal, w, r, s.wall, s.mono, b.flavour)
                if ok:
                    out.append(s._replace(journal=j))
    for r, w in sorted(s.net):
        for rep in (*b.tasks, None):
            out += [deliver_result(s, r, w, rep, ok, b)[1] for ok in (True, False)]
    return [t for t in out if t != s]


def _coordinator_view(c: Coordinator) -> tuple[object, ...]:
    """What is compared of a coordinator: owners and epochs of leases, and the booked counts."""
    leases = tuple((t, x.owner, x.epoch) for t, x in c.leases)
    stats = tuple((t, x.completions, x.failures) for t, x in c.stats if x.completions or x.failures)
    return leases, stats


def _recovered_view(doc: dict[str, Any]) -> tuple[object, ...]:
    leases = tuple(sorted((str(t), int(x[0]), int(x[2])) for t, x in doc.get("leases", {}).items()))
    stats = tuple(sorted((str(t), int(x[0]), int(x[1])) for t, x in doc.get("stats", {}).items()))
    return leases, stats


def _same_journal(model: Journal, disk: Journal, before: Journal) -> bool:
    """Equal, except that a lease the step itself wrote may carry the step's own (untraced) time."""
    if model.completed != disk.completed or model.attempts != disk.attempts:
        return False
    if {w for w, _ in model.leases} != {w for w, _ in disk.leases}:
        return False
    for w, x in model.leases:
        y = get(disk.leases, w)
        assert y is not None
        if (x.owner, x.clock) != (y.owner, y.clock):
            return False
        if x.updated != y.updated and get(before.leases, w) == y:
            return False
    return True


def _resync(s: State, recovered: dict[str, Any], b: Bounds) -> tuple[str | None, State, bool]:
    """Check what a restarted master read from disk against the model.

    A master killed with SIGKILL may have made its last step durable (journal first, then the
    coordinator) without tracing it. The disk state must then be the model's state after one
    step the model allows from the last traced state, or a prefix of one (the journal part done,
    the coordinator part not yet). Anything else is a divergence.
    """
    disk_j = _journal_of(recovered.get("journal", {}))
    disk_c = _recovered_view(recovered.get("coordinator", {}))
    if _same_journal(s.journal, disk_j, s.journal) and _coordinator_view(s.coordinator) == disk_c:
        return None, s, False
    for t in _master_steps(s, b):
        if not _same_journal(t.journal, disk_j, s.journal):
            continue
        if _coordinator_view(t.coordinator) == disk_c:
            return None, t._replace(journal=disk_j), True
        if _coordinator_view(s.coordinator) == disk_c:
            return None, s._replace(journal=disk_j), True
    return (
        (
            "RestartMaster: the state read from disk is neither the model's state nor one step the "
            f"model allows away from it; disk journal {disk_j!r}, disk coordinator {disk_c!r}; "
            f"model: {'; '.join(f'{k}={v!r}' for k, v in flatten(s).items())}"
        ),
        s,
        False,
    )
