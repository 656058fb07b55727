"""The campaign's lease ledger: a trace replayed through F314's leases, counting what went wrong.

The ledger reads a trace through the one trace parser (``conformance.traceformat``) and keeps
who holds each work and state lease, granted by ``DispatchWork``, released by an accepted
result, by ``ReclaimExpired`` or by ``RestartMaster``. Whether a reclaim was early is judged
by the model's rule (``model.rules.reclaimable``), never by the implementation's rule under
test.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from leasefence.conformance.traceformat import (
    DeliverResult,
    DispatchWork,
    Event,
    Header,
    ReclaimExpired,
    RestartMaster,
    Trace,
    json_objects,
    parse_docs,
)
from leasefence.model.rules import CLOCK_LEGACY, CLOCK_UNIX, reclaimable

#: Model ticks per second (``conformance.tracecheck.TICKS_PER_SECOND``).
TICKS_PER_SECOND = 1_000_000


def model_reclaimable(
    updated: float, clock: str | None, now: float, ttl: float, slack: int = 0
) -> bool:
    """Whether the model's rule reclaims a lease stamped ``updated`` (seconds, clock tag
    ``clock``) at ``now`` with ``ttl``, in the model's microsecond ticks, at ``now`` or up to
    ``slack`` ticks either side (the implementation decides on floats, so within a tick of the
    TTL a lease may have gone either way; ``tracecheck`` allows the same)."""

    def ticks(seconds: float) -> int:
        return round(seconds * TICKS_PER_SECOND)

    domain = CLOCK_UNIX if clock == "unix" else CLOCK_LEGACY
    at = ticks(now)
    return any(
        reclaimable(ticks(updated), domain, t, t, ticks(ttl))
        for t in range(at - slack, at + slack + 1)
    )


@dataclass
class History:
    """What the history of one build shows. The first block must be all zero (and
    ``exactly_once`` true) for F314; the rest are measurements."""

    # invariants
    duplicate_completions: int = 0
    journal_duplicate_completions: int = 0
    wrong_owner_commits: int = 0
    double_grants_work: int = 0
    double_grants_state: int = 0
    premature_reclaims: int = 0
    misattributed_results: int = 0
    missing_items: int = 0
    exactly_once: bool = False
    trace_valid: bool = False
    trace_divergence: str | None = None
    trace_steps: int = 0
    lost_steps: int = 0
    segments_valid: bool = False
    segment_divergences: list[str] = field(default_factory=list)
    interrupted_rejections: list[str] = field(default_factory=list)
    # measurements
    duplicate_dispatches: int = 0
    concurrent_state_dispatches: int = 0
    refused_candidates: int = 0
    wrong_owner_rejections: int = 0
    stale_results: int = 0
    reclaimed_leases: int = 0
    recovered_items: int = 0
    restarts: int = 0
    rollbacks: int = 0
    late_results: int = 0
    duplicated_results: int = 0
    reordered_results: int = 0
    wrong_id_reports: int = 0
    # beyond depth 1 (issue 12); the cross-generation counts need results that present one
    pipeline: int = 1
    fence: str = "rank"
    deepest: int = 0  # the most dispatches one rank held at once
    cross_generation_results: int = 0
    cross_generation_refused: int = 0
    cross_generation_accepted: int = 0
    superseded_results: int = 0
    superseded_same_rank: int = 0
    same_rank_redispatches: int = 0
    ambiguous_commits: int = 0
    # results of a dispatch that was running when the master restarted (only an in-job
    # restart lets one arrive): refused (stale, or a refused commit) or accepted whole
    restart_crossing_results: int = 0
    restart_crossing_refused: int = 0
    examples: list[str] = field(default_factory=list)

    def note(self, text: str) -> None:
        if len(self.examples) < 8:
            self.examples.append(text)

    @property
    def violations(self) -> int:
        return (
            self.duplicate_completions
            + self.journal_duplicate_completions
            + self.wrong_owner_commits
            + self.double_grants_work
            + self.double_grants_state
            + self.premature_reclaims
            + self.misattributed_results
            + self.missing_items
        )

    @property
    def damage(self) -> bool:
        """Duplicates or wrong-owner commits: what a pre-fix build is expected to show."""
        return bool(
            self.duplicate_completions
            or self.journal_duplicate_completions
            or self.double_grants_work
            or self.double_grants_state
            or self.wrong_owner_commits
        )

    @property
    def trace_breaks(self) -> str | None:
        """The invariants the trace breaks at a step the model allows (``tracecheck`` checks
        L1-L7 on every replayed state), or None."""
        text = self.trace_divergence or ""
        marker = "but it breaks "
        if marker not in text:
            return None
        return text.split(marker, 1)[1].split(";", 1)[0]

    @property
    def trace_ok(self) -> bool:
        """Every job's trace is a behaviour of the model, and each restart is one too, or
        differs only by a rejected dispatch killed before its undo (``interrupted_rejections``)."""
        explained = bool(self.interrupted_rejections) and not any(
            x.startswith("UNEXPLAINED") for x in self.interrupted_rejections
        )
        return self.segments_valid and (self.trace_valid or explained)

    @property
    def ok(self) -> bool:
        return self.violations == 0 and self.exactly_once and self.trace_ok


#: A dispatch generation ``(epoch, counter)`` as the trace writes it (issue 12).
Gen = tuple[int, int]


#: A dispatch as the checker names it: (rank, work, generation). Under rank fencing the
#: generation is None and a result stands for the latest dispatch of its (rank, work).
_Dispatch = tuple[int, str, Gen | None]


@dataclass
class _Lease:
    owner: int  # the rightful owner's rank: the first grant while no live lease existed
    since: float  # the step's clock reading at the grant (the stamp F314 persists)
    clock: str | None = "unix"
    intruders: set[int] = field(default_factory=set)  # ranks granted it while it was live
    gen: Gen | None = None  # the owner's dispatch generation (None: fenced by the rank alone)
    work: str | None = None  # the work item of the dispatch that took it

    def owned_by(self, rank: int, gen: Gen | None, work: str, pipeline: int) -> bool:
        """Whether a commit by the dispatch ``(rank, gen)`` of ``work`` is the owner's. The
        owner token is the whole ``(rank, generation)``. At depth 1 a rank holds one dispatch,
        so under rank fencing the rank names it (F314); beyond, a rank-fenced trace names no
        generation, and the dispatch is told by its work item instead: a result of ``work``
        is not the dispatch of another work item that took this (state) lease."""
        if self.owner != rank or self.gen != gen:
            return False
        return pipeline == 1 or gen is not None or self.work in (None, work)

    def token(self, pipeline: int) -> str:
        """The owner as example notes name it (at depth 1 the rank, as F314's ledger did)."""
        if pipeline == 1 and self.gen is None:
            return str(self.owner)
        text = f"rank {self.owner}" + (f" gen {list(self.gen)}" if self.gen else "")
        return text + (f" for work {self.work[:12]}" if self.work and not self.gen else "")


@dataclass
class _Ledger:
    """The leases and dispatches of a history being replayed, one method per trace event."""

    h: History = field(default_factory=History)
    task_of: dict[str, str] = field(default_factory=dict)
    ttl: float = 0.0
    pipeline: int = 1
    work: dict[str, _Lease] = field(default_factory=dict)
    state: dict[str, _Lease] = field(default_factory=dict)
    # rank -> its dispatches (work, generation), oldest first, as the master holds them
    active: dict[int, list[tuple[str, Gen | None]]] = field(default_factory=dict)
    running: dict[_Dispatch, int] = field(default_factory=dict)  # -> dispatch order, until answered
    answered: dict[int, int] = field(default_factory=dict)  # rank -> order of its latest answer
    last_order: dict[_Dispatch, int] = field(default_factory=dict)  # dispatch -> its order
    last_gen: dict[tuple[int, str], Gen | None] = field(default_factory=dict)  # latest generation
    latest: dict[str, tuple[int, int]] = field(default_factory=dict)  # work -> (rank, order)
    unanswered: Counter[tuple[int, str]] = field(default_factory=Counter)  # (rank, work) -> n
    answers: Counter[tuple[int, str, Gen | None, int]] = field(default_factory=Counter)
    completions: Counter[str] = field(default_factory=Counter)
    lost: set[str] = field(default_factory=set)
    reclaimed_while_running: set[_Dispatch] = field(default_factory=set)
    forgotten: set[tuple[int, str]] = field(default_factory=set)  # running at the last restart
    order: int = 0
    last_now: float | None = None

    def step(self, ev: Event) -> None:
        if isinstance(ev, Header):
            self.header(ev)
            return
        if self.last_now is not None and ev.now < self.last_now:
            self.h.rollbacks += 1
        self.last_now = ev.now
        if isinstance(ev, DispatchWork):
            self.dispatch(ev)
        elif isinstance(ev, DeliverResult):
            self.deliver(ev)
        elif isinstance(ev, ReclaimExpired):
            self.reclaim(ev)
        else:
            self.restart(ev)

    def header(self, ev: Header) -> None:
        self.task_of.update(ev.task_of)
        self.ttl, self.pipeline = ev.ttl, ev.pipeline
        self.h.pipeline, self.h.fence = ev.pipeline, ev.fence

    def dispatch(self, ev: DispatchWork) -> None:
        h, w, r, g = self.h, ev.w, ev.r, ev.gen
        t = self.task_of.get(w, "")
        others = [x for (x, y, _) in self.running if y == w and x != r]
        same_task = [x for (x, y, _) in self.running if y != w and self.task_of.get(y) == t]
        if not ev.ok:
            h.refused_candidates += bool(others or same_task)
            return
        self.order += 1
        h.duplicate_dispatches += bool(others)
        h.concurrent_state_dispatches += bool(same_task)
        h.same_rank_redispatches += any(x == r and y == w for (x, y, _) in self.running)
        for ledger, key, what in ((self.work, w, "work"), (self.state, t, "state task")):
            held = ledger.get(key)
            if held is None:
                ledger[key] = _Lease(r, ev.now, gen=g, work=w)
                continue
            held.intruders.add(r)
            if what == "work":
                h.double_grants_work += 1
            else:
                h.double_grants_state += 1
            h.note(f"{what} {key[:12]} granted to rank {r} while rank {held.owner} held it")
        mine = self.active.setdefault(r, [])
        mine.append((w, g))
        del mine[: -self.pipeline]  # a rank holds at most `pipeline` (at depth 1: the last one)
        h.deepest = max(h.deepest, len(mine))
        self.running[r, w, g] = self.last_order[r, w, g] = self.order
        self.last_gen[r, w] = g
        self.latest[w] = (r, self.order)
        self.unanswered[r, w] += 1

    def deliver(self, ev: DeliverResult) -> None:
        """A result: which dispatch it answers, how it arrived, and what it committed."""
        r, w = ev.r, ev.w
        found, g = self._dispatch_of(ev)
        disp = (r, w, g)
        accepted = not ev.stale and ev.work_ok
        if found is None and (r, w) in self.forgotten:
            self.h.restart_crossing_results += 1
            committed = ev.state_ok or ev.task is None
            self.h.restart_crossing_refused += not (accepted and committed)
        self._crossing_generations(ev, accepted)
        if ev.gen is None and accepted and self.unanswered[r, w] > 1:
            self.h.ambiguous_commits += 1
        self._count_arrival(disp)
        if ev.stale:
            self.h.stale_results += 1
            return
        self._commit(ev, found, g)

    def _dispatch_of(self, ev: DeliverResult) -> tuple[tuple[str, Gen | None] | None, Gen | None]:
        """The rank's dispatch the result is for (by the generation it presents, else by work),
        and the generation that names it."""
        mine = self.active.get(ev.r, [])
        if ev.gen is not None:
            return next((d for d in mine if d[1] == ev.gen), None), ev.gen
        found = next((d for d in mine if d[0] == ev.w), None)
        return found, found[1] if found is not None else self.last_gen.get((ev.r, ev.w))

    def _crossing_generations(self, ev: DeliverResult, accepted: bool) -> None:
        """A result whose generation no longer holds its work's lease: a duplicate of an
        answered result, or late or reordered past a reclaim or a newer dispatch."""
        r, w, presented, h = ev.r, ev.w, ev.gen, self.h
        holder = self.work.get(w)
        if presented is None or (
            holder is not None and holder.owned_by(r, presented, w, self.pipeline)
        ):
            return
        h.cross_generation_results += 1
        if accepted:
            h.cross_generation_accepted += 1
            h.note(
                f"work {w[:12]}: result of rank {r} gen {list(presented)} accepted, "
                f"owner {holder and holder.token(self.pipeline)}"
            )
        else:
            h.cross_generation_refused += 1
        tag, newest = self.last_order.get((r, w, presented)), self.latest.get(w)
        if tag is not None and newest is not None and newest[1] > tag:
            h.superseded_results += 1
            h.superseded_same_rank += newest[0] == r

    def _count_arrival(self, disp: _Dispatch) -> None:
        """Duplicated, reordered and late arrivals of the dispatch ``disp``'s result."""
        r, w, _ = disp
        if self.unanswered[r, w] > 0:
            self.unanswered[r, w] -= 1
        tag = self.last_order.get(disp)
        if tag is not None:
            self.answers[(*disp, tag)] += 1
            self.h.duplicated_results += self.answers[(*disp, tag)] > 1
            self.h.reordered_results += self.answered.get(r, 0) > tag
            self.answered[r] = max(self.answered.get(r, 0), tag)
        if self.running.pop(disp, None) is not None and disp in self.reclaimed_while_running:
            self.h.late_results += 1
        self.reclaimed_while_running.discard(disp)

    def _commit(
        self, ev: DeliverResult, found: tuple[str, Gen | None] | None, g: Gen | None
    ) -> None:
        """A result that was not stale: the dispatch it ends, the task it committed, and
        whether its completion or abandon (if accepted) was by each lease's owner."""
        h, r, w = self.h, ev.r, ev.w
        stored = None
        if found is not None and found[0] == w:
            mine = self.active[r]
            mine.remove(found)
            stored = w
            if not mine:
                del self.active[r]
        if ev.reported is not None and ev.reported != self.task_of.get(w):
            h.wrong_id_reports += 1
        task = ev.task
        if stored is not None and task is not None and task != self.task_of.get(w):
            h.misattributed_results += 1
            h.note(f"result of {w[:12]} from rank {r} committed to task {task[:12]}")
        if not ev.work_ok:
            h.wrong_owner_rejections += 1
            return
        if ev.ok:
            self.completions[w] += 1
            if self.completions[w] > 1:
                h.note(f"work {w[:12]} completed again by rank {r}")
        who = f"rank {r}" + (f" gen {list(g)}" if g else "")
        held = self.work.pop(w, None)
        if held is None or not held.owned_by(r, g, w, self.pipeline):
            h.wrong_owner_commits += 1
            h.note(f"work {w[:12]} committed by {who}, owner {held and held.token(self.pipeline)}")
        if task is None:
            return
        if not ev.state_ok:
            h.wrong_owner_rejections += 1
            return
        held_s = self.state.pop(task, None)
        if held_s is None or not held_s.owned_by(r, g, w, self.pipeline):
            h.wrong_owner_commits += 1
            h.note(
                f"state task {task[:12]} committed by {who}"
                + (f" for work {w[:12]}" if self.pipeline > 1 and g is None else "")
                + f", owner {held_s and held_s.token(self.pipeline)}"
            )

    def reclaim(self, ev: ReclaimExpired) -> None:
        """Work IDs reclaimed: early when the model's rule keeps the lease at that instant."""
        now = ev.now
        for w in ev.reclaimed:
            self.h.reclaimed_leases += 1
            self.lost.add(w)
            held = self.work.pop(w, None)
            if held is not None and not model_reclaimable(
                held.since, held.clock, now, self.ttl, slack=1
            ):
                self.h.premature_reclaims += 1
                self.h.note(f"work {w[:12]} reclaimed {now - held.since:.3f} s after its lease")
            t = self.task_of.get(w, "")
            held_s = self.state.get(t)
            if held_s is not None and model_reclaimable(held_s.since, "unix", now, self.ttl):
                del self.state[t]
            for r in list(self.active):
                self.active[r] = [d for d in self.active[r] if d[0] != w]
                if not self.active[r]:
                    del self.active[r]
            for busy in self.running:
                if busy[1] == w:
                    self.reclaimed_while_running.add(busy)

    def restart(self, ev: RestartMaster) -> None:
        """A new master: completions a killed one made durable untraced count, the dispatches
        running are forgotten, and the leases on disk stand until they expire."""
        self.h.restarts += 1
        disk = ev.recovered.journal if ev.recovered is not None else None
        for w in disk.completed if disk is not None else ():
            if self.completions[w] == 0:
                self.completions[w] += 1  # made durable by the killed master, not traced
        self.lost |= {w for (_, w, _) in self.running}
        self.forgotten = {(r, w) for (r, w, _) in self.running}
        self.work = {}
        for w, x in (disk.leases if disk is not None else {}).items():
            if model_reclaimable(x.updated, x.clock, ev.now, self.ttl):
                self.h.reclaimed_leases += 1
                self.lost.add(w)
            else:
                self.work[w] = _Lease(x.owner, x.updated, x.clock, gen=x.gen, work=w)
        self.state, self.active, self.running, self.answered, self.last_order = {}, {}, {}, {}, {}
        self.last_gen, self.latest, self.unanswered = {}, {}, Counter()
        self.reclaimed_while_running = set()

    def finish(self, works: Iterable[str], journal_done: Mapping[str, int] | None) -> History:
        h, done = self.h, self.completions
        catalogue = set(works)
        h.duplicate_completions = sum(n - 1 for n in done.values() if n > 1)
        h.missing_items = sum(1 for w in catalogue if done[w] == 0)
        h.recovered_items = sum(1 for w in self.lost if done[w] > 0)
        h.exactly_once = all(done[w] == 1 for w in catalogue)
        if journal_done is not None:
            h.journal_duplicate_completions = sum(n - 1 for n in journal_done.values() if n > 1)
            if {w for w, n in journal_done.items() if n > 0} != catalogue:
                h.exactly_once = False
        return h


def check_history(
    events: Sequence[Mapping[str, Any]] | Trace,
    works: Iterable[str],
    *,
    journal_done: Mapping[str, int] | None = None,
) -> History:
    """Replay trace ``events`` (``impl.trace`` format, every job's lines in order) through a lease
    ledger kept by F314's rules, and count what went wrong.

    Every lease is held by an owner token ``(rank, generation)``: the generation is the one the
    ``DispatchWork`` was given (issue 12; none under rank fencing, where the rank alone is the
    token), and a result's token is its rank with the generation it presented (or, presenting
    none, the generation of the rank's dispatch of that work, as the master settles an
    old-protocol result). At depth 1 (the Header's ``pipeline``, 1 in a version-1 trace) with
    rank fencing this is F314's ledger exactly.

    - A *double grant* is a successful ``DispatchWork`` of a work item (or a state task) whose
      lease, by the history, is still held by another dispatch: never released by an accepted
      result, reclaimed, or voided by a restart (L1). The first holder stays the owner.
    - A *wrong-owner commit* is an accepted completion or abandon (``work_ok`` or ``state_ok``)
      by a token that is not that owner's: it holds no lease, got it by a double grant, or is
      another generation (L2). Beyond depth 1 under rank fencing, where the trace names no
      generation, a result of one work item committing the state lease taken by the same
      rank's dispatch of another (the model's ``--pipeline 2 --fence rank`` counterexample) is
      one too.
    - A *premature reclaim* is a work item in ``ReclaimExpired`` whose lease is not reclaimable
      by the model's rule at that step's clock (``model.rules.reclaimable`` in ticks, one tick
      either side allowed; F314 defect 3's monotonic stamps do this). A state task is released with its work only when the rule
      says so; the coordinator's reclaims are not traced, and in F314 they are the work's.
    - A *misattributed result* is one whose committed task is not the task stored at dispatch
      although the rank had that dispatch active (L7).
    - Completions are counted per work item: accepted ``DeliverResult`` steps plus completions a
      killed master made durable without tracing (seen in the next ``RestartMaster``'s
      ``recovered`` journal). Every item of ``works`` must have exactly one, and exactly one
      ``done`` record in ``journal_done`` when given.
    Measured besides: duplicate dispatches (a successful dispatch of a work item another rank
    is still running, i.e. has not answered in this job), dispatches concurrent on one state
    task, refused candidates, rejections, reclaims, recovered items (completed after losing a
    lease), late (after a reclaim), duplicated, reordered and wrong-ID results; and, where
    results present generations, *cross-generation* results (their generation no longer holds
    its work's lease: duplicated, late or reordered past a reclaim or a newer dispatch), refused
    or accepted (an accepted one is a wrong-owner commit too), and *superseded* ones among them
    (their work re-dispatched under a newer generation, to the same rank or another);
    re-dispatches of a work item to a rank still running it; accepted results the rank
    alone cannot attribute (two unanswered dispatches of that work on that rank, no
    generation presented); and results that crossed a master restart (their dispatch was
    running when it restarted, which only an in-job restart lets them survive), refused (as
    stale, or any commit refused) or not.
    """
    trace = events if isinstance(events, Trace) else parse_docs(events)
    ledger = _Ledger()
    for ev in trace.events:
        ledger.step(ev)
    return ledger.finish(works, journal_done)


def journal_done_records(path: Path) -> Counter[str]:
    """``done`` records per work ID in a journal file (a torn last line is skipped)."""
    done: Counter[str] = Counter()
    for record in json_objects(path.read_bytes().splitlines()):
        if record.get("event") == "done":
            done[str(record.get("work_id"))] += 1
    return done
