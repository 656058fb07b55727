"""``leasefence run``: the MPI master/worker dispatcher (start it with ``mpiexec -n N``, N >= 2)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from leasefence.cli.argtypes import ENGINES, count, rate, seconds
from leasefence.impl.poll import POLL_MODES


def _inject(text: str) -> Any:
    from leasefence.harness.injection import Injection

    try:
        return Injection.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence run` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "Dispatch work items from rank 0 (the master) to ranks 1..N-1 (workers) under "
        "leases in a work journal and a state-shard coordinator, as F314 specifies. Start "
        "it with `mpiexec -n N leasefence run ...`, N >= 2. Prints progress on stderr and, "
        "at the end, the counts. Missing parent directories of --journal, --snapshot and "
        "--trace are created. Rerun with the same --journal and --snapshot after a crash to "
        "restart the master: unfinished work is dispatched again."
    )
    p.epilog = (
        "exit status (every rank): 0 every item completed exactly once; 1 the run ended but "
        "not every item did (some given up: failed 3 times or answered invalidly "
        "--max-invalid times; or a duplicate completion); 2 bad usage; 3 a file could not be "
        "used (missing or unwritable directory, permission, full disk, corrupt journal or "
        "snapshot: one line on stderr names the file and the cause); 4 the journal is locked "
        "by another master. On 3 and 4 the master stops the workers itself (no MPI_Abort)."
    )
    p.add_argument("--work", type=count, default=200, help="work items (default 200)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--ttl", type=seconds, default=30.0, help="lease TTL in seconds (default 30)")
    p.add_argument(
        "--journal",
        type=Path,
        metavar="PATH",
        help="work journal (JSONL); default: a temporary one, removed at the end",
    )
    p.add_argument(
        "--snapshot",
        type=Path,
        metavar="PATH",
        help="coordinator snapshot; default: beside the journal (JOURNAL.snapshot.json)",
    )
    p.add_argument(
        "--trace", type=Path, metavar="PATH", help="append an NDJSON trace of every step here"
    )
    p.add_argument(
        "--inject",
        type=_inject,
        default=None,
        metavar="FAULTS",
        help=(
            "faults the workers inject, comma-separated: late (a result held 1.5 x TTL, past "
            "its lease), dup (sent twice), wrong-id (a wrong state task reported), missing-id "
            "(old protocol: none reported), malformed (a garbage message first), reorder; "
            "restart (the master's own fault: it restarts inside the job, on the same journal, "
            "snapshot and trace, while the workers keep running, so results in flight reach "
            "the new master; see --restart-every)"
        ),
    )
    p.add_argument(
        "--inject-rate",
        type=rate,
        default=0.15,
        metavar="P",
        help="probability that each injected worker fault hits a given result (default 0.15)",
    )
    p.add_argument(
        "--restart-every",
        type=count,
        default=10,
        metavar="K",
        help=(
            "with --inject restart: after every K results handled, the master restarts right "
            "after its next dispatch that fills a rank's last slot (default 10)"
        ),
    )
    p.add_argument(
        "--max-invalid",
        type=count,
        default=3,
        metavar="N",
        help=(
            "give an item up after N invalid answers (messages the wire protocol refuses) "
            "charged to it, instead of dispatching it for ever (default 3; exit status 1)"
        ),
    )
    p.add_argument(
        "--worker",
        choices=("z3", "trivial"),
        default="z3",
        help="worker function: z3 (branch-reaching SMT queries, default) or trivial",
    )
    f = p.add_argument_group("fault injection for campaigns (leasefence campaign)")
    f.add_argument(
        "--clock-file",
        type=Path,
        metavar="PATH",
        help=(
            'the master\'s clock reads {"wall_offset": S, "mono_origin": M} from this JSON file '
            "at each step: S seconds added to the wall clock (steps forward or back); M, a "
            "monotonic reading taken at a simulated reboot, is the monotonic origin at start"
        ),
    )
    f.add_argument(
        "--compact-every",
        type=count,
        default=0,
        metavar="N",
        help="compact the journal after every N accepted completions",
    )
    f.add_argument(
        "--events",
        type=Path,
        metavar="PATH",
        help="append an NDJSON log of starts, dispatches, results and compactions (real time)",
    )
    f.add_argument(
        "--duplicate-candidates",
        type=rate,
        default=0.0,
        metavar="RATE",
        help=(
            "probability that an idle rank is first offered work another rank is running "
            "(a concurrent candidate for the same work and state task; F314 refuses it)"
        ),
    )
    p.add_argument(
        "--pipeline",
        type=count,
        default=128,
        metavar="N",
        help=(
            "most dispatches one worker rank holds at once (default 128: its next WORKs are "
            "already there when it answers, and each group commit covers more decisions; "
            "beyond 2 a rank is given only as many as keep the "
            "last one's wait within a quarter of --ttl, from the gap between its results; 1 is "
            "F314's one active transaction per rank); beyond 1 the leases are fenced by (rank, "
            "dispatch generation)"
        ),
    )
    p.add_argument(
        "--fence",
        choices=("rank", "generation"),
        default=None,
        help=(
            "owner token of every lease: rank (F314) or generation ((rank, epoch, counter), "
            "carried by WORK and RESULT); default: rank with --pipeline 1, generation beyond "
            "(rank with --pipeline > 1 is unsafe: see `leasefence model check --pipeline 2 "
            "--fence rank`)"
        ),
    )
    p.add_argument(
        "--poll",
        choices=POLL_MODES,
        default="auto",
        help=(
            "how every rank waits for its next message: auto (default: spin briefly, then yield, "
            "then sleep; with more ranks than cores on a node never yield: the master spins "
            "50 us, a worker never spins and sleeps at most 50 us), "
            "spin (lowest latency, a waiting rank holds a core), yield, sleep (0.2-5 ms pauses), "
            "block (a worker waiting for work blocks in MPI_Probe; MPICH spins there)"
        ),
    )
    p.add_argument(
        "--sync",
        choices=("group", "always"),
        default="group",
        help=(
            "when decisions become durable: group (default: the decisions of one loop turn share "
            "one journal fsync and one coordinator fsync, made before any WORK leaves), or "
            "always (each decision fsynced before the next)"
        ),
    )
    p.add_argument(
        "--engine",
        choices=ENGINES,
        default=None,
        help=(
            "the dispatcher's modules on every rank (wire, master, both loops): auto runs the "
            "build of `leasefence trace compile` (`make compile`) when there is one for these "
            "sources, else the interpreted modules; compiled: exit 2 without a build; "
            "interpreted: never load it (default: $LEASEFENCE_ENGINE, else auto). The same "
            "source either way: the build is the interpreted modules compiled; the report's "
            "`dispatcher` line says which ran"
        ),
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from leasefence.harness.compiled import EVERY_RANK, EngineError, activate, engine_from_env

    try:  # before anything imports the dispatcher's modules
        activate(args.engine or engine_from_env(), EVERY_RANK)
    except EngineError as exc:
        print(f"leasefence run: {exc}", file=sys.stderr)
        return 2
    from leasefence.harness.injection import Injection
    from leasefence.harness.runjob import FaultConfig
    from leasefence.harness.runjob import run as run_job
    from leasefence.impl.mpirun import RunConfig

    config = RunConfig(
        work=args.work,
        seed=args.seed,
        ttl=args.ttl,
        journal=args.journal,
        snapshot=args.snapshot,
        trace=args.trace,
        worker=args.worker,
        pipeline=args.pipeline,
        fence=args.fence,
        max_invalid=args.max_invalid,
        poll=args.poll,
        group_commit=args.sync == "group",
    )
    faults = FaultConfig(
        inject=Injection(
            args.inject.kinds if args.inject else frozenset(), args.inject_rate, args.seed
        ),
        clock_file=args.clock_file,
        compact_every=args.compact_every,
        events=args.events,
        duplicate_candidates=args.duplicate_candidates,
        restart_every=args.restart_every,
    )
    return run_job(config, faults)
