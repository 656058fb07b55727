"""CrossHair over the model's contracts and over each implementation decision and its model twin.

``crosshair check`` searches for an input that breaks a PEP 316 contract in the model's pure
functions (the recovery rule, the authoritative-ID choice, lease admission); ``crosshair
diffbehavior`` searches for an input on which an implementation decision function and its model
twin (``leasefence.conformance.twins``) disagree. Both run with a time budget: finding nothing
within it is a bounded result, reported with the budget, not a proof.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Model files whose functions carry PEP 316 contracts.
CONTRACT_FILES = ("model/rules.py", "model/journal.py")


def _crosshair() -> list[str]:
    return [sys.executable, "-m", "crosshair"]


def check_contracts(
    per_condition: float = 5.0, files: tuple[str, ...] = CONTRACT_FILES
) -> tuple[bool, str]:
    """``crosshair check`` on the model's contracts in ``files``; (ok, output)."""
    cmd = [
        *_crosshair(),
        "check",
        "--analysis_kind=PEP316",
        f"--per_condition_timeout={per_condition}",
        *[str(ROOT / f) for f in files],
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    return proc.returncode == 0, (proc.stdout + proc.stderr).strip()


def diff_twins(iterations: int = 60) -> list[tuple[str, bool, str]]:
    """``crosshair diffbehavior`` on every (implementation, model) pair; (pair, same, output)."""
    from leasefence.conformance.twins import PAIRS

    out = []
    for impl_fn, model_fn in PAIRS:
        cmd = [
            *_crosshair(),
            "diffbehavior",
            f"--max_uninteresting_iterations={iterations}",
            impl_fn,
            model_fn,
        ]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
        text = (proc.stdout + proc.stderr).strip()
        out.append((impl_fn.rsplit(".", 1)[-1], proc.returncode == 0, text))
    return out


def verify_rows(deep: bool) -> list[Any]:
    """The ``verify`` rows: one for the contracts, one per twin pair."""
    from leasefence.report import FAIL, PASS, Row

    rows = []
    t = time.perf_counter()
    ok, text = check_contracts(per_condition=20.0 if deep else 5.0)
    rows.append(
        Row(
            "crosshair",
            "check: model contracts",
            f"{', '.join(CONTRACT_FILES)}; {'no counterexample' if ok else 'counterexample'}",
            PASS if ok else FAIL,
            time.perf_counter() - t,
            text,
        )
    )
    t = time.perf_counter()
    diffs = diff_twins(iterations=300 if deep else 20)
    each = (time.perf_counter() - t) / max(len(diffs), 1)
    for name, same, text in diffs:
        rows.append(
            Row(
                "crosshair",
                f"diffbehavior: {name}",
                "no difference found" if same else "impl and model differ",
                PASS if same else FAIL,
                each,
                text,
            )
        )
    return rows
