"""``leasefence trace check``: validate a trace recorded from a real run against the model."""

from __future__ import annotations

import argparse
import os
import stat
import sys

from leasefence.cli.argtypes import ENGINES


def trace_path(text: str) -> str:
    """A trace argument as ``str(pathlib.Path(text))`` spells it on POSIX, the name that is
    opened and printed: repeated slashes and ``.`` parts dropped (``..`` kept), a leading ``//``
    kept, ``.`` for an empty path. Not a ``Path``: pathlib costs ~18 million instructions to
    import, paid by every ``trace check``."""
    root = "//" if text[:2] == "//" and text[2:3] != "/" else "/" if text[:1] == "/" else ""
    return root + "/".join(part for part in text.split("/") if part not in ("", ".")) or "."


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence trace` (the parser is made by ``leasefence.cli``)."""
    p.description = __doc__
    tsub = p.add_subparsers(dest="trace_command", metavar="SUBCOMMAND", required=True)
    c = tsub.add_parser(
        "check",
        help="replay an NDJSON trace through the model step by step",
        description=(
            "Replays a trace written by `leasefence run --trace PATH` through the reference model "
            "and reports the first step the model does not allow or decides differently, with the "
            "model state before it; every replayed state is also checked against the invariants "
            "L1-L7 (a step the model allows but that breaks one is reported too). Pipelined runs "
            "(--pipeline N) replay at their depth and fence, generation by generation; a step a "
            "killed master made durable but never traced is accepted when the model allows it. "
            "Exit 0: the trace is a behaviour of the model that keeps every invariant; "
            "1: divergence; 2: the file is unreadable or not a trace. "
            "It runs the compiled validator when `leasefence trace compile` has built one for "
            "these very sources (about 1.5x fewer CPU seconds; the same source, the same "
            "verdicts), else the interpreted one."
        ),
    )
    c.add_argument("trace", type=trace_path, nargs="+", help="trace file(s) (NDJSON)")
    c.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help=(
            "auto: the compiled validator when built for these sources, else the interpreted "
            "one; compiled: fail (exit 2) without a build; interpreted: never load it "
            "(default: $LEASEFENCE_ENGINE, else auto)"
        ),
    )
    c.set_defaults(func=run_check)
    b = tsub.add_parser(
        "compile",
        help=(
            "build the compiled trace validator and dispatcher with mypyc (about a minute, once "
            "per source)"
        ),
        description=(
            "Compiles the model's and the trace checker's modules, and the dispatcher's (wire, "
            "master, both MPI loops), with mypyc (it comes with mypy: "
            "`pip install 'leasefence[dev]'`; needs a C compiler and Python's headers) into the "
            "user's cache ($XDG_CACHE_HOME/leasefence/compiled, else ~/.cache/leasefence/"
            "compiled), keyed by the hash of the sources and the Python, never beside the "
            "sources. `trace check` and `leasefence run` then run it (their --engine). A build "
            "for other sources is never loaded: "
            "after an edit, compile again. Exit 0: built or up to date; 2: cannot build here."
        ),
    )
    b.add_argument("--force", action="store_true", help="build again even if up to date")
    b.add_argument(
        "--status",
        action="store_true",
        help="only say whether a build for these sources exists (exit 0) or not (exit 1)",
    )
    b.set_defaults(func=run_compile)


def run_compile(args: argparse.Namespace) -> int:
    from leasefence.harness.compiled import CompileError, builds_dir, built, compile_validator, key

    if args.status:
        done = built()
        if done is None:
            print(f"no compiled validator for these sources (key {key()}) in {builds_dir()}")
            return 1
        print(f"compiled validator for these sources: {done}")
        return 0
    try:
        compile_validator(say=lambda line: print(line, flush=True), force=args.force)
    except CompileError as exc:
        print(f"leasefence trace compile: {exc}", file=sys.stderr)
        return 2
    return 0


def run_check(args: argparse.Namespace) -> int:
    from leasefence.harness.compiled import VALIDATOR, EngineError, activate, engine_from_env

    try:
        activate(args.engine or engine_from_env(), VALIDATOR)
    except EngineError as exc:
        print(f"leasefence trace check: {exc}", file=sys.stderr)
        return 2
    # Imported here, not at the top: `trace check --help` then starts without the model, and
    # the compiled modules, when activated above, are the ones imported.
    from leasefence.conformance.tracecheck import TraceFormatError, validate

    status = 0
    for path in args.trace:
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                # a FIFO would block the read, a directory cannot be one
                print(f"{path}: not a regular file (a trace is a file)", file=sys.stderr)
                return 2
            with open(path, encoding="utf-8") as fh:
                report = validate(fh)
        except OSError as exc:
            print(f"{path}: cannot read: {exc.strerror}", file=sys.stderr)
            return 2
        except (TraceFormatError, UnicodeDecodeError) as exc:
            print(f"{path}: not a valid trace: {exc}", file=sys.stderr)
            return 2
        counts = ", ".join(f"{k} {v}" for k, v in sorted(report.counts.items()))
        tail = " (torn last line ignored)" if report.torn_tail else ""
        lost = f", {report.lost_steps} untraced step(s) before a kill" if report.lost_steps else ""
        depth = f"pipeline {report.pipeline}, {report.fence} fence"
        if report.ok:
            print(
                f"{path}: OK, {report.steps} steps replayed ({counts}; {depth}); invariants hold; "
                f"{report.rollbacks} clock rollbacks{lost}{tail}"
            )
        else:
            print(
                f"{path}: DIVERGES at line {report.line} after {report.steps} steps: {report.divergence}"
            )
            status = 1
    return status
