"""CrossHair finds broken contracts and impl/model differences, and finds none in the real code."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leasefence.conformance.contracts import check_contracts, diff_twins

ROOT = Path(__file__).resolve().parents[2]


def test_the_model_contracts_hold_under_crosshair() -> None:
    # A small budget here; `leasefence verify` gives CrossHair more time.
    ok, text = check_contracts(per_condition=2.0, files=("model/rules.py",))
    assert ok, text


@pytest.mark.slow  # about a minute; `leasefence verify` runs it every time
def test_each_implementation_decision_behaves_like_its_model_twin() -> None:
    results = diff_twins(iterations=8)
    assert len(results) >= 2
    for name, same, text in results:
        assert same, f"{name}: {text}"


@pytest.mark.slow  # about a minute; `leasefence verify` runs diffbehavior every time
def test_crosshair_reports_a_planted_difference(tmp_path: Path) -> None:
    # Copy the sources, drop the future-dated rule from the implementation's recovery rule,
    # and ask CrossHair to compare it with the model's: it must find an input that differs.
    for name in ("leasefence", "model", "impl", "conformance"):
        shutil.copytree(ROOT / name, tmp_path / name, symlinks=True)
    rules = tmp_path / "impl" / "rules.py"
    text = rules.read_text()
    assert "    if updated - now > ttl:\n        return True\n" in text
    rules.write_text(text.replace("    if updated - now > ttl:\n        return True\n", ""))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosshair",
            "diffbehavior",
            "--max_uninteresting_iterations=8",
            "leasefence.conformance.twins.impl_reclaimable",
            "leasefence.conformance.twins.model_reclaimable",
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "returns" in proc.stdout


@pytest.mark.parametrize("contract", ["post: __return__ is None"])
def test_crosshair_reports_a_planted_broken_contract(tmp_path: Path, contract: str) -> None:
    src = (ROOT / "model" / "rules.py").read_text()
    marker = "    post: active is not None or __return__ == reported\n"
    assert marker in src
    for name in ("leasefence", "model", "impl", "conformance"):
        shutil.copytree(ROOT / name, tmp_path / name, symlinks=True)
    (tmp_path / "model" / "rules.py").write_text(src.replace(marker, marker + f"    {contract}\n"))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crosshair",
            "check",
            "--analysis_kind=PEP316",
            "--per_condition_timeout=3",
            str(tmp_path / "model" / "rules.py"),
        ],
        cwd=tmp_path,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode != 0
    assert "false when calling authoritative_state_task" in proc.stdout
