"""``leasefence bench``: the side-by-side benchmarks (journal, recovery, dispatch, verification)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from leasefence.harness.bench.common import Sizes
from leasefence.harness.bench.runner import BENCHMARKS, run

EXIT_OK, EXIT_ERROR = 0, 1


def _only(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown benchmark(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {','.join(BENCHMARKS)}"
        )
    return names


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence bench` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "Run the benchmarks with their contenders interleaved and repeated, and print each "
        "ratio of medians beside its goal. Goals are reported, not enforced: the exit "
        "status is non-zero only when a benchmark fails to run."
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument(
        "--full",
        action="store_const",
        dest="size",
        const="full",
        help="larger runs, and journals of 10^6 records (several minutes more)",
    )
    size.add_argument(
        "--tiny",
        action="store_const",
        dest="size",
        const="tiny",
        help="the smallest sizes (a smoke test; the figures mean little)",
    )
    p.set_defaults(size="default")
    p.add_argument(
        "--only",
        type=_only,
        default=BENCHMARKS,
        metavar="NAMES",
        help=f"comma-separated subset of {','.join(BENCHMARKS)} (default: all)",
    )
    p.add_argument(
        "--ranks",
        type=int,
        metavar="N",
        help="MPI processes of each dispatch and jobs job (mpiexec -n N, N >= 2; default: 3 "
        "for dispatch, 4 for jobs, the ranks of issue 19's whole-job goal)",
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="also write the results as JSON")
    p.add_argument(
        "--dir",
        type=Path,
        metavar="DIR",
        help="where the benchmark files go (default: the system temporary directory); "
        "the journal, SQLite and fdatasync contenders share it",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    sizes = Sizes.named(args.size)
    if args.ranks is not None:
        if args.ranks < 2:
            print(
                f"leasefence bench: --ranks must be at least 2, got {args.ranks}", file=sys.stderr
            )
            return EXIT_ERROR
        sizes = dataclasses.replace(sizes, ranks=args.ranks, job_ranks=args.ranks)
    report = run(sizes, args.only, directory=args.dir)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report.to_json(), indent=1) + "\n")
        print(f"wrote {args.json}")
    for error in report.errors:
        print(f"leasefence bench: error: {error}", file=sys.stderr)
    return EXIT_ERROR if report.errors else EXIT_OK
