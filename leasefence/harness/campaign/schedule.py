"""The campaign's plan: the builds compared, the faults, each campaign's options, and the
fault schedule (a pure function of the seed)."""

from __future__ import annotations

import random
from dataclasses import dataclass

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
    """The ``leasefence run`` flags that make ``build`` at ``pipeline`` depth: ``--pipeline N``
    always (the run's default depth is 2 since issue 19; at depth 1 the fence is the rank,
    F314's, beyond it the generation, the run's default), and ``--fence rank`` for the
    ``rank-fence`` build."""
    if build not in ALL_BUILDS:
        raise ValueError(f"unknown build {build!r}; known: {', '.join(ALL_BUILDS)}")
    args = ["--pipeline", str(pipeline)]
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
