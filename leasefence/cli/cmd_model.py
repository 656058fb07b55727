"""``leasefence model check``: explore the reference model exhaustively under small bounds;
``leasefence model transitions``: drive every transition of it through the implementation."""

from __future__ import annotations

import argparse
from pathlib import Path

from leasefence import modelcheck
from leasefence.cli.argtypes import nonneg
from leasefence.model.flavours import DESCRIPTIONS, Flavour
from leasefence.model.system import MODEL_FENCES, Bounds

_DEFAULT = Bounds()
#: The default last wall-clock tick with --pipeline > 1: one tick (the TTL still expires, and
#: the reboot and the rollback stay) keeps the depth-2 check within about a minute on 2 cores.
PIPELINED_MAX_WALL = 1


def _task_map(text: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for item in text.split(","):
        work, sep, task = item.strip().partition(":")
        if not sep or not work or not task:
            raise argparse.ArgumentTypeError(
                f"--works wants WORK:TASK pairs separated by commas, e.g. w1:s1,w2:s1,w3:s2; got {item!r}"
            )
        pairs.append((work, task))
    if len({w for w, _ in pairs}) != len(pairs):
        raise argparse.ArgumentTypeError(f"--works names a work ID twice: {text!r}")
    return tuple(pairs)


def add_bounds_arguments(p: argparse.ArgumentParser) -> None:
    """The bound flags shared by ``model check`` and the spec ⇄ model agreement check."""
    d = _DEFAULT
    g = p.add_argument_group("bounds (the constants of the model)")
    g.add_argument(
        "--works",
        type=_task_map,
        default=d.task_of,
        metavar="W:T,...",
        help="work IDs and the state task each maps to (default: w1:s1,w2:s1,w3:s2)",
    )
    g.add_argument(
        "--ranks", type=nonneg, default=len(d.ranks), help=f"worker ranks (default {len(d.ranks)})"
    )
    g.add_argument(
        "--ttl", type=nonneg, default=d.ttl, help=f"lease TTL in ticks (default {d.ttl})"
    )
    g.add_argument(
        "--max-wall",
        type=nonneg,
        default=None,
        help=(
            f"last wall-clock tick (default {d.max_wall}; {PIPELINED_MAX_WALL} with --pipeline > 1)"
        ),
    )
    g.add_argument(
        "--reboots",
        type=nonneg,
        default=d.max_reboots,
        help=f"reboots (monotonic origin resets) (default {d.max_reboots})",
    )
    g.add_argument(
        "--rollbacks",
        type=nonneg,
        default=d.max_rollbacks,
        help=f"wall-clock rollbacks (default {d.max_rollbacks})",
    )
    g.add_argument(
        "--restarts",
        type=nonneg,
        default=d.max_restarts,
        help=f"master restarts (default {d.max_restarts})",
    )
    g.add_argument(
        "--attempts",
        type=nonneg,
        default=d.max_attempts,
        help=f"leases of one work ID (default {d.max_attempts})",
    )
    g.add_argument(
        "--leases",
        type=nonneg,
        default=d.max_leases,
        help=f"leases in all (default {d.max_leases})",
    )
    g.add_argument(
        "--dups",
        type=nonneg,
        default=d.max_dups,
        help=f"duplicated results (default {d.max_dups})",
    )
    g.add_argument(
        "--pipeline",
        type=nonneg,
        default=d.pipeline,
        metavar="N",
        help=f"dispatches one rank may hold at once (default {d.pipeline}: F314's one per rank)",
    )
    g.add_argument(
        "--fence",
        choices=MODEL_FENCES,
        default=d.fence,
        help=(
            "owner token of every lease: rank (F314: the MPI rank alone), generation "
            "((rank, (epoch, counter)), carried by WORK and RESULT) or counter (the same "
            f"without the epoch: repeats after a restart; must-fail) (default {d.fence})"
        ),
    )
    g.add_argument(
        "--no-legacy",
        dest="legacy",
        action="store_false",
        help="never open a journal written before F314 (no LegacyRecord; the spec's LegacyRecords)",
    )
    g.add_argument(
        "--flavour",
        choices=[f.value for f in Flavour],
        default=Flavour.FIXED.value,
        help="protocol to check: " + "; ".join(f"{f.value}: {DESCRIPTIONS[f]}" for f in Flavour),
    )


def bounds_from_args(args: argparse.Namespace) -> Bounds:
    """The ``Bounds`` the bound flags describe."""
    if args.ranks < 1:
        raise SystemExit("leasefence model: --ranks must be at least 1")
    if args.pipeline < 1:
        raise SystemExit("leasefence model: --pipeline must be at least 1")
    return Bounds(
        task_of=args.works,
        ranks=tuple(range(1, args.ranks + 1)),
        ttl=args.ttl,
        max_wall=(
            args.max_wall
            if args.max_wall is not None
            else (PIPELINED_MAX_WALL if args.pipeline > 1 else _DEFAULT.max_wall)
        ),
        max_reboots=args.reboots,
        max_rollbacks=args.rollbacks,
        max_restarts=args.restarts,
        max_attempts=args.attempts,
        max_leases=args.leases,
        max_dups=args.dups,
        flavour=Flavour(args.flavour),
        pipeline=args.pipeline,
        fence=args.fence,
        legacy=args.legacy,
    )


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence model` (the parser is made by ``leasefence.cli``)."""
    p.description = __doc__
    msub = p.add_subparsers(dest="model_command", metavar="SUBCOMMAND", required=True)
    c = msub.add_parser(
        "check",
        help="explore every reachable state and check L1-L7",
        description=(
            "Breadth-first exploration of every state reachable under the bounds, checking "
            "TypeOK, L1-L7, NoStuckLease and CompletionsAccounted in every state and transition. "
            "Exits 0 when all hold, 1 with the shortest counterexample when one is violated, 2 "
            "on bad usage. "
            "With --flavour defectN it checks the protocol with F314's defect N switched back "
            "on, which must fail."
        ),
    )
    add_bounds_arguments(c)
    c.add_argument(
        "--json",
        type=Path,
        metavar="PATH",
        help="write the figures (and any counterexample) as JSON",
    )
    c.add_argument("--quiet", action="store_true", help="no progress lines")
    c.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help=(
            "check only this invariant or property (repeatable; TypeOK is always checked), as a "
            "must-fail TLC config names them (tla/Buggy_<NAME>.cfg)"
        ),
    )
    live = c.add_argument_group(
        "liveness (issue 21; tla/LeaseFenceLive.tla)",
        "With --live the live system is checked instead: the clock keeps moving, --attempts "
        "is a guard per item (--leases is not used), and EveryLeaseFreed, EveryRankIdle and "
        "EveryItemSettled are checked under the spec's weak fairness; a violation is printed "
        "as a lasso (a prefix, then a loop or stuttering for ever).",
    )
    live.add_argument("--live", action="store_true", help="check the liveness properties")
    live.add_argument(
        "--unfair", action="store_true", help="drop the fairness (LiveSpecUnfair): must fail"
    )
    live.add_argument(
        "--starve",
        action="append",
        metavar="WORK",
        default=[],
        help="planted bug: the dispatcher never offers WORK (repeatable): must fail",
    )
    live.add_argument(
        "--halt-after-rollback",
        action="store_true",
        help="planted bug: periodic recovery stops for good after a rollback: must fail",
    )
    c.set_defaults(func=run_check)
    t = msub.add_parser(
        "transitions",
        help="drive every transition of the model through the implementation",
        description=(
            "Walks the model's state graph under the bounds (or a --profile), turns every "
            "transition (each edge state -label-> state', self-loops included) into paths from "
            "Init and replays each through the implementation in lockstep with the model "
            "(journal on a real file, coordinator with its snapshot, master over the in-process "
            "transport, restarts from disk). Prints transitions covered / total; exits 1 on a "
            "disagreement, saving the shortest failing path as a scenario file."
        ),
    )
    add_bounds_arguments(t)
    t.add_argument(
        "--profile",
        choices=("quick", "ci", "deep", "pipelined", "clock"),
        help="named bounds instead of the flags: quick (make test), ci (MCLeaseFence.cfg), deep, "
        "pipelined (depth 2, generation fence, one rank), clock (wall 0-2 and a rollback: a "
        "lease dated past the TTL)",
    )
    t.add_argument(
        "--save", type=Path, metavar="DIR", help="where a failing path is saved as a scenario"
    )
    t.add_argument(
        "--branches",
        action="store_true",
        help="measure the branch coverage of impl/ journal, coordinator and master (coverage.py)",
    )
    t.add_argument(
        "--jobs",
        type=int,
        default=0,
        metavar="N",
        help="processes that share the paths (default: one per CPU; --branches runs in one)",
    )
    t.set_defaults(func=run_transitions)


def run_check(args: argparse.Namespace) -> int:
    from leasefence.model.invariants import STATE_INVARIANTS, STEP_PROPERTIES

    only = None if args.only is None else frozenset({"TypeOK", *args.only})
    if args.live or args.unfair or args.starve or args.halt_after_rollback:
        return _run_live(args, only)
    unknown = sorted((only or set()) - set(STATE_INVARIANTS) - set(STEP_PROPERTIES))
    if unknown:
        raise SystemExit(f"leasefence model check: no invariant or property {', '.join(unknown)}")
    return modelcheck.run_check(bounds_from_args(args), args.quiet, args.json, only)


def _run_live(args: argparse.Namespace, only: frozenset[str] | None) -> int:
    from leasefence.model.live import LIVE_PROPERTIES, LiveBounds

    unknown = sorted((only or set()) - set(LIVE_PROPERTIES) - {"TypeOK"})
    if unknown:
        raise SystemExit(
            f"leasefence model check --live: no liveness property {', '.join(unknown)}"
        )
    try:
        lb = LiveBounds(
            bounds_from_args(args),
            fair=not args.unfair,
            starve=frozenset(args.starve),
            halt_after_rollback=args.halt_after_rollback,
        )
    except ValueError as exc:
        raise SystemExit(f"leasefence model check --live: {exc}") from exc
    return modelcheck.run_live_check(lb, args.json, only)


def run_transitions(args: argparse.Namespace) -> int:
    from leasefence.conformance import transition_layer, transitions

    bounds = transitions.PROFILES[args.profile] if args.profile else bounds_from_args(args)
    jobs = args.jobs if args.jobs > 0 else transitions.jobs_available()
    return transition_layer.run(bounds, args.save, args.branches, jobs)
