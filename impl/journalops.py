"""Operator tools for a work lease journal (``leasefence journal``): inspect, recover, compact and
repair, each printing what it did and returning the command's exit status."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leasefence.impl.errors import JournalError
from leasefence.impl.journal import LeaseRecord, WorkLeaseJournal, repair_journal, scan_file
from leasefence.impl.rules import UNIX

EXIT_OK = 0
EXIT_FAILED = 1


def _fail(message: str) -> int:
    print(f"leasefence journal: {message}", file=sys.stderr)
    return EXIT_FAILED


def _missing(path: Path) -> int | None:
    if not path.is_file():
        return _fail(f"no journal at {path}")
    return None


def inspect(path: Path, as_json: bool = False) -> int:
    """``journal inspect``: active leases, counts, legacy records and any torn tail, read-only
    (one JSON document with ``as_json``)."""
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
        doc = summary(journal, path, now)
        leases = journal.leases
    if as_json:
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    _print_summary(doc, leases, path, now)
    return EXIT_OK


def summary(journal: WorkLeaseJournal, path: Path, now: float) -> dict[str, Any]:
    """What ``journal inspect`` reports, as one JSON-ready document."""
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
    return {
        "path": str(path),
        "records": journal.record_count,
        "legacy_format_records": journal.legacy_record_count,
        "completed": len(journal.completed),
        "active": len(active),
        "legacy_leases": sum(1 for x in leases.values() if x.clock != UNIX),
        "work_ids_ever_leased": len(attempts),
        "attempts_total": sum(attempts.values()),
        "torn_tail_bytes": len(journal.torn_tail),
        "leases": active,
    }


def _print_summary(
    doc: dict[str, Any], leases: Mapping[str, LeaseRecord], path: Path, now: float
) -> None:
    print(f"journal {path}")
    print(
        f"  {doc['records']} records ({doc['legacy_format_records']} in F314's original format), "
        f"{doc['completed']} completed, {doc['active']} active "
        f"({doc['legacy_leases']} legacy), {doc['attempts_total']} attempts over "
        f"{doc['work_ids_ever_leased']} work IDs"
    )
    if doc["torn_tail_bytes"]:
        print(
            f"  torn tail: {doc['torn_tail_bytes']} bytes after the last good record; they are "
            f"moved to {path}.broken before the next append"
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


def recover(path: Path, ttl: float) -> int:
    """``journal recover``: reclaim expired, future-dated and legacy leases; print their IDs."""
    if (status := _missing(path)) is not None:
        return status
    try:
        with WorkLeaseJournal(path, create=False) as journal:
            gone = journal.recover(ttl)
    except (JournalError, OSError) as err:
        return _fail(str(err))
    for work_id in gone:
        print(work_id)
    print(f"reclaimed {len(gone)} lease(s)", file=sys.stderr)
    return EXIT_OK


def compact(path: Path) -> int:
    """``journal compact``: rewrite the journal as one record per work ID."""
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


def repair(path: Path) -> int:
    """``journal repair``: keep every good record, move bad lines to ``PATH.quarantine``."""
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
