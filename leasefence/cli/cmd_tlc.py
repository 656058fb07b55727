"""``leasefence tlc``: run TLC on the spec's configs, and check that spec and model agree."""

from __future__ import annotations

import argparse
from pathlib import Path

from leasefence.tlc.commands import EXIT_NO_TLC
from leasefence.tlc.commands import run as run_tlc


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence tlc` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "leasefence tlc [CONFIG...]: run TLC on each config (a path, or a name in tla/ with "
        "or without .cfg; no argument: every config but the deep ones) and judge it by its "
        "Flavour constant: the fixed protocol must pass, a defect must fail on one of the "
        "invariants F314's table names. "
        "leasefence tlc agree [CONFIG]: for the constants of CONFIG (default "
        "MCLeaseFence.cfg), compare the state graph TLC explores with the model's. "
        "The jar comes from $TLA2TOOLS_JAR, the user's cache (~/.cache/leasefence or "
        f"$XDG_CACHE_HOME/leasefence), or the pinned release (downloaded, SHA-256 checked). "
        f"Exit status: 0 as expected, 1 on any unexpected result, 2 on bad usage, "
        f"{EXIT_NO_TLC} when no TLC (jar or java) can be had."
    )
    p.add_argument(
        "configs",
        nargs="*",
        metavar="CONFIG",
        help="configs to run, or `agree [CONFIG]` (default: every non-deep config in tla/)",
    )
    p.add_argument("--deep", action="store_true", help="include the deep configs (*Deep*.cfg)")
    p.add_argument(
        "--workers", default="1", help="TLC worker threads, a number or `auto` (default 1)"
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="write every result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return run_tlc(args.configs, args.deep, args.workers, args.json)
