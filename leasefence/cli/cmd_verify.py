"""``leasefence verify``: run every verification layer that exists and print one summary table."""

from __future__ import annotations

import argparse

from leasefence.verify import run_verify


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence verify` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "The main job: runs lint and types, the exhaustive model check (fixed protocol and "
        "each pre-fix flavour), and every further layer present, prints one table (layer, "
        "what ran, figures, result, time), writes reports/verify.md and reports/verify.json, "
        "and exits non-zero on any failure."
    )
    p.add_argument("--deep", action="store_true", help="larger bounds and deeper profiles")
    p.add_argument(
        "--reports", default="reports", help="folder for verify.md/verify.json (default reports)"
    )
    p.add_argument(
        "--mutants",
        action="store_true",
        help=(
            "instead of the layers, run the whole planted-bug catalogue (leasefence/harness/mutants/catalogue.py) "
            "against every test layer and print mutant x layer -> caught/missed; exit 1 if any "
            "mutant survives every layer"
        ),
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.mutants:
        return _run_mutants(args.reports)
    return run_verify(deep=args.deep, reports=args.reports)


def _run_mutants(reports: str) -> int:
    from leasefence.harness.mutants.gate import run_mutants

    return run_mutants(reports)
