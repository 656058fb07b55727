"""Command-line entry point: one subcommand per job, each defined in its own ``cmd_*`` module."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Subcommand name -> module defining ``register(subparsers)``. Heavy imports (mpi4py, z3)
# stay inside each command's function so that ``--help`` is instant.
COMMANDS: dict[str, str] = {
    "model": "leasefence.cmd_model",
    "verify": "leasefence.cmd_verify",
    "tlc": "leasefence.cmd_tlc",
    "trace": "leasefence.cmd_trace",
    "journal": "leasefence.cmd_journal",
    "run": "leasefence.cmd_run",
    "crashcheck": "leasefence.cmd_crashcheck",
    "campaign": "leasefence.cmd_campaign",
    "bench": "leasefence.cmd_bench",
}

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser() -> argparse.ArgumentParser:
    """The ``leasefence`` parser with every registered subcommand."""
    parser = argparse.ArgumentParser(
        prog="leasefence",
        description=(
            "Verification toolkit for reboot-safe lease fencing (F314): an exhaustive model "
            "checker, the TLA+ spec runner, the journal/coordinator implementation and its "
            "operator tools, the MPI dispatcher, and conformance checks tying them together."
        ),
    )
    parser.add_argument("--version", action="version", version="leasefence 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in COMMANDS.values():
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the process exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return status
