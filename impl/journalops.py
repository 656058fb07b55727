"""Operator tools for a work lease journal (``leasefence journal``): inspect, recover, compact and
repair, each printing what it did and returning the command's exit status.

Exit status: 0 done; 1 refused (locked, corrupt, read-only, missing file); 2 a PATH that is not a
journal leasefence may open (``NotAJournal``, or a link or non-regular file: ``UnsafePath``).
Text from the file (a record's fields, the path) is printed with control characters escaped.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from leasefence.impl.errors import JournalError, NotAJournal, UnsafePath
from leasefence.impl.journal import LeaseRecord, WorkLeaseJournal, repair_journal, scan_file
from leasefence.impl.rules import UNIX

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_NOT_A_JOURNAL = 2


def printable(text: str) -> str:
    """``text`` with every character that is not printable (terminal control sequences, other
    control and format characters) written as its Python escape, e.g. ESC as ``\\x1b``."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _fail(message: str) -> int:
    shown = "\n".join(printable(line) for line in message.split("\n"))
    print(f"leasefence journal: {shown}", file=sys.stderr)
    return EXIT_FAILED


def _refused(err: Exception) -> int:
    """Report an open or write that failed; exit 2 when PATH is not a journal to open."""
    status = _fail(str(err))
    return EXIT_NOT_A_JOURNAL if isinstance(err, NotAJournal | UnsafePath) else status


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
    except (NotAJournal, UnsafePath) as err:
        return _refused(err)
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
        "torn_tail_lines": [{"line": b.line, "reason": b.reason} for b in journal.torn_lines],
        "leases": active,
    }


def _print_summary(
    doc: dict[str, Any], leases: Mapping[str, LeaseRecord], path: Path, now: float
) -> None:
    print(f"journal {printable(str(path))}")
    print(
        f"  {doc['records']} records ({doc['legacy_format_records']} in F314's original format), "
        f"{doc['completed']} completed, {doc['active']} active "
        f"({doc['legacy_leases']} legacy), {doc['attempts_total']} attempts over "
        f"{doc['work_ids_ever_leased']} work IDs"
    )
    if doc["torn_tail_bytes"]:
        print(
            f"  torn tail: {doc['torn_tail_bytes']} bytes after the last good record; they are "
            f"moved to {printable(str(path))}.broken before the next append"
        )
        for bad in doc["torn_tail_lines"]:
            print(f"    line {bad['line']}: {printable(bad['reason'])}")
    for w, x in sorted(leases.items()):
        if x.clock == UNIX:
            age = f"age {now - x.updated:.1f} s"
            if x.updated > now:
                age += " (dated in the future)"
            domain = "unix"
        else:
            age = "age unknown"
            domain = f"legacy ({printable(x.clock or 'untagged')}, reclaimed by the next recover)"
        print(f"  {w}  worker {x.owner}  {domain}  {age}")


def recover(path: Path, ttl: float) -> int:
    """``journal recover``: reclaim expired, future-dated and legacy leases; print their IDs."""
    if (status := _missing(path)) is not None:
        return status
    try:
        with WorkLeaseJournal(path, create=False) as journal:
            gone = journal.recover(ttl)
    except (JournalError, OSError) as err:
        return _refused(err)
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
        return _refused(err)
    print(f"compacted {printable(str(path))}: {before} records -> {after}")
    return EXIT_OK


def repair(path: Path) -> int:
    """``journal repair``: keep every good record, move bad lines to ``PATH.quarantine``."""
    if (status := _missing(path)) is not None:
        return status
    try:
        result = repair_journal(path)
    except (JournalError, OSError) as err:
        return _refused(err)
    if result.quarantine is None:
        print(f"{printable(str(path))}: all {result.kept} records are good; nothing to repair")
    else:
        print(
            f"repaired {printable(str(path))}: kept {result.kept} records, moved {result.quarantined} bad "
            f"line(s) to {printable(str(result.quarantine))}"
        )
    return EXIT_OK
