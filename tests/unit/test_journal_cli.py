"""``leasefence journal``: inspect, recover, compact and repair, with their exit statuses."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from leasefence.cli import main
from leasefence.impl.journal import WorkLeaseJournal, legacy_lease_line

A = "a" * 64
B = "b" * 64
C = "c" * 64


@pytest.fixture
def path(tmp_path: Path) -> Path:
    p = tmp_path / ".work_leases.jsonl"
    p.write_bytes(legacy_lease_line(C, 9, 123.5))
    now = time.time()
    with WorkLeaseJournal(p, clock=lambda: now - 30) as j:
        j.lease(A, 1)
        j.lease(B, 2)
        j.complete(B, 2)
    return p


def test_inspect_shows_active_leases_with_owner_clock_domain_age_and_counts(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["journal", "inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "4 records (1 in F314's original format), 1 completed, 2 active (1 legacy)" in out
    assert re.search(rf"{A}  worker 1  unix  age \d+\.\d s\n", out)
    assert f"{C}  worker 9  legacy (untagged, reclaimed by the next recover)  age unknown" in out
    assert "torn tail" not in out


def test_inspect_json_is_one_machine_readable_document(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["journal", "inspect", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["records"] == 4
    assert doc["legacy_format_records"] == 1
    assert doc["completed"] == 1
    assert doc["attempts_total"] == 3
    assert doc["torn_tail_bytes"] == 0
    by_id = {lease["work_id"]: lease for lease in doc["leases"]}
    assert by_id[A]["worker"] == 1
    assert by_id[A]["clock"] == "unix"
    assert by_id[A]["age_seconds"] >= 29
    assert by_id[C]["clock"] is None
    assert by_id[C]["age_seconds"] is None


def test_inspect_reports_a_torn_tail_without_cutting_it_even_while_a_writer_holds_the_lock(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with path.open("ab") as f:
        f.write(b'{"event":"lea')
    before = path.read_bytes()
    with WorkLeaseJournal(path):
        assert main(["journal", "inspect", str(path)]) == 0
    assert "torn tail: 13 bytes" in capsys.readouterr().out
    assert path.read_bytes() == before


def test_inspect_of_a_corrupt_journal_exits_1_naming_the_bad_line(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = path.read_bytes().splitlines(keepends=True)
    rows[1] = b"not json\n"
    path.write_bytes(b"".join(rows))
    assert main(["journal", "inspect", str(path)]) == 1
    err = capsys.readouterr().err
    assert "is corrupt: line 2" in err
    assert "journal repair" in err


def test_recover_prints_the_reclaimed_ids_and_appends_reclaim_records(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["journal", "recover", str(path), "--ttl", "3600"]) == 0
    assert capsys.readouterr().out.split() == [C]  # only the legacy lease
    assert main(["journal", "recover", str(path), "--ttl", "0"]) == 0
    assert capsys.readouterr().out.split() == [A]
    with WorkLeaseJournal.open_readonly(path) as j:
        assert j.leases == {}


@pytest.mark.parametrize("ttl", ["-1", "nan", "inf", "soon"])
def test_recover_with_a_bad_ttl_is_a_usage_error(
    path: Path, ttl: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["journal", "recover", str(path), "--ttl", ttl])
    assert info.value.code == 2
    assert "--ttl wants a finite number of seconds >= 0" in capsys.readouterr().err


def test_recover_is_refused_while_another_writer_holds_the_journal(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with WorkLeaseJournal(path):
        assert main(["journal", "recover", str(path), "--ttl", "0"]) == 1
    assert "locked by another writer" in capsys.readouterr().err


def test_compact_rewrites_one_record_per_work_id(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["journal", "compact", str(path)]) == 0
    assert "4 records -> 3" in capsys.readouterr().out
    with WorkLeaseJournal.open_readonly(path) as j:
        assert j.leases[C].clock is None
        assert j.leases[A].clock == "unix"
        assert j.completed == {B}


def test_repair_keeps_good_records_and_moves_bad_lines_to_quarantine(
    path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = path.read_bytes().splitlines(keepends=True)
    bad = b'{"event":"lease","work_id":"xyz"}\n'
    path.write_bytes(rows[0] + bad + b"".join(rows[1:]) + b"\x00\x00")
    assert main(["journal", "repair", str(path)]) == 0
    assert "kept 4 records, moved 2 bad line(s)" in capsys.readouterr().out
    assert path.read_bytes() == b"".join(rows)
    quarantine = path.with_name(path.name + ".quarantine").read_bytes()
    assert b"line 2: work_id is not 64 hexadecimal characters\n" + bad in quarantine
    assert b"line 6: not a JSON line\n\x00\x00\n" in quarantine
    with WorkLeaseJournal(path) as j:
        assert j.record_count == 4
    assert main(["journal", "repair", str(path)]) == 0
    assert "nothing to repair" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["inspect", "compact", "repair"])
def test_a_missing_journal_exits_1_and_is_not_created(
    tmp_path: Path, command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.jsonl"
    assert main(["journal", command, str(missing)]) == 1
    assert f"no journal at {missing}" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_journal_without_a_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["journal"])
    assert info.value.code == 2
