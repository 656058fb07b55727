"""The ``conformance`` layer of ``leasefence verify``: every machine (``coverage.REQUIRED``: the
journal, coordinator, master and system machines, and the master and system at pipeline depth 2)
in the ``ci`` profile
(``--deep``: the ``deep`` profile), with the steps executed and the required cases covered.

It runs ``pytest -m conformance tests/conformance`` in a child process (the profiles live in
``tests/conftest.py``) with a fixed seed, and reads the coverage counts the child writes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from leasefence.conformance.coverage import REQUIRED

SEED = "20261130"


def layer_conformance(deep: bool) -> list[Any]:
    from leasefence.report import FAIL, PASS, Row

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "coverage.json"
        env = {
            **os.environ,
            "CI": "true",
            "HYPOTHESIS_PROFILE": "deep" if deep else "ci",
            "LEASEFENCE_COVERAGE_JSON": str(out),
        }
        cmd = [sys.executable, "-m", "pytest", "-m", "conformance", "tests/conformance", "-q"]
        cmd += ["-p", "no:cacheprovider", f"--hypothesis-seed={SEED}"]
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
        seconds = time.perf_counter() - t
        counts: dict[str, Any] = json.loads(out.read_text()) if out.exists() else {}
    rows = []
    for machine in REQUIRED:
        got = counts.get(machine)
        if got is None:
            rows.append(Row("conformance", f"{machine} machine", "did not run", FAIL, 0.0))
            continue
        done, total = got["covered"]
        figures = f"{got['examples']} examples, {got['steps']:,} steps, {done}/{total} cases"
        ok = proc.returncode == 0 and not got["missing"]
        detail = ", ".join(got["missing"]) + "\n" + proc.stdout[-3000:] + proc.stderr[-1000:]
        rows.append(
            Row(
                "conformance",
                f"{machine} machine",
                figures,
                PASS if ok else FAIL,
                seconds / len(REQUIRED),
                detail,
            )
        )
    return rows
