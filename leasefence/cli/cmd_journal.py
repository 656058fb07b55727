"""``leasefence journal``: operator tools for a work lease journal (inspect, recover, compact, repair)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from leasefence.impl.errors import InvalidTtl, JournalError
from leasefence.impl.journal import WorkLeaseJournal, repair_journal, scan_file
from leasefence.impl.rules import UNIX, check_ttl

EXIT_OK = 0
EXIT_FAILED = 1


def _ttl(text: str) -> float:
    try:
        return check_ttl(float(text))
    except (ValueError, InvalidTtl):
        raise argparse.ArgumentTypeError(
            f"--ttl wants a finite number of seconds >= 0, got {text!r}"
        ) from None


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence journal` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "Operator tools for a work lease journal (.work_leases.jsonl, see "
        "docs/journal-format.md). Exit status: 0 done, 1 refused (locked, corrupt, missing "
        "file), 2 bad usage."
    )
    jsub = p.add_subparsers(dest="journal_command", metavar="SUBCOMMAND", required=True)

    i = jsub.add_parser(
        "inspect",
        help="show active leases, counts, legacy records and any torn tail (read-only)",
        description=(
            "Read the journal without taking its lock or changing it, and show every active "
            "lease (work ID, owner rank, clock domain, age), the counts of completed IDs, "
            "attempts and records, records in F314's original format, and a torn tail if one "
            "would be cut before the next append. A corrupt journal (a bad line followed by "
            "good ones) exits 1 naming the bad lines."
        ),
    )
    i.add_argument("path", type=Path, metavar="PATH", help="the journal file")
    i.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    i.set_defaults(func=run_inspect)

    r = jsub.add_parser(
        "recover",
        help="reclaim expired, future-dated and legacy leases (takes the writer lock)",
        description=(
            "Open the journal as its one writer and run recover(TTL): with --ttl 0 every active "
            "lease is reclaimed; otherwise a legacy (untagged) lease is always reclaimed, a Unix "
            "lease dated more than TTL seconds in the future is reclaimed, and a Unix lease is "
            "reclaimed when now - updated >= TTL. Prints the reclaimed work IDs, one per line. "
            "Refused (exit 1) while another writer holds the journal."
        ),
    )
    r.add_argument("path", type=Path, metavar="PATH", help="the journal file")
    r.add_argument(
        "--ttl", type=_ttl, required=True, metavar="S", help="lease TTL in seconds (>= 0)"
    )
    r.set_defaults(func=run_recover)

    c = jsub.add_parser(
        "compact",
        help="rewrite the journal as one record per work ID (takes the writer lock)",
        description=(
            "Rewrite the journal as one record per completed ID, per active lease (keeping its "
            "own timestamp and clock tag) and per other ID ever leased (keeping attempts). "
            "Crash-safe: a temporary file is fsynced and renamed over the journal. A torn tail "
            "is saved to PATH.broken first."
        ),
    )
    c.add_argument("path", type=Path, metavar="PATH", help="the journal file")
    c.set_defaults(func=run_compact)

    q = jsub.add_parser(
        "repair",
        help="keep every good record and move bad lines to PATH.quarantine",
        description=(
            "For a journal that refuses to open because a bad line is followed by good ones: "
            "keep every good line byte for byte and append the bad lines, each after a comment "
            "naming its line number and what is wrong, to PATH.quarantine. Takes the writer lock. "
            "Review the quarantine file: a lost done record means that work may run again."
        ),
    )
    q.add_argument("path", type=Path, metavar="PATH", help="the journal file")
    q.set_defaults(func=run_repair)


def _fail(message: str) -> int:
    print(f"leasefence journal: {message}", file=sys.stderr)
    return EXIT_FAILED


def _missing(path: Path) -> int | None:
    if not path.is_file():
        return _fail(f"no journal at {path}")
    return None


def run_inspect(args: argparse.Namespace) -> int:
    path: Path = args.path
    if (status := _missing(path)) is not None:
        return status
    try:
        journal = WorkLeaseJournal.open_readonly(path)
    except JournalError as err:
        scan = scan_file(path)
        bad = ", ".join(f"line {b.line} ({b.reason})" for b in scan.bad)
        return _fail(f"{err}\n  bad lines: {bad}")
    except OSError as err:
        return _fail(f"cannot read {path}: {err}")
    now = time.time()
    with journal:
        leases = journal.leases
        attempts = journal.attempts
        active = [
            {
                "work_id": w,
                "worker": x.owner,
                "updated": x.updated,
                "clock": x.clock,
                "age_seconds": (now - x.updated) if x.clock == UNIX else None,
            }
            for w, x in sorted(leases.items())
        ]
        torn = journal.torn_tail
        doc = {
            "path": str(path),
            "records": journal.record_count,
            "legacy_format_records": journal.legacy_record_count,
            "completed": len(journal.completed),
            "active": len(active),
            "legacy_leases": sum(1 for x in leases.values() if x.clock != UNIX),
            "work_ids_ever_leased": len(attempts),
            "attempts_total": sum(attempts.values()),
            "torn_tail_bytes": len(torn),
            "leases": active,
        }
    if args.json:
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    print(f"journal {path}")
    print(
        f"  {doc['records']} records ({doc['legacy_format_records']} in F314's original format), "
        f"{doc['completed']} completed, {doc['active']} active "
        f"({doc['legacy_leases']} legacy), {doc['attempts_total']} attempts over "
        f"{doc['work_ids_ever_leased']} work IDs"
    )
    if torn:
        print(
            f"  torn tail: {len(torn)} bytes after the last good record; they are moved to "
            f"{path}.broken before the next append"
        )
    for w, x in sorted(leases.items()):
        if x.clock == UNIX:
            age = f"age {now - x.updated:.1f} s"
            if x.updated > now:
                age += " (dated in the future)"
            domain = "unix"
        else:
            age = "age unknown"
            domain = f"legacy ({x.clock or 'untagged'}, reclaimed by the next recover)"
        print(f"  {w}  worker {x.owner}  {domain}  {age}")
    return EXIT_OK


def run_recover(args: argparse.Namespace) -> int:
    path: Path = args.path
    if (status := _missing(path)) is not None:
        return status
    try:
        with WorkLeaseJournal(path, create=False) as journal:
            gone = journal.recover(args.ttl)
    except (JournalError, OSError) as err:
        return _fail(str(err))
    for work_id in gone:
        print(work_id)
    print(f"reclaimed {len(gone)} lease(s)", file=sys.stderr)
    return EXIT_OK


def run_compact(args: argparse.Namespace) -> int:
    path: Path = args.path
    if (status := _missing(path)) is not None:
        return status
    try:
        with WorkLeaseJournal(path, create=False) as journal:
            before = journal.record_count
            journal.compact()
            after = journal.record_count
    except (JournalError, OSError) as err:
        return _fail(str(err))
    print(f"compacted {path}: {before} records -> {after}")
    return EXIT_OK


def run_repair(args: argparse.Namespace) -> int:
    path: Path = args.path
    if (status := _missing(path)) is not None:
        return status
    try:
        result = repair_journal(path)
    except (JournalError, OSError) as err:
        return _fail(str(err))
    if result.quarantine is None:
        print(f"{path}: all {result.kept} records are good; nothing to repair")
    else:
        print(
            f"repaired {path}: kept {result.kept} records, moved {result.quarantined} bad "
            f"line(s) to {result.quarantine}"
        )
    return EXIT_OK
