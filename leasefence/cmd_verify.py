"""``leasefence verify``: run every verification layer that exists and print one summary table."""

from __future__ import annotations

import argparse
from typing import Any

from leasefence.verify import run_verify


def register(sub: Any) -> None:
    p = sub.add_parser(
        "verify",
        help="run every verification layer and print a summary table",
        description=(
            "The main job: runs lint and types, the exhaustive model check (fixed protocol and "
            "each pre-fix flavour), and every further layer present, prints one table (layer, "
            "what ran, figures, result, time), writes reports/verify.md and reports/verify.json, "
            "and exits non-zero on any failure."
        ),
    )
    p.add_argument("--deep", action="store_true", help="larger bounds and deeper profiles")
    p.add_argument(
        "--reports", default="reports", help="folder for verify.md/verify.json (default reports)"
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    return run_verify(deep=args.deep, reports=args.reports)
