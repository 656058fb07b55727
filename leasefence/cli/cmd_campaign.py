"""``leasefence campaign``: fault injection on real MPI runs, F314 beside a pre-fix build."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from leasefence.cli.argtypes import count, nonneg, rate, seconds


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence campaign` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "Runs `leasefence run` under mpiexec for the F314 code and for a pre-fix build "
        "(F314's four defects applied to a temporary copy, as in the planted-bug "
        "catalogue), on the same seed and fault schedule: master SIGKILLed and restarted "
        "(torn tails left), a simulated reboot, a worker SIGSTOPped past its TTL, wall-clock "
        "steps forward and back, late/duplicated/reordered/wrong-ID results, concurrent "
        "candidates for one work item and state task, journal compaction. Then checks each "
        "history offline (no work completed twice, no wrong-owner commit, every item "
        "completed once, traces valid against the model) and prints a table. With "
        "--pipeline N > 1 every job runs at that depth, the master also restarts inside the "
        "running job (its workers and their results in flight alive), and the builds are "
        "F314 (fenced by generation) and rank-fence (the same code with --fence rank), a "
        "measurement. Exit "
        "0 when F314 holds with every fault injected (beyond depth 1: and results across "
        "generations arrived and were refused) and the pre-fix build, if run, shows "
        "damage; 1 otherwise; 2 on bad usage."
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the schedule and workload (0)")
    p.add_argument(
        "--duration",
        type=seconds,
        default=20.0,
        help="scale: about 12 work items per second (default 20 s; faults add their own time)",
    )
    p.add_argument("--ranks", type=count, default=3, help="MPI processes per job (default 3)")
    p.add_argument("--faults", type=int, default=10, help="scheduled faults per build (10)")
    p.add_argument("--work", type=count, default=None, help="work items (default: from --duration)")
    p.add_argument("--ttl", type=seconds, default=1.0, help="lease TTL in seconds (default 1)")
    p.add_argument(
        "--inject-rate", type=rate, default=0.1, help="rate of late/dup/wrong-ID results (0.1)"
    )
    p.add_argument(
        "--duplicate-candidates",
        type=rate,
        default=0.1,
        help="rate of concurrent candidates for running work (0.1)",
    )
    p.add_argument("--compact-every", type=count, default=25, help="compaction period (25)")
    p.add_argument("--worker", choices=("z3", "trivial"), default="z3", help="worker (z3)")
    p.add_argument(
        "--pipeline",
        type=count,
        default=1,
        metavar="N",
        help=(
            "dispatches a worker rank holds at once, passed to every job (default 1: F314 vs "
            "pre-fix). Beyond 1 the builds are F314 fenced by generation and F314 fenced by "
            "the rank alone (rank-fence, --fence rank), which the model says is unsafe"
        ),
    )
    p.add_argument(
        "--restart-every",
        type=nonneg,
        default=None,
        metavar="K",
        help=(
            "in-job master restarts (leasefence run --inject restart): after every K results "
            "handled; default 25 beyond depth 1, none at depth 1; 0: none"
        ),
    )
    p.add_argument(
        "--only",
        choices=("f314", "pre-fix", "rank-fence"),
        default=None,
        help="run one build only (pre-fix and rank-fence run at the --pipeline depth)",
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="write every figure as JSON")
    p.add_argument(
        "--plot",
        type=Path,
        default=Path("reports/campaign.png"),
        metavar="PATH",
        help="PNG of coverage over time with fault times (default reports/campaign.png)",
    )
    p.add_argument(
        "--workdir",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep each build's journal, snapshot, trace and logs here (default: temporary)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from leasefence.harness.campaign.console import main
    from leasefence.harness.campaign.schedule import CampaignConfig, default_builds

    if args.ranks < 2 or args.faults < 0:
        print("leasefence campaign: --ranks must be >= 2 and --faults >= 0", file=sys.stderr)
        return 2
    config = CampaignConfig(
        seed=args.seed,
        duration=args.duration,
        ranks=args.ranks,
        faults=args.faults,
        work=args.work,
        ttl=args.ttl,
        inject_rate=args.inject_rate,
        duplicate_candidates=args.duplicate_candidates,
        compact_every=args.compact_every,
        worker=args.worker,
        builds=(args.only,) if args.only else default_builds(args.pipeline),
        pipeline=args.pipeline,
        restart_every=args.restart_every,
    )
    return main(config, args.workdir, args.json, args.plot)
