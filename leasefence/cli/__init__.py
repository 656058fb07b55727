"""Command-line entry point: one subcommand per job, each configured by its own ``cmd_*`` module.

Only the chosen subcommand's module is imported (``leasefence --help`` imports none), so the
command line starts fast; each ``cmd_*`` module only declares arguments and calls into the layer
that does the work.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
from collections.abc import Sequence

# Subcommand -> (module with ``configure(parser)``, one-line help).
COMMANDS: dict[str, tuple[str, str]] = {
    "model": ("leasefence.cli.cmd_model", "the executable reference model"),
    "verify": (
        "leasefence.cli.cmd_verify",
        "run every verification layer and print a summary table",
    ),
    "tlc": (
        "leasefence.cli.cmd_tlc",
        "run TLC on tla/ configs; `tlc agree`: spec ⇄ model agreement",
    ),
    "trace": ("leasefence.cli.cmd_trace", "validate traces of real runs against the model"),
    "journal": (
        "leasefence.cli.cmd_journal",
        "inspect, recover, compact or repair a work lease journal",
    ),
    "run": ("leasefence.cli.cmd_run", "run the MPI master/worker dispatcher (under mpiexec)"),
    "crashcheck": (
        "leasefence.cli.cmd_crashcheck",
        "crash the journal and the coordinator at every point and check what survives",
    ),
    "campaign": (
        "leasefence.cli.cmd_campaign",
        "fault-injection campaign on real mpiexec runs: F314 vs a pre-fix build",
    ),
    "bench": (
        "leasefence.cli.cmd_bench",
        "side-by-side benchmarks: every figure a ratio measured in one run",
    ),
}

#: Subcommands that work only in a source checkout, and why: from an installed wheel they say so
#: in one line and exit 2 (``leasefence.paths.require_checkout``). A command whose harness
#: stops needing the checkout leaves this table.
NEEDS_CHECKOUT: dict[str, str] = {
    "verify": (
        "it runs ruff, mypy and pytest on the checkout's tests/, and plants bugs in a copy of it"
    ),
    "campaign": "its pre-fix build is a copy of the checkout with F314's defects planted",
}

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def build_parser(chosen: str | None = None, *, alone: bool = False) -> argparse.ArgumentParser:
    """The ``leasefence`` parser; the subcommand ``chosen`` (every one when None) is configured
    in full, the others only named with their help line, or not at all when ``alone``.

    ``main`` asks for ``chosen`` alone when it is the first word of the command line: the list
    of commands is then never shown (only the top-level help, whose ``-h`` would come first,
    and an unknown command's error print it; usage lines say ``COMMAND``), and naming the
    eight others would cost every command ~6 million instructions of argparse."""
    parser = argparse.ArgumentParser(
        prog="leasefence",
        description=(
            "Verification toolkit for reboot-safe lease fencing (F314): an exhaustive model "
            "checker, the TLA+ spec runner, the journal/coordinator implementation and its "
            "operator tools, the MPI dispatcher, and conformance checks tying them together. "
            "`leasefence COMMAND --help` describes each command."
        ),
    )
    parser.add_argument("--version", action="version", version="leasefence 0.1.0")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (module_name, help_line) in COMMANDS.items():
        if alone and name != chosen:
            continue
        p = sub.add_parser(name, help=help_line, description=help_line)
        if chosen is None or name == chosen:
            importlib.import_module(module_name).configure(p)
    return parser


def _chosen(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (its first word that is not an option), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in COMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` and run the chosen subcommand; returns the process exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    chosen = _chosen(args_list)
    parser = build_parser(chosen or "", alone=chosen is not None and args_list[0] == chosen)
    args = parser.parse_args(args_list)
    try:
        if args.command in NEEDS_CHECKOUT:
            from leasefence.paths import require_checkout

            require_checkout(args.command, NEEDS_CHECKOUT[args.command])
        status: int = args.func(args)
        sys.stdout.flush()  # a closed pipe surfaces here, not in Python's flush at exit
    except SystemExit as exc:
        # leasefence.paths (and pathlib, ~18 million instructions) is imported by the commands
        # that use it, not here: a NeedsCheckout was raised by its code, so it is loaded.
        from leasefence.paths import NeedsCheckout

        if not isinstance(exc, NeedsCheckout):
            raise
        print(exc.message, file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # some other pipe broke: a real error
        # Stop quietly, as a process killed by SIGPIPE would. Python flushes stdout again at
        # exit, which would fail and print a warning: point it at /dev/null first.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return _closed_pipe_status()
    return status


def entry() -> int:
    """The process's entry point (the ``leasefence`` script, ``python -m leasefence``): ``main``,
    then its objects are left to the operating system. ``gc.freeze()`` moves every object the
    collector tracks out of its reach, so the interpreter's exit no longer traces them all again
    in its last collections: a rank of ``mpiexec -n 4 leasefence run --work 2000`` spent ~15 ms
    less exiting, the whole job ~75 ms of CPU less (issue 19). The ``atexit`` handlers still run,
    MPI is finalized, standard output and error are flushed, and an object outside any reference
    cycle is freed with the module that holds it. An object in a cycle, live or not, is never
    finalized: a file only such an object holds would keep what it had not flushed. None does:
    every file a command writes is closed before ``main`` returns, and the package has no
    ``__del__``, no ``weakref.finalize`` and no module-level writer. Not in ``main``, which the
    tests call in process."""
    status = main()
    gc.freeze()
    return status


def _closed_pipe_status() -> int:
    """The exit status of a process killed by SIGPIPE (128 + 13), as a stopped pipe reader's
    writer ends. (``signal`` is imported here, not at the top: it builds three enums.)"""
    import signal

    return 128 + signal.SIGPIPE


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe whose reader has closed it (``leasefence ... | head``)."""
    import select  # here, not at the top: only a broken pipe needs it

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(events & select.POLLERR for _, events in poll.poll(0))
    except (OSError, ValueError):  # no real file descriptor behind stdout
        return False
