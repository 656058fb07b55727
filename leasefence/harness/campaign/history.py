"""A build's history judged offline: the ledger over its trace and journal, and the trace
replayed through the model, whole and job by job, both read by the one trace parser."""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from leasefence.conformance.tracecheck import Replay, bounds_from_header, journal_of, validate
from leasefence.conformance.traceformat import (
    DispatchWork,
    Header,
    RestartMaster,
    Trace,
    parse,
)
from leasefence.harness.campaign.ledger import History, check_history, journal_done_records
from leasefence.model.state import as_map


def check_build(workdir: Path, work: int, seed: int) -> History:
    """The history of the build run in ``workdir`` (its ``work`` items generated from ``seed``):
    the ledger's counts, the trace's validity against the model, whole and per job, and the
    restarts a kill in the middle of a rejected dispatch explains."""
    from leasefence.impl.workload import generate

    journal = workdir / "journal.jsonl"
    ids = [i.work_id for i in generate(work, seed)]
    done = journal_done_records(journal) if journal.exists() else Counter[str]()
    try:
        trace = parse((workdir / "trace.ndjson").read_text().splitlines(keepends=True))
    except (OSError, ValueError) as exc:  # unreadable, not UTF-8, or not a trace
        h = check_history(Trace(()), ids, journal_done=done)
        h.trace_valid, h.trace_divergence = False, str(exc)
        return h
    h = check_history(trace, ids, journal_done=done)
    report = validate(trace)
    h.trace_valid, h.trace_divergence = report.ok, report.divergence
    h.trace_steps, h.lost_steps = report.steps, report.lost_steps
    if report.line is not None:
        h.trace_divergence = f"line {report.line}: {report.divergence}"
    h.segments_valid, h.segment_divergences = validate_segments(trace)
    if not report.ok:
        h.interrupted_rejections = interrupted_rejections(trace)
    return h


def validate_segments(trace: Trace) -> tuple[bool, list[str]]:
    """Validate each job's part of a trace on its own (a part after a restart starts on the
    files as the restarted master read them). True when every part is a behaviour of the model."""
    problems = []
    for k, part in enumerate(trace.segments()):
        report = validate(part)
        if not report.ok:
            problems.append(f"job {k + 1}, line {report.line}: {report.divergence}")
    return not problems, problems


def interrupted_rejections(lines: Sequence[str] | Trace) -> list[str]:
    """Restarts whose disk state differs from the model's only by journal leases that a
    rejected dispatch had taken and not yet given back when the master was killed.

    ``Master.dispatch`` leases the work in the journal (durably) before the coordinator may
    refuse the state lease, and only then undoes the work lease; the model's ``DispatchWork``
    with its ``RejectDispatch`` is one atomic step. A SIGKILL between the two fsyncs leaves a
    lease (one more attempt) that no model step explains. Fencing still holds: the lease's
    owner is a rank of the dead job, and recovery reclaims it after one TTL.
    """
    trace = lines if isinstance(lines, Trace) else parse(lines)
    found: list[str] = []
    if not trace.events:
        return found
    rp = Replay(bounds_from_header(trace.header))
    last_refused: dict[tuple[str, int], str] = {}
    for ev in trace.events[1:]:
        if isinstance(ev, Header):
            rp.join(ev)
            continue
        rp.tick(ev.now)
        if isinstance(ev, RestartMaster) and ev.recovered is not None:
            found += _give_back_interrupted(rp, ev, last_refused)
            last_refused = {}
        if isinstance(ev, DispatchWork) and not ev.ok:
            last_refused[ev.w, ev.r] = str(ev.refused)
        problem = rp.apply(ev)
        if problem is not None:
            return [*found, f"UNEXPLAINED line {ev.line}: {problem[:300]}"]
        rp.steps += 1
    return found


def _give_back_interrupted(
    rp: Replay, ev: RestartMaster, last_refused: dict[tuple[str, int], str]
) -> list[str]:
    """When every journal lease on disk the model lacks was taken by a dispatch refused (after
    its journal lease) since the last restart, adopt the disk's journal without them, as the
    undo the kill interrupted would have left it; the note saying so, or nothing."""
    assert ev.recovered is not None
    s = rp.s
    disk = journal_of(ev.recovered, copy.deepcopy(rp.names))
    kept = {w for w, _ in s.journal.leases}
    extra = {w for w, _ in disk.leases} - kept
    stray = [
        (w, x.owner)
        for w, x in disk.leases
        if w in extra and last_refused.get((w, x.owner)) not in (None, "lease_work")
    ]
    if not extra or len(stray) != len(extra):
        return []
    rp.s = s._replace(
        journal=disk._replace(
            leases=as_map((w, x) for w, x in disk.leases if w in kept),
            attempts=s.journal.attempts,
        )
    )
    return [
        f"line {ev.line}: lease of {', '.join(w[:12] for w, _ in stray)} by rank "
        f"{', '.join(str(r) for _, r in stray)} left by a dispatch rejected at "
        f"{', '.join(sorted({last_refused[k] for k in stray}))} and killed before its undo"
    ]
