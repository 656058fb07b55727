"""``leasefence crashcheck``: crash the journal and the coordinator at every point, reopen, check."""

from __future__ import annotations

import argparse

from leasefence.cli.argtypes import nonneg
from leasefence.harness.crash.disk import MODELS
from leasefence.harness.crash.runner import QUICK_POINTS, QUICK_SIZE, crashcheck


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence crashcheck` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "Runs seeded journal and coordinator workloads in a forked child that acknowledges "
        "each call after it returned. Family kill: SIGKILL after every mutating file call "
        "(writes, fsyncs, renames, truncates, creates). Family power: replays the recorded "
        "file operations with unsynced ones lost and renames not made durable undone; the "
        "first lost write is lost whole (model whole), cut at every byte (model torn), or "
        "kept as any subset of its 512-byte sectors, zeros where the file grew (model "
        "sectors). After each crash the files are reopened and "
        "checked against the reference model: no acknowledged operation lost, nothing "
        "unacknowledged, L1-L6 hold, no error on opening. Exits 1 on any violation."
    )
    p.add_argument("--seed", type=int, default=1, help="seed of the workloads (default 1)")
    p.add_argument(
        "--points",
        type=nonneg,
        default=10_000,
        help="run rounds of workloads until at least this many crash points (default 10000)",
    )
    p.add_argument("--size", type=nonneg, default=40, help="calls per workload (default 40)")
    p.add_argument(
        "--kill-rounds",
        type=nonneg,
        default=5,
        help="rounds (of 4 workloads) that get the SIGKILL family (default 5)",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"small run: {QUICK_POINTS} points, {QUICK_SIZE}-call workloads, one kill round",
    )
    p.add_argument(
        "--model",
        action="append",
        choices=MODELS,
        help="power-loss model(s) to try, repeatable (default: all of " + ", ".join(MODELS) + ")",
    )
    p.add_argument("--json", metavar="PATH", help="also write the figures and violations here")
    p.add_argument(
        "--replay",
        metavar="SPEC",
        help="run one crash point again, as printed with a violation (family:workload:point)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return crashcheck(
        seed=args.seed,
        points=args.points,
        size=args.size,
        kill_rounds=args.kill_rounds,
        quick=args.quick,
        replay_spec=args.replay,
        json_path=args.json,
        quiet=args.quiet,
        models=tuple(m for m in MODELS if m in args.model) if args.model else MODELS,
    )
