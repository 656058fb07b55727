"""Planted bugs (mutants) of ``impl/`` and the gate that proves every layer can catch them.

Each mutant is a small named patch (one exact text replaced in one file) applied to a temporary
copy of the source tree, never a flag in the real code. ``run_gate`` runs each verification layer
against each mutant in a subprocess that imports the copy (``PYTHONPATH`` first), and a mutant is
*caught* by a layer when that layer's tests fail. A catalogue entry whose text no longer occurs
exactly once in its file is an error, not a silent pass: the catalogue must follow the code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: What is copied for a mutant run (symlinks kept, so leasefence/impl points into the copy).
COPIED = ("leasefence", "model", "impl", "conformance", "tests", "tla", "pyproject.toml")


@dataclass(frozen=True)
class Mutant:
    """One planted bug: replace ``old`` by ``new`` in ``path``; it breaks ``breaks``."""

    name: str
    path: str
    old: str
    new: str
    breaks: str
    f314_defect: int | None = None


@dataclass(frozen=True)
class GateLayer:
    """A layer of the gate: the pytest arguments that run it against a mutated copy."""

    name: str
    pytest_args: tuple[str, ...]


@dataclass
class MutantResult:
    mutant: Mutant
    caught_by: dict[str, bool] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def caught(self) -> bool:
        return any(self.caught_by.values())


class StaleMutant(RuntimeError):
    """A catalogue entry whose text does not occur exactly once in its file."""


def apply(mutant: Mutant, tree: Path) -> None:
    """Patch ``tree`` (a copy of the sources) with ``mutant``."""
    target = tree / mutant.path
    text = target.read_text()
    count = text.count(mutant.old)
    if count != 1:
        raise StaleMutant(
            f"mutant {mutant.name}: the text to replace occurs {count} times in {mutant.path} "
            f"(expected exactly once); update the catalogue in leasefence/mutants.py"
        )
    target.write_text(text.replace(mutant.old, mutant.new))


def copy_tree(dest: Path) -> None:
    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(
                src,
                dest / name,
                symlinks=True,
                ignore=shutil.ignore_patterns("__pycache__", ".hypothesis", "states"),
            )
        elif src.exists():
            shutil.copy2(src, dest / name)


def run_layer(tree: Path, layer: GateLayer, timeout: float = 600) -> tuple[bool, str]:
    """Run one layer's tests against ``tree``; (caught, output tail). Exit 1 = tests failed."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("HYPOTHESIS_PROFILE", "ci")
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-x",
        "-q",
        "-p",
        "no:cacheprovider",
        "--hypothesis-seed=20261130",
        *layer.pytest_args,
    ]
    proc = subprocess.run(
        cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    out = (proc.stdout + proc.stderr)[-3000:]
    if proc.returncode == 1:
        return True, out
    if proc.returncode == 0:
        return False, out
    raise RuntimeError(f"layer {layer.name} could not run (pytest exit {proc.returncode}):\n{out}")


def run_gate(
    mutants: Sequence[Mutant],
    layers: Sequence[GateLayer],
    progress: Callable[[str], None] | None = None,
) -> list[MutantResult]:
    """Every mutant against every layer; each layer is run even after an earlier one caught it."""
    results = []
    for mutant in mutants:
        res = MutantResult(mutant)
        with tempfile.TemporaryDirectory(prefix=f"leasefence-mutant-{mutant.name}-") as tmp:
            tree = Path(tmp)
            copy_tree(tree)
            apply(mutant, tree)
            for layer in layers:
                try:
                    caught, _ = run_layer(tree, layer)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    res.errors[layer.name] = str(exc)[-500:]
                    caught = False
                res.caught_by[layer.name] = caught
                if progress is not None:
                    progress(f"{mutant.name} x {layer.name}: {'caught' if caught else 'missed'}")
        results.append(res)
    return results


def format_table(results: Sequence[MutantResult], layers: Sequence[GateLayer]) -> str:
    head = ["mutant", "breaks", *[layer.name for layer in layers], "verdict"]
    rows = []
    for r in results:
        cells = ["caught" if r.caught_by.get(layer.name) else "missed" for layer in layers]
        rows.append([r.mutant.name, r.mutant.breaks, *cells, "CAUGHT" if r.caught else "SURVIVED"])
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=False)]
    fmt = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    lines = [fmt.format(*head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt.format(*row) for row in rows]
    return "\n".join(lines)


#: The catalogue. F314's four defects first; each entry names what it breaks.
CATALOGUE: list[Mutant] = []
