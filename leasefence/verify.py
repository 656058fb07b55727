"""``leasefence verify``: run every layer of ``report.LAYERS`` and write one summary table.

It also holds the one layer that belongs to no lower package: lint/types (ruff and mypy).
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from leasefence.paths import ROOT
from leasefence.report import FAIL, LAYERS, PASS, Row, format_table

Layer = Callable[[bool], list[Row]]


def _tool(name: str) -> str:
    """A tool from this interpreter's virtualenv, else from PATH."""
    local = Path(sys.executable).with_name(name)
    return str(local) if local.exists() else (shutil.which(name) or name)


def layer_lint(deep: bool) -> list[Row]:
    """ruff check, ruff format --check and mypy --strict, as ``make test`` runs them."""
    rows = []
    root = ROOT
    for what, cmd in (
        ("ruff check", [_tool("ruff"), "check", "."]),
        ("ruff format --check", [_tool("ruff"), "format", "--check", "."]),
        ("mypy --strict", [_tool("mypy"), "leasefence"]),
    ):
        t = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True, check=False)
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        rows.append(
            Row(
                "lint/types",
                what,
                last[:60],
                PASS if proc.returncode == 0 else FAIL,
                time.perf_counter() - t,
                proc.stdout[-2000:] + proc.stderr[-2000:],
            )
        )
    return rows


def _layer(target: str) -> Layer:
    """The layer function a ``"module:function"`` entry of ``report.LAYERS`` names."""
    module, _, name = target.partition(":")
    fn: Layer = getattr(importlib.import_module(module), name)
    return fn


def run_verify(deep: bool = False, reports: str = "reports") -> int:
    """Run every layer, print the table, write reports/verify.{md,json}; 0 when all pass."""
    rows: list[Row] = []
    start = time.perf_counter()
    for name, target in LAYERS:
        print(f"[verify] {name} ...", flush=True)
        t = time.perf_counter()
        try:
            got = _layer(target)(deep)
        except Exception as exc:  # a crashing layer is a failed layer, reported, not hidden
            got = [
                Row(
                    name,
                    "(crashed)",
                    f"{type(exc).__name__}: {exc}"[:80],
                    FAIL,
                    time.perf_counter() - t,
                )
            ]
        for row in got:
            print(
                f"[verify]   {row.ran}: {row.result} ({row.figures}) {row.seconds:.1f} s",
                flush=True,
            )
        rows.extend(got)
    total = time.perf_counter() - start
    table = format_table(rows, total)
    print(table)
    out = Path(reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "verify.md").write_text("# leasefence verify\n\n" + table + "\n")
    doc = {"deep": deep, "seconds": round(total, 2), "rows": [asdict(r) for r in rows]}
    (out / "verify.json").write_text(json.dumps(doc, indent=2) + "\n")
    failed = [r for r in rows if r.result == FAIL]
    for r in failed:
        print(f"\nFAILED {r.layer} / {r.ran}:\n{r.detail.strip()}")
    return 1 if failed else 0
