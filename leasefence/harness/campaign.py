"""Fault-injection campaigns on real MPI runs: the experiment F314 left open.

A campaign runs ``leasefence run`` under ``mpiexec`` for two builds, the F314 code and a pre-fix
build (a temporary copy of the sources with the four F314 mutants of ``leasefence.harness.mutants``
applied, imported first through ``PYTHONPATH``), with the same seed and the same fault schedule,
each on its own journal, snapshot, trace and event log. Faults:

- scheduled (``schedule``), each fired when a given fraction of the work items is completed:
  ``kill`` (SIGKILL of the master, rank 0; the job dies with it; a torn tail is left on the
  journal and the trace, as a crash in the middle of an append would; a new ``mpiexec`` on the
  same files restarts the master), ``reboot`` (the same, and the new master's monotonic clock
  counts from the moment of the reboot), ``pause`` (a worker SIGSTOPped past its TTL, then
  SIGCONTed), ``clock-forward`` / ``clock-back`` (the master's wall clock stepped through
  ``--clock-file``);
- for the whole run: delayed, duplicated and wrong-ID results (``--inject late,dup,wrong-id``;
  a held result overtaken by later ones is a reordering), concurrent candidates for the same
  work and state task (``--duplicate-candidates``, besides the workload's own variants of one
  state task), journal compaction (``--compact-every``); beyond depth 1 also ``restart``, the
  master restarted inside the running job every ``restart_every`` results (``--inject
  restart``, ``impl.transport.RestartFault``), its workers and their results in flight alive.

``check_history`` then reads each build's trace, journal and event log offline and replays the
trace through a lease ledger that follows F314's rules (who holds each work and state lease,
granted by ``DispatchWork``, released by an accepted result, by ``ReclaimExpired`` or by
``RestartMaster``), and through the model (``conformance.tracecheck.validate``).

Pipelined dispatch (issue 12): ``pipeline=N`` passes ``--pipeline N`` to every job, so a worker
rank holds up to N dispatches and, beyond 1, leases are fenced by ``(rank, generation)``. The
builds compared there are ``f314`` (generation fence, the run's default) and ``rank-fence``
(the same code with ``--fence rank``, unsafe by the model: ``leasefence model check --pipeline 2
--fence rank``); ``pre-fix`` runs at depth N only when asked. The ledger then holds whole owner
tokens and counts results across generations. The model's counterexample needs a result that
crosses a master restart: a kill or reboot starts a new MPI job whose old workers died with the
master, so only the in-job ``restart`` fault (on by default beyond depth 1) can reach it, and
``rank-fence`` stays a measurement, not a gate.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from leasefence.impl.rules import reclaimable

# (ROOT: the source checkout, from leasefence.paths)
#: The builds compared at depth 1 (``--pipeline 1``, the default).
BUILDS = ("f314", "pre-fix")
#: The builds compared beyond depth 1: the F314 code fenced by generation (its default there)
#: and the same code fenced by the rank alone (``--fence rank``), which the model says is unsafe.
PIPELINE_BUILDS = ("f314", "rank-fence")
#: Every build ``run_build`` knows.
ALL_BUILDS = ("f314", "pre-fix", "rank-fence")
#: Faults fired on the schedule, at a fraction of the work completed.
SCHEDULED = ("kill", "reboot", "pause", "clock-forward", "clock-back")
#: Faults injected throughout every job of a run.
RUN_FAULTS = ("late", "dup", "wrong-id", "duplicate-candidates", "compaction", "torn-tail")
INJECT = "late,dup,wrong-id"
#: The in-job master restart (``leasefence run --inject restart``), a run fault beyond depth 1.
IN_JOB_RESTART = "restart"
#: Results handled between in-job restarts, beyond depth 1, unless a campaign says otherwise.
RESTART_EVERY = 25


@dataclass(frozen=True)
class Fault:
    """One scheduled fault: fired once ``at`` (a fraction) of the work items are completed.
    ``rank`` is the worker paused, ``seconds`` the pause length or the clock step, ``torn`` the
    share of the last journal and trace lines left as a torn tail after a kill or reboot."""

    at: float
    kind: str
    rank: int | None = None
    seconds: float = 0.0
    torn: float = 0.0


@dataclass(frozen=True)
class CampaignConfig:
    """The options of one campaign (the ``leasefence campaign`` flags)."""

    seed: int = 0
    duration: float = 20.0
    ranks: int = 3
    faults: int = 10
    work: int | None = None  # default: from the duration
    ttl: float = 1.0
    inject_rate: float = 0.1
    duplicate_candidates: float = 0.1
    compact_every: int = 25
    worker: str = "z3"
    builds: tuple[str, ...] = BUILDS
    timeout: float = 150.0  # per build
    pipeline: int = 1  # dispatches a worker rank holds at once (``leasefence run --pipeline``)
    # In-job master restarts every K results (``leasefence run --inject restart
    # --restart-every K``); None: ``RESTART_EVERY`` beyond depth 1, none at depth 1; 0: none.
    restart_every: int | None = None

    @property
    def in_job_restart_every(self) -> int:
        """Results between in-job master restarts; 0 when the campaign has none."""
        if self.restart_every is not None:
            return self.restart_every
        return RESTART_EVERY if self.pipeline != 1 else 0

    def inject_args(self) -> list[str]:
        """The ``--inject`` flags of every job: the worker faults, plus the in-job restart when
        there is one (depth-1 command lines are unchanged)."""
        every = self.in_job_restart_every
        if not every:
            return ["--inject", INJECT]
        return ["--inject", f"{INJECT},{IN_JOB_RESTART}", "--restart-every", str(every)]

    @property
    def work_items(self) -> int:
        """Work items per build: given, or about 12 per second of ``duration`` (z3 queries of a
        few milliseconds each; the faults' own costs, restarts and pauses, come on top)."""
        return self.work if self.work is not None else max(30, round(12 * self.duration))


def default_builds(pipeline: int) -> tuple[str, ...]:
    """The builds a campaign compares by default: F314 beside the pre-fix build at depth 1;
    beyond, F314 fenced by generation beside F314 fenced by the rank alone (the pre-fix
    build's four defects do not depend on the depth; it runs at depth N only when asked)."""
    return BUILDS if pipeline == 1 else PIPELINE_BUILDS


def build_args(build: str, pipeline: int) -> list[str]:
    """The ``leasefence run`` flags that make ``build`` at ``pipeline`` depth: none at depth 1
    (today's command lines), ``--pipeline N`` beyond (the fence is then the generation, the
    run's default), and ``--fence rank`` for the ``rank-fence`` build."""
    if build not in ALL_BUILDS:
        raise ValueError(f"unknown build {build!r}; known: {', '.join(ALL_BUILDS)}")
    args = ["--pipeline", str(pipeline)] if pipeline != 1 else []
    return args + (["--fence", "rank"] if build == "rank-fence" else [])


def schedule(seed: int, faults: int, ranks: int, ttl: float) -> tuple[Fault, ...]:
    """The fault schedule: a pure function of its arguments. Every kind of ``SCHEDULED`` appears
    once ``faults >= 5`` (kinds in a seeded order, then round robin), at completed fractions
    spread over 0.05..0.9 in increasing order. A pause lasts 1.5 to 2.5 TTLs; a clock step is 2
    to 4 TTLs; forward and back steps alternate so the clock ends near where it started."""
    if faults < 0 or ranks < 2 or ttl <= 0:
        raise ValueError(f"need faults >= 0, ranks >= 2, ttl > 0; got {faults}, {ranks}, {ttl}")
    rng = random.Random(f"leasefence-campaign/{seed}")
    kinds = list(SCHEDULED)
    rng.shuffle(kinds)
    order = [kinds[i % len(kinds)] for i in range(faults)]
    # clock steps alternate in sign whatever order the kinds came in
    steps = iter(["clock-forward", "clock-back"] * faults)
    order = [next(steps) if k.startswith("clock") else k for k in order]
    lo, hi = 0.05, 0.9
    gap = (hi - lo) / max(faults, 1)
    out = []
    for i, kind in enumerate(order):
        at = round(lo + gap * i + rng.uniform(0.1, 0.9) * gap, 4)
        rank = rng.randrange(1, ranks) if kind == "pause" else None
        if kind == "pause":
            seconds = round(ttl * rng.uniform(1.5, 2.5), 3)
        elif kind.startswith("clock"):
            seconds = round(ttl * rng.uniform(2.0, 4.0), 3)
        else:
            seconds = 0.0
        torn = round(rng.uniform(0.2, 0.8), 3) if kind in ("kill", "reboot") else 0.0
        out.append(Fault(at, kind, rank, seconds, torn))
    return tuple(out)


# -- the offline history check ------------------------------------------------------------------


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


def _gen(value: object) -> Gen | None:
    """A trace's ``gen`` (or a recovered lease's generation) as a tuple; None when absent."""
    if not isinstance(value, list | tuple) or len(value) != 2:
        return None
    return (int(value[0]), int(value[1]))


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


def check_history(
    events: Sequence[Mapping[str, Any]],
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
      by F314's rule at that step's clock (``impl.rules.reclaimable``; F314 defect 3's
      monotonic stamps do this). A state task is released with its work only when the rule
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
    h = History()
    catalogue = set(works)
    task_of: dict[str, str] = {}
    ttl = 0.0
    pipeline = 1
    work: dict[str, _Lease] = {}
    state: dict[str, _Lease] = {}
    # rank -> its dispatches (work, generation), oldest first, as the master holds them
    active: dict[int, list[tuple[str, Gen | None]]] = {}
    running: dict[_Dispatch, int] = {}  # dispatch -> dispatch order, until answered
    answered: dict[int, int] = {}  # rank -> dispatch order of its latest answer
    last_order: dict[_Dispatch, int] = {}  # dispatch -> its dispatch order
    last_gen: dict[tuple[int, str], Gen | None] = {}  # (rank, work) -> its latest generation
    latest: dict[str, tuple[int, int]] = {}  # work -> (rank, order) of its latest dispatch
    unanswered: Counter[tuple[int, str]] = Counter()  # (rank, work) -> dispatches not answered
    answers: Counter[tuple[int, str, Gen | None, int]] = Counter()
    completions: Counter[str] = Counter()
    lost: set[str] = set()
    reclaimed_while_running: set[_Dispatch] = set()
    forgotten: set[tuple[int, str]] = set()  # (rank, work) running at the last restart
    order = 0
    last_now: float | None = None
    for ev in events:
        name = ev.get("event")
        if name == "Header":
            task_of.update({str(w): str(t) for w, t in ev.get("task_of", {}).items()})
            ttl = float(ev.get("ttl", ttl))
            pipeline = int(ev.get("pipeline", pipeline))
            h.pipeline, h.fence = pipeline, str(ev.get("fence", h.fence))
            continue
        now = float(ev.get("now", 0.0))
        if last_now is not None and now < last_now:
            h.rollbacks += 1
        last_now = now
        if name == "DispatchWork":
            w, r = str(ev["w"]), int(ev["r"])
            t = task_of.get(w, "")
            others = [x for (x, y, _) in running if y == w and x != r]
            same_task = [x for (x, y, _) in running if y != w and task_of.get(y) == t]
            if not ev.get("ok"):
                if others or same_task:
                    h.refused_candidates += 1
                continue
            g = _gen(ev.get("gen"))
            order += 1
            if others:
                h.duplicate_dispatches += 1
            if same_task:
                h.concurrent_state_dispatches += 1
            if any(x == r and y == w for (x, y, _) in running):
                h.same_rank_redispatches += 1
            for ledger, key, what in ((work, w, "work"), (state, t, "state task")):
                held = ledger.get(key)
                if held is None:
                    ledger[key] = _Lease(r, now, gen=g, work=w)
                    continue
                held.intruders.add(r)
                if what == "work":
                    h.double_grants_work += 1
                else:
                    h.double_grants_state += 1
                h.note(f"{what} {key[:12]} granted to rank {r} while rank {held.owner} held it")
            mine = active.setdefault(r, [])
            mine.append((w, g))
            del mine[:-pipeline]  # a rank holds at most `pipeline` (at depth 1: the last one)
            h.deepest = max(h.deepest, len(mine))
            running[r, w, g] = last_order[r, w, g] = order
            last_gen[r, w] = g
            latest[w] = (r, order)
            unanswered[r, w] += 1
        elif name == "DeliverResult":
            r, w = int(ev["r"]), str(ev["w"])
            presented = _gen(ev.get("gen"))
            mine = active.get(r, [])
            if presented is not None:
                found = next((d for d in mine if d[1] == presented), None)
                g = presented
            else:
                found = next((d for d in mine if d[0] == w), None)
                g = found[1] if found is not None else last_gen.get((r, w))
            disp = (r, w, g)
            accepted = not ev.get("stale") and bool(ev.get("work_ok"))
            if found is None and (r, w) in forgotten:
                h.restart_crossing_results += 1
                committed = ev.get("state_ok") or ev.get("task") is None
                h.restart_crossing_refused += not (accepted and committed)
            tag = last_order.get(disp)
            holder = work.get(w)
            if presented is not None and (
                holder is None or not holder.owned_by(r, presented, w, pipeline)
            ):
                # its generation no longer holds the work lease: a duplicate of an answered
                # result, or late or reordered past a reclaim or a newer dispatch
                h.cross_generation_results += 1
                if accepted:
                    h.cross_generation_accepted += 1
                    h.note(
                        f"work {w[:12]}: result of rank {r} gen {list(presented)} accepted, "
                        f"owner {holder and holder.token(pipeline)}"
                    )
                else:
                    h.cross_generation_refused += 1
                newest = latest.get(w)
                if tag is not None and newest is not None and newest[1] > tag:
                    h.superseded_results += 1
                    h.superseded_same_rank += newest[0] == r
            if presented is None and accepted and unanswered[r, w] > 1:
                h.ambiguous_commits += 1
            if unanswered[r, w] > 0:
                unanswered[r, w] -= 1
            if tag is not None:
                answers[(*disp, tag)] += 1
                if answers[(*disp, tag)] > 1:
                    h.duplicated_results += 1
                if answered.get(r, 0) > tag:
                    h.reordered_results += 1
                answered[r] = max(answered.get(r, 0), tag)
            if running.pop(disp, None) is not None and disp in reclaimed_while_running:
                h.late_results += 1
            reclaimed_while_running.discard(disp)
            if ev.get("stale"):
                h.stale_results += 1
                continue
            stored = None
            if found is not None and found[0] == w:
                mine.remove(found)
                stored = w
                if not mine:
                    del active[r]
            reported = ev.get("reported")
            if reported is not None and reported != task_of.get(w):
                h.wrong_id_reports += 1
            task = ev.get("task")
            if stored is not None and task is not None and task != task_of.get(w):
                h.misattributed_results += 1
                h.note(f"result of {w[:12]} from rank {r} committed to task {str(task)[:12]}")
            if not ev.get("work_ok"):
                h.wrong_owner_rejections += 1
                continue
            if ev.get("ok"):
                completions[w] += 1
                if completions[w] > 1:
                    h.note(f"work {w[:12]} completed again by rank {r}")
            who = f"rank {r}" + (f" gen {list(g)}" if g else "")
            held = work.pop(w, None)
            if held is None or not held.owned_by(r, g, w, pipeline):
                h.wrong_owner_commits += 1
                h.note(f"work {w[:12]} committed by {who}, owner {held and held.token(pipeline)}")
            if task is not None:
                if ev.get("state_ok"):
                    held_s = state.pop(str(task), None)
                    if held_s is None or not held_s.owned_by(r, g, w, pipeline):
                        h.wrong_owner_commits += 1
                        h.note(
                            f"state task {str(task)[:12]} committed by {who}"
                            + (f" for work {w[:12]}" if pipeline > 1 and g is None else "")
                            + f", owner {held_s and held_s.token(pipeline)}"
                        )
                else:
                    h.wrong_owner_rejections += 1
        elif name == "ReclaimExpired":
            for w in map(str, ev.get("reclaimed", [])):
                h.reclaimed_leases += 1
                lost.add(w)
                held = work.pop(w, None)
                if held is not None and not reclaimable(held.since, held.clock, now, ttl):
                    h.premature_reclaims += 1
                    h.note(f"work {w[:12]} reclaimed {now - held.since:.3f} s after its lease")
                t = task_of.get(w, "")
                held_s = state.get(t)
                if held_s is not None and reclaimable(held_s.since, "unix", now, ttl):
                    del state[t]
                for r in list(active):
                    active[r] = [d for d in active[r] if d[0] != w]
                    if not active[r]:
                        del active[r]
                for busy in running:
                    if busy[1] == w:
                        reclaimed_while_running.add(busy)
        elif name == "RestartMaster":
            h.restarts += 1
            disk = ev.get("recovered", {}).get("journal", {})
            for w in map(str, disk.get("completed", [])):
                if completions[w] == 0:
                    completions[w] += 1  # made durable by the killed master, not traced
            lost |= {w for (_, w, _) in running}
            forgotten = {(r, w) for (r, w, _) in running}
            work = {}
            for w, (owner, updated, clock, *generation) in disk.get("leases", {}).items():
                if reclaimable(float(updated), clock, now, ttl):
                    h.reclaimed_leases += 1
                    lost.add(str(w))
                else:
                    g = _gen(generation[0]) if generation else None
                    work[str(w)] = _Lease(int(owner), float(updated), clock, gen=g, work=str(w))
            state, active, running, answered, last_order = {}, {}, {}, {}, {}
            last_gen, latest, unanswered = {}, {}, Counter()
            reclaimed_while_running = set()
    h.duplicate_completions = sum(n - 1 for n in completions.values() if n > 1)
    h.missing_items = sum(1 for w in catalogue if completions[w] == 0)
    h.recovered_items = sum(1 for w in lost if completions[w] > 0)
    h.exactly_once = all(completions[w] == 1 for w in catalogue)
    if journal_done is not None:
        h.journal_duplicate_completions = sum(n - 1 for n in journal_done.values() if n > 1)
        if {w for w, n in journal_done.items() if n > 0} != catalogue:
            h.exactly_once = False
    return h


def journal_done_records(path: Path) -> Counter[str]:
    """``done`` records per work ID in a journal file (a torn last line is skipped)."""
    done: Counter[str] = Counter()
    for line in path.read_bytes().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("event") == "done":
            done[str(record.get("work_id"))] += 1
    return done


def read_ndjson(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON object line of ``path`` (torn lines are skipped)."""
    out: list[dict[str, Any]] = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out


# -- running one build ----------------------------------------------------------------------------


@dataclass
class FiredFault:
    """A fault as it was fired: real seconds since the build's start, kind and detail."""

    t: float
    kind: str
    detail: str = ""


@dataclass
class BuildRun:
    """Everything measured for one build."""

    build: str
    work: int
    seconds: float = 0.0
    jobs: int = 0
    finished: bool = False
    fired: list[FiredFault] = field(default_factory=list)
    fault_counts: dict[str, int] = field(default_factory=dict)
    unexpected_exits: list[str] = field(default_factory=list)
    recovery_latencies: list[float] = field(default_factory=list)
    solver_cpu_s: float = 0.0
    wasted_cpu_s: float = 0.0
    coverage: list[tuple[float, int]] = field(default_factory=list)
    targets: int = 0
    history: History = field(default_factory=History)

    def latency(self, q: float) -> float | None:
        return percentile(self.recovery_latencies, q)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (nearest rank) of ``values``, or None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def _bin(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def _descendants(root: int) -> list[int]:
    """PIDs of every process below ``root`` (Linux ``/proc``)."""
    parent: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parent.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rank_pids(mpiexec_pid: int) -> dict[int, int]:
    """MPI rank -> PID of the job started by ``mpiexec_pid`` (from each process's PMI_RANK)."""
    ranks = {}
    for pid in _descendants(mpiexec_pid):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"PMI_RANK="):
                ranks[int(item[9:])] = pid
    return ranks


def _signal(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def tear(path: Path, share: float) -> int:
    """Append the first ``share`` of ``path``'s last line, without its newline: the torn tail a
    crash in the middle of an append leaves. Returns the bytes appended."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    if not lines or not lines[-1].endswith(b"\n"):
        return 0
    piece = lines[-1][: max(1, min(len(lines[-1]) - 2, int(len(lines[-1]) * share)))]
    with path.open("ab") as fh:
        fh.write(piece)
    return len(piece)


@contextmanager
def build_tree(build: str) -> Iterator[dict[str, str]]:
    """The environment that runs ``build``: the F314 sources as installed (``f314`` and
    ``rank-fence``, which differ only in their flags), or for ``pre-fix`` a temporary copy with
    F314's four defects applied (``leasefence.harness.mutants.F314_MUTANTS``) first on PYTHONPATH."""
    env = dict(os.environ)
    if build != "pre-fix":
        yield env
        return
    from leasefence.harness.mutants.catalogue import F314_MUTANTS
    from leasefence.harness.mutants.gate import apply, copy_tree

    with tempfile.TemporaryDirectory(prefix="leasefence-prefix-") as tmp:
        copy_tree(Path(tmp))
        for mutant in F314_MUTANTS:
            apply_intended(mutant, Path(tmp), apply)
        env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
        yield env


def apply_intended(mutant: Any, tree: Path, apply: Callable[[Any, Path], None]) -> None:
    """Apply a catalogue mutant so that its file still compiles.

    A patch that deletes whole lines but starts after their indentation (as
    ``f314-2-state-lease-overwrite`` does) leaves that indentation in front of the next line:
    an ``IndentationError``, which would make the pre-fix build crash at import instead of
    running the defect. Such a patch is applied again with the indentation of its first line
    included in the text replaced, which is the edit the catalogue means.
    """
    target = tree / mutant.path
    original = target.read_text()
    apply(mutant, tree)
    try:
        compile(target.read_text(), str(target), "exec")
        return
    except SyntaxError:
        target.write_text(original)
    patches = []
    for old, new in mutant.patches:
        at = original.index(old)
        indent = original[original.rfind("\n", 0, at) + 1 : at]
        if indent.strip() or (new and not new.endswith("\n")):
            patches.append((old, new))
        else:
            patches.append((indent + old, indent + new if new else ""))
    fixed = type(mutant)(mutant.name, mutant.path, tuple(patches), mutant.breaks)
    apply(fixed, tree)
    compile(target.read_text(), str(target), "exec")


Progress = Callable[[str], None]


def run_build(
    build: str,
    config: CampaignConfig,
    faults: Sequence[Fault],
    workdir: Path,
    progress: Progress = lambda line: None,
) -> BuildRun:
    """Run ``build`` to the end under the fault schedule, then check its history."""
    workdir.mkdir(parents=True, exist_ok=True)
    journal, snapshot = workdir / "journal.jsonl", workdir / "snapshot.json"
    trace, events, clock = (
        workdir / "trace.ndjson",
        workdir / "events.ndjson",
        workdir / "clock.json",
    )
    for stale in workdir.iterdir():
        if stale.is_file():
            stale.unlink()
    clock_doc: dict[str, float] = {"wall_offset": 0.0, "mono_origin": 0.0}
    clock.write_text(json.dumps(clock_doc))
    n = config.work_items
    run = BuildRun(build, n)
    cmd = [
        _bin("mpiexec"),
        "-n",
        str(config.ranks),
        _bin("leasefence"),
        "run",
        "--work",
        str(n),
        "--seed",
        str(config.seed),
        "--ttl",
        str(config.ttl),
        "--worker",
        config.worker,
        "--journal",
        str(journal),
        "--snapshot",
        str(snapshot),
        "--trace",
        str(trace),
        "--events",
        str(events),
        "--clock-file",
        str(clock),
        *config.inject_args(),
        "--inject-rate",
        str(config.inject_rate),
        "--duplicate-candidates",
        str(config.duplicate_candidates),
        "--compact-every",
        str(config.compact_every),
        *build_args(build, config.pipeline),
    ]
    todo = list(faults)
    counts: Counter[str] = Counter()
    start = time.time()
    offset = 0
    completed = 0
    last_line = 0.0
    with build_tree(build) as env:
        while not run.finished:
            if time.time() - start > config.timeout:
                run.unexpected_exits.append(f"timeout after {config.timeout:g} s")
                break
            if run.jobs > len(faults) + 3:
                run.unexpected_exits.append("too many jobs")
                break
            launched = time.time()
            run.jobs += 1
            log = (workdir / f"job{run.jobs}.log").open("w")
            proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=workdir)
            up = False
            first_dispatch = run.jobs == 1
            paused: tuple[int, float] | None = None
            killed = False
            try:
                while proc.poll() is None:
                    new, offset = _tail(events, offset)
                    for ev in new:
                        if ev.get("kind") == "start":
                            up = True
                        elif ev.get("kind") == "dispatch" and not first_dispatch:
                            first_dispatch = True
                            run.recovery_latencies.append(float(ev["t"]) - launched)
                        elif ev.get("kind") == "result" and ev.get("work_ok") and ev.get("ok"):
                            completed += 1
                        elif ev.get("kind") == "end":
                            run.finished = True
                    now = time.time()
                    if paused is not None and now >= paused[1]:
                        _signal(paused[0], signal.SIGCONT)
                        paused = None
                    if paused is None and up and todo and completed >= todo[0].at * n:
                        fault = todo.pop(0)
                        pids = rank_pids(proc.pid)
                        detail = _fire(fault, pids, clock, clock_doc)
                        if detail is None:
                            todo.insert(0, fault)  # its process is not there yet
                        else:
                            counts[fault.kind] += 1
                            run.fired.append(FiredFault(round(now - start, 3), fault.kind, detail))
                            progress(f"  [{build} {now - start:6.1f} s] {fault.kind}: {detail}")
                            if fault.kind == "pause":
                                paused = (pids[fault.rank or 1], now + fault.seconds)
                            if fault.kind in ("kill", "reboot"):
                                killed = True
                                _wait_or_kill(proc, 20.0)
                                for path in (journal, trace):
                                    if tear(path, fault.torn):
                                        counts["torn-tail"] += 1
                                break
                    if now - last_line >= 2.0:
                        last_line = now
                        progress(
                            f"  [{build} {now - start:6.1f} s] {completed}/{n} completed, "
                            f"job {run.jobs}, {sum(counts[k] for k in SCHEDULED)}/"
                            f"{len(faults)} faults fired"
                        )
                    time.sleep(0.05)
            finally:
                if paused is not None:
                    _signal(paused[0], signal.SIGCONT)
                _wait_or_kill(proc, 60.0)
                log.close()
            new, offset = _tail(events, offset)
            run.finished |= any(ev.get("kind") == "end" for ev in new)
            if not killed and not run.finished:
                tail = (workdir / f"job{run.jobs}.log").read_text()[-400:]
                run.unexpected_exits.append(f"job {run.jobs} exit {proc.returncode}: {tail}")
    run.seconds = time.time() - start
    _measure(run, events, start)
    logged = read_ndjson(events)
    counts["compaction"] = sum(1 for e in logged if e.get("kind") == "compact")
    counts[IN_JOB_RESTART] = sum(1 for e in logged if e.get("kind") == "restart")
    run.fault_counts = dict(counts)
    run.history = _check(workdir, n, config.seed)
    h = run.history
    run.fault_counts.update(
        {
            "late": h.late_results,
            "dup": h.duplicated_results,
            "reorder": h.reordered_results,
            "wrong-id": h.wrong_id_reports,
            "duplicate-candidates": h.refused_candidates + h.duplicate_dispatches,
        }
    )
    return run


def _tail(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The whole lines added to ``path`` since byte ``offset``, and the new offset."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    out = []
    for line in data[:end].splitlines():
        try:
            doc = json.loads(line)
        except ValueError:
            continue
        if isinstance(doc, dict):
            out.append(doc)
    return out, offset + end


def _fire(
    fault: Fault, pids: Mapping[int, int], clock: Path, clock_doc: dict[str, float]
) -> str | None:
    if fault.kind in ("kill", "reboot"):
        if 0 not in pids:
            return None
        if fault.kind == "reboot":
            clock_doc["mono_origin"] = time.monotonic()
            clock.write_text(json.dumps(clock_doc))
        _signal(pids[0], signal.SIGKILL)
        return f"SIGKILL master (pid {pids[0]}), torn tail {fault.torn:.0%} of a line"
    if fault.kind == "pause":
        rank = fault.rank or 1
        if rank not in pids:
            return None
        _signal(pids[rank], signal.SIGSTOP)
        return f"SIGSTOP rank {rank} for {fault.seconds:.2f} s, then SIGCONT"
    sign = 1.0 if fault.kind == "clock-forward" else -1.0
    clock_doc["wall_offset"] = clock_doc.get("wall_offset", 0.0) + sign * fault.seconds
    tmp = clock.with_suffix(".tmp")
    tmp.write_text(json.dumps(clock_doc))
    tmp.replace(clock)
    return f"wall clock {sign * fault.seconds:+.2f} s (offset {clock_doc['wall_offset']:+.2f} s)"


def _wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for the job; past ``timeout`` SIGKILL its processes one by one, by PID."""
    try:
        proc.wait(timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    for pid in reversed(_descendants(proc.pid)):
        _signal(pid, signal.SIGKILL)
    _signal(proc.pid, signal.SIGKILL)
    proc.wait()


def _measure(run: BuildRun, events: Path, start: float) -> None:
    """Solver CPU (each execution once; a duplicated message is not a second execution), CPU
    wasted on executions whose result was refused, and the coverage curve."""
    execs: dict[tuple[int, str, float], bool] = {}
    job = 0
    seen: set[str] = set()
    for ev in read_ndjson(events):
        kind = ev.get("kind")
        if kind == "start":
            job += 1
        elif kind == "result":
            key = (job, str(ev.get("w")), float(ev.get("cpu_s", 0.0)))
            accepted = not ev.get("stale") and bool(ev.get("work_ok"))
            execs[key] = execs.get(key, False) or accepted
            target = ev.get("reached")
            if target and target not in seen:
                seen.add(str(target))
                run.coverage.append((round(float(ev["t"]) - start, 3), len(seen)))
    run.solver_cpu_s = sum(k[2] for k in execs)
    run.wasted_cpu_s = sum(k[2] for k, ok in execs.items() if not ok)
    run.targets = len(seen)


def _check(workdir: Path, work: int, seed: int) -> History:
    from leasefence.conformance.tracecheck import TraceFormatError, validate
    from leasefence.impl.workload import generate

    trace = workdir / "trace.ndjson"
    journal = workdir / "journal.jsonl"
    ids = [i.work_id for i in generate(work, seed)]
    done = journal_done_records(journal) if journal.exists() else Counter()
    h = check_history(read_ndjson(trace), ids, journal_done=done)
    try:
        lines = trace.read_text().splitlines(keepends=True)
        report = validate(lines)
        h.trace_valid, h.trace_divergence = report.ok, report.divergence
        h.trace_steps, h.lost_steps = report.steps, report.lost_steps
        if report.line is not None:
            h.trace_divergence = f"line {report.line}: {report.divergence}"
        h.segments_valid, h.segment_divergences = _validate_segments(lines)
        if not report.ok:
            h.interrupted_rejections = interrupted_rejections(lines)
    except (OSError, TraceFormatError) as exc:
        h.trace_valid, h.trace_divergence = False, str(exc)
    return h


def _validate_segments(lines: Sequence[str]) -> tuple[bool, list[str]]:
    """Validate each job's part of a trace on its own (a part after a restart starts on the
    files as the restarted master read them). True when every part is a behaviour of the model."""
    from leasefence.conformance.tracecheck import validate

    starts = [i for i, line in enumerate(lines) if line.startswith('{"event":"Header"')]
    problems = []
    for k, at in enumerate(starts):
        part = lines[at : starts[k + 1] if k + 1 < len(starts) else len(lines)]
        report = validate(part)
        if not report.ok:
            problems.append(f"job {k + 1}, line {at + (report.line or 0)}: {report.divergence}")
    return not problems, problems


def interrupted_rejections(lines: Sequence[str]) -> list[str]:
    """Restarts whose disk state differs from the model's only by journal leases that a
    rejected dispatch had taken and not yet given back when the master was killed.

    ``Master.dispatch`` leases the work in the journal (durably) before the coordinator may
    refuse the state lease, and only then undoes the work lease; the model's ``DispatchWork``
    with its ``RejectDispatch`` is one atomic step. A SIGKILL between the two fsyncs leaves a
    lease (one more attempt) that no model step explains. Fencing still holds: the lease's
    owner is a rank of the dead job, and recovery reclaims it after one TTL.
    """
    from leasefence.conformance import tracecheck as tc
    from leasefence.conformance.refinement import GenerationNames
    from leasefence.model.system import initial_state

    events, _ = tc.parse(lines)
    found: list[str] = []
    if not events:
        return found
    b = tc.bounds_from_header(events[0][1])
    s = initial_state()
    names = GenerationNames()
    last_refused: dict[tuple[str, int], str] = {}
    body = events[1:]
    for lineno, ev in body:
        name = ev["event"]
        if name == "Header":
            continue
        now = tc._tick(float(ev["now"]))
        since = s.wall  # the last traced step: a lost step ran between it and a restart
        s = s._replace(wall=now, mono=now)
        if name == "RestartMaster" and isinstance(ev.get("recovered"), dict):
            disk = tc._journal_of(ev["recovered"].get("journal", {}), copy.deepcopy(names))
            extra = {w for w, _ in disk.leases} - {w for w, _ in s.journal.leases}
            stray = [
                (w, x.owner)
                for w, x in disk.leases
                if w in extra and last_refused.get((w, x.owner)) not in (None, "lease_work")
            ]
            if extra and len(stray) == len(extra):
                found.append(
                    f"line {lineno}: lease of {', '.join(w[:12] for w, _ in stray)} by rank "
                    f"{', '.join(str(r) for _, r in stray)} left by a dispatch rejected at "
                    f"{', '.join(sorted({last_refused[k] for k in stray}))} and killed before "
                    "its undo"
                )
                kept = {w for w, _ in s.journal.leases}
                s = s._replace(
                    journal=disk._replace(
                        leases=tuple((w, x) for w, x in disk.leases if w in kept),
                        attempts=s.journal.attempts,
                    )
                )
            last_refused = {}
            problem, s, _, names = tc._resync(s, ev["recovered"], b, names, since)
            if problem is not None:
                return [*found, f"UNEXPLAINED line {lineno}: {problem[:300]}"]
        if name == "DispatchWork" and not ev.get("ok"):
            last_refused[str(ev["w"]), int(ev["r"])] = str(ev.get("refused"))
        problem, s = tc._apply(s, name, ev, lineno, b, names)
        if problem is not None:
            return [*found, f"UNEXPLAINED line {lineno}: {problem[:300]}"]
    return found


# -- the campaign, its table, JSON and plot -----------------------------------------------------


@dataclass
class CampaignResult:
    config: CampaignConfig
    faults: tuple[Fault, ...]
    runs: dict[str, BuildRun]
    seconds: float = 0.0
    window: float = 0.0
    targets: int = 0

    def auc(self, build: str) -> float:
        """Area under the coverage curve (targets reached over real time) over the common
        window, divided by the window times the targets either build reached: 1.0 would be
        every target at once."""
        return coverage_auc(self.runs[build].coverage, self.window, self.targets)

    def f314_ok(self) -> bool:
        """F314's invariants held, every item completed once, and every fault was injected;
        beyond depth 1 also results across generations (duplicated, late or reordered past
        their generation's lease) arrived, each refused."""
        run = self.runs.get("f314")
        crossed = self.config.pipeline == 1 or (
            run is not None
            and run.history.cross_generation_results > 0
            and run.history.cross_generation_accepted == 0
        )
        return (
            run is not None
            and run.finished
            and run.history.ok
            and crossed
            and all(run.fault_counts.get(k, 0) > 0 for k in self.expected_faults())
        )

    def expected_faults(self) -> list[str]:
        kinds = sorted({f.kind for f in self.faults})
        extra = ["late", "dup", "reorder", "wrong-id", "duplicate-candidates", "compaction"]
        if any(k in ("kill", "reboot") for k in kinds):
            extra.append("torn-tail")
        if self.config.in_job_restart_every:
            extra.append(IN_JOB_RESTART)
        return kinds + extra

    def prefix_damaged(self) -> bool:
        run = self.runs.get("pre-fix")
        return run is not None and run.history.damage

    def rank_fence_damaged(self) -> bool:
        """The rank-fenced build shows duplicates or wrong-owner commits, or its trace breaks
        an invariant (tracecheck: a step the model allows that breaks L2, say)."""
        run = self.runs.get("rank-fence")
        return run is not None and (run.history.damage or run.history.trace_breaks is not None)


def coverage_auc(curve: Sequence[tuple[float, int]], window: float, targets: int) -> float:
    """Normalised area under a step curve of (seconds, targets reached) over [0, window]."""
    if window <= 0 or targets <= 0:
        return 0.0
    area, last_t, last_v = 0.0, 0.0, 0
    for t, v in curve:
        t = min(max(t, 0.0), window)
        area += (t - last_t) * last_v
        last_t, last_v = t, v
    area += (window - last_t) * last_v
    return area / (window * targets)


def run_campaign(
    config: CampaignConfig, workdir: Path, progress: Progress = lambda line: None
) -> CampaignResult:
    """Both builds, one after the other, on the same seed and schedule."""
    faults = schedule(config.seed, config.faults, config.ranks, config.ttl)
    start = time.time()
    runs = {}
    for build in config.builds:
        progress(
            f"[campaign] {build}: {config.work_items} items, {config.ranks} ranks, ttl "
            f"{config.ttl:g} s, {len(faults)} scheduled faults, seed {config.seed}"
            + (f", pipeline {config.pipeline}" if config.pipeline != 1 else "")
        )
        runs[build] = run_build(build, config, faults, workdir / build, progress)
        r = runs[build]
        progress(
            f"[campaign] {build}: {'finished' if r.finished else 'NOT finished'} in "
            f"{r.seconds:.1f} s, {r.jobs} jobs; history "
            f"{'OK' if r.history.ok else 'VIOLATED'}"
        )
    result = CampaignResult(config, faults, runs, time.time() - start)
    result.window = max((r.seconds for r in runs.values()), default=0.0)
    result.targets = max((r.targets for r in runs.values()), default=0)
    return result


def _fmt(x: float | None, unit: str = "") -> str:
    return "-" if x is None else f"{x:.2f}{unit}"


def table_rows(res: CampaignResult) -> list[tuple[str, list[str]]]:
    """(metric, one cell per build) for the terminal and the JSON."""
    builds = list(res.runs)

    def cells(fn: Callable[[BuildRun], object]) -> list[str]:
        return [str(fn(res.runs[b])) for b in builds]

    def yes(flag: bool) -> str:
        return "yes" if flag else "NO"

    rows: list[tuple[str, list[str]]] = [
        ("work items completed exactly once", cells(lambda r: yes(r.history.exactly_once))),
        ("duplicate completions", cells(lambda r: r.history.duplicate_completions)),
        ("wrong-owner commits", cells(lambda r: r.history.wrong_owner_commits)),
        (
            "double grants (work / state, L1)",
            cells(lambda r: f"{r.history.double_grants_work} / {r.history.double_grants_state}"),
        ),
        ("premature reclaims", cells(lambda r: r.history.premature_reclaims)),
        ("misattributed results (L7)", cells(lambda r: r.history.misattributed_results)),
        ("trace valid against the model", cells(_trace_cell)),
        ("duplicate dispatches", cells(lambda r: r.history.duplicate_dispatches)),
        (
            "concurrent dispatches, one state task",
            cells(lambda r: r.history.concurrent_state_dispatches),
        ),
        ("refused concurrent candidates", cells(lambda r: r.history.refused_candidates)),
        ("wrong-owner rejections", cells(lambda r: r.history.wrong_owner_rejections)),
        ("stale results refused", cells(lambda r: r.history.stale_results)),
        *(_pipeline_rows(res, cells) if res.config.pipeline != 1 else []),
        ("reclaimed leases", cells(lambda r: r.history.reclaimed_leases)),
        ("recovered work items", cells(lambda r: r.history.recovered_items)),
        (
            "recovery latency p50 / p95",
            cells(lambda r: f"{_fmt(r.latency(50), ' s')} / {_fmt(r.latency(95), ' s')}"),
        ),
        ("solver CPU total", cells(lambda r: f"{r.solver_cpu_s:.2f} s")),
        ("solver CPU wasted on duplicates", cells(lambda r: f"{r.wasted_cpu_s:.2f} s")),
        ("targets reached", cells(lambda r: r.targets)),
        ("coverage AUC", [f"{res.auc(b):.3f}" for b in builds]),
        ("wall time", cells(lambda r: f"{r.seconds:.1f} s ({r.jobs} jobs)")),
    ]
    for kind in res.expected_faults():
        rows.append(
            (f"fault: {kind}", [str(res.runs[b].fault_counts.get(kind, 0)) for b in builds])
        )
    rows.append(("clock rollbacks seen in the trace", cells(lambda r: r.history.rollbacks)))
    return rows


def _pipeline_rows(
    res: CampaignResult, cells: Callable[[Callable[[BuildRun], object]], list[str]]
) -> list[tuple[str, list[str]]]:
    """The rows beyond depth 1: results across generations (only a trace whose results present
    generations can tell them apart; a rank-fenced one shows "-"), re-dispatches to a rank
    still running that work, and accepted results the rank alone cannot attribute."""

    def gen(fn: Callable[[History], object]) -> Callable[[BuildRun], object]:
        return lambda r: fn(r.history) if r.history.fence == "generation" else "-"

    return [
        (
            "pipeline depth (deepest reached) / fence",
            cells(lambda r: f"{r.history.pipeline} ({r.history.deepest}) / {r.history.fence}"),
        ),
        (
            "cross-generation results refused / accepted",
            cells(gen(lambda h: f"{h.cross_generation_refused} / {h.cross_generation_accepted}")),
        ),
        (
            "of them superseded by a newer dispatch (same rank)",
            cells(gen(lambda h: f"{h.superseded_results} ({h.superseded_same_rank})")),
        ),
        (
            "re-dispatches to a rank still running that work",
            cells(lambda r: r.history.same_rank_redispatches),
        ),
        (
            "accepted results the rank alone cannot attribute",
            cells(lambda r: r.history.ambiguous_commits),
        ),
        (
            "results across an in-job restart (refused)",
            cells(
                lambda r: (
                    f"{r.history.restart_crossing_results} ({r.history.restart_crossing_refused})"
                )
            ),
        ),
    ]


def _trace_cell(r: BuildRun) -> str:
    h = r.history
    if h.trace_valid:
        return "yes"
    if h.trace_breaks is not None:
        return f"NO (breaks {h.trace_breaks})"
    if h.trace_ok:
        n = len(h.interrupted_rejections)
        return f"per job; {n} restart(s) after a kill mid-rejection"
    return "NO (diverges)"


def format_table(res: CampaignResult) -> str:
    head = ["metric", *res.runs]
    body = [[name, *vals] for name, vals in table_rows(res)]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    fmt = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    lines = [fmt.format(*head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt.format(*row) for row in body]
    return "\n".join(lines)


def to_json(res: CampaignResult) -> dict[str, Any]:
    return {
        "config": asdict(res.config) | {"work_items": res.config.work_items},
        "schedule": [asdict(f) for f in res.faults],
        "seconds": round(res.seconds, 2),
        "coverage_window_s": round(res.window, 3),
        "coverage_targets": res.targets,
        "f314_ok": res.f314_ok(),
        "prefix_damaged": res.prefix_damaged(),
        **({"rank_fence_damaged": res.rank_fence_damaged()} if "rank-fence" in res.runs else {}),
        "table": {name: dict(zip(res.runs, vals, strict=True)) for name, vals in table_rows(res)},
        "builds": {
            b: {
                "finished": r.finished,
                "seconds": round(r.seconds, 2),
                "jobs": r.jobs,
                "work_items": r.work,
                "history": asdict(r.history) | {"ok": r.history.ok, "damage": r.history.damage},
                "faults_fired": [asdict(f) for f in r.fired],
                "fault_counts": r.fault_counts,
                "unexpected_exits": r.unexpected_exits,
                "recovery_latencies_s": [round(x, 3) for x in r.recovery_latencies],
                "recovery_latency_p50_s": r.latency(50),
                "recovery_latency_p95_s": r.latency(95),
                "solver_cpu_s": round(r.solver_cpu_s, 4),
                "wasted_cpu_s": round(r.wasted_cpu_s, 4),
                "targets": r.targets,
                "coverage_auc": round(res.auc(b), 4),
                "coverage": r.coverage,
            }
            for b, r in res.runs.items()
        },
    }


def plot(res: CampaignResult, path: Path) -> None:
    """Coverage over time for each build, with the times its faults fired marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"f314": "tab:blue", "pre-fix": "tab:red", "rank-fence": "tab:orange"}
    marks = {
        "kill": "x",
        "reboot": "X",
        "pause": "s",
        "clock-forward": "^",
        "clock-back": "v",
    }
    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    for build, run in res.runs.items():
        c = colours.get(build, "tab:gray")
        xs = [0.0, *[t for t, _ in run.coverage], run.seconds]
        ys = [0, *[v for _, v in run.coverage], run.targets]
        ax.step(xs, ys, where="post", color=c, label=f"{build} (AUC {res.auc(build):.3f})")
        for i, f in enumerate(run.fired):
            ax.axvline(f.t, color=c, alpha=0.25, lw=1)
            ax.plot(
                f.t,
                (0.03 + 0.04 * (build != "f314")) * max(res.targets, 1),
                marks.get(f.kind, "o"),
                color=c,
                label=f.kind
                if build == next(iter(res.runs)) and i == _first(run, f.kind)
                else None,
            )
    ax.set_xlabel("seconds since the build's campaign started (real time)")
    ax.set_ylabel("distinct targets reached")
    ax.set_title(
        f"leasefence campaign, seed {res.config.seed}: coverage over time "
        f"({res.config.work_items} z3 items, {res.config.ranks} ranks, ttl {res.config.ttl:g} s"
        + (f", pipeline {res.config.pipeline})" if res.config.pipeline != 1 else ")")
    )
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _first(run: BuildRun, kind: str) -> int:
    return next(i for i, f in enumerate(run.fired) if f.kind == kind)


def layer_campaign(deep: bool) -> list[Any]:
    """The ``verify`` layer: a short campaign (a longer one with ``--deep``); one row per build.
    F314 passes when its history holds with every fault injected; the pre-fix build passes when
    its history shows the damage. Then F314 again at pipeline depth 2 (issue 12): it passes when
    its history holds and every cross-generation result was refused (the rank-fenced build is a
    measurement, not a gate: ``leasefence campaign --pipeline 2`` runs it)."""
    from leasefence.report import Row

    config = (
        CampaignConfig(faults=10, duration=20.0)
        if deep
        else CampaignConfig(faults=5, work=60, timeout=90.0)
    )
    depth2 = replace(config, pipeline=2, builds=("f314",))
    rows: list[Row] = []
    for cfg in (config, depth2):
        with tempfile.TemporaryDirectory(prefix="leasefence-verify-campaign-") as tmp:
            rows += _campaign_rows(run_campaign(cfg, Path(tmp)))
    return rows


def _campaign_rows(res: CampaignResult) -> list[Any]:
    from leasefence.report import FAIL, PASS, Row

    config = res.config
    depth = f", pipeline {config.pipeline}" if config.pipeline != 1 else ""
    rows = []
    for build, run in res.runs.items():
        h = run.history
        good = res.f314_ok() if build == "f314" else h.damage
        figures = (
            f"{h.duplicate_completions} dup completions, {h.wrong_owner_commits} wrong-owner "
            f"commits, {h.double_grants_work + h.double_grants_state} double grants, "
            f"{'all' if h.exactly_once else 'NOT all'} items once, "
            f"{sum(run.fault_counts.get(k, 0) for k in SCHEDULED)} faults"
        )
        if config.pipeline != 1:
            figures += (
                f", {h.cross_generation_results} cross-generation results "
                f"({h.cross_generation_accepted} accepted)"
            )
        detail = "; ".join(h.examples + h.interrupted_rejections + run.unexpected_exits)
        rows.append(
            Row(
                "campaign",
                f"{build}: {run.work} items, seed {config.seed}{depth}",
                figures,
                PASS if good else FAIL,
                run.seconds,
                detail,
            )
        )
    return rows
