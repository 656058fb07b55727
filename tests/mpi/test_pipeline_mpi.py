"""Real ``mpiexec`` jobs at pipeline depth 2 (issue 12): with late and duplicated results, fenced
by (rank, dispatch generation), every item completes exactly once and no completion is
accepted from anyone but the owner token of the lease it ends."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from leasefence.conformance.tracecheck import validate
from leasefence.impl.workload import generate

pytestmark = pytest.mark.mpi

BIN = Path(sys.executable).parent
TIMEOUT = 240


def test_mpiexec_pipeline_two_with_late_and_duplicated_results(tmp_path: Path) -> None:
    work = 40
    journal = tmp_path / "journal.jsonl"
    cmd = [
        str(BIN / "mpiexec"),
        "-n",
        "3",
        str(BIN / "leasefence"),
        "run",
        "--pipeline",
        "2",
        "--inject",
        "late,dup",
        "--worker",
        "trivial",
        "--work",
        str(work),
        "--ttl",
        "0.5",
        "--journal",
        str(journal),
        "--snapshot",
        str(tmp_path / "snapshot.json"),
        "--trace",
        str(tmp_path / "trace.ndjson"),
    ]
    proc = subprocess.run(
        cmd, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "pipeline 2 (generation fence)" in proc.stderr
    assert re.search(r"duplicate completions\s+0\b", proc.stdout), proc.stdout
    done: Counter[str] = Counter()
    owner: dict[str, tuple[object, object]] = {}
    wrong_owner_commits = 0
    generations = set()
    for line in journal.read_text().splitlines():
        rec = json.loads(line)
        token = (rec.get("worker"), rec.get("generation"))
        if rec["event"] == "lease":
            assert rec.get("generation") is not None  # every lease carries the whole token
            generations.add((rec["worker"], *rec["generation"]))
            owner[rec["work_id"]] = token
            continue
        if rec["event"] == "done":
            done[rec["work_id"]] += 1
        if rec.get("worker") is not None:
            wrong_owner_commits += owner.pop(rec["work_id"], token) != token
    assert set(done) == {i.work_id for i in generate(work, seed=0)}
    assert set(done.values()) == {1}  # 0 duplicate completions, on disk
    assert wrong_owner_commits == 0
    assert len(generations) >= work  # one token per dispatch, never reused
    # The real run's trace replays through the model at depth 2, generation by generation.
    report = validate((tmp_path / "trace.ndjson").read_text().splitlines())
    assert report.ok, f"line {report.line}: {report.divergence}"
    assert report.counts["DispatchWork"] >= work
