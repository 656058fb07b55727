"""``leasefence journal``: operator tools for a work lease journal (inspect, recover, compact, repair)."""

from __future__ import annotations

import argparse
from pathlib import Path

from leasefence.impl import journalops
from leasefence.impl.errors import InvalidTtl
from leasefence.impl.rules import check_ttl


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
        "file, read-only), 2 bad usage or a PATH that is not a journal (no good record and not "
        "a torn first write) or is a symbolic link: such a file is never changed."
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


def run_inspect(args: argparse.Namespace) -> int:
    return journalops.inspect(args.path, args.json)


def run_recover(args: argparse.Namespace) -> int:
    return journalops.recover(args.path, args.ttl)


def run_compact(args: argparse.Namespace) -> int:
    return journalops.compact(args.path)


def run_repair(args: argparse.Namespace) -> int:
    return journalops.repair(args.path)
