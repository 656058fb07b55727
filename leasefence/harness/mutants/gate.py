"""The mutant gate: copy the source tree, plant one mutant of the catalogue, run each test layer
against the copy, and tabulate which layers caught which mutant (``leasefence verify --mutants``).

Each mutant is applied to a temporary copy of the source tree, never a flag in the real code.
``run_gate`` runs each layer in a subprocess that imports the copy (``PYTHONPATH`` first), and a
mutant is *caught* by a layer when that layer's tests fail.
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

from leasefence.harness.mutants.catalogue import CATALOGUE, Mutant
from leasefence.paths import ROOT

#: What is copied for a mutant run: the whole leasefence/ package with its subpackages (symlinks
#: kept, so leasefence/impl points into the copy), the protocol folders, and the tests with what
#: they read (tests/scenarios, docs/journal-format.md, tla/).
COPIED = ("leasefence", "model", "impl", "conformance", "tests", "tla", "docs", "pyproject.toml")


@dataclass(frozen=True)
class GateLayer:
    """A layer of the gate: the pytest arguments that run it against a mutated copy."""

    name: str
    pytest_args: tuple[str, ...]


@dataclass
class MutantResult:
    """One mutant's run: which layers caught it, and the layers that could not run (why)."""

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
    for old, new in mutant.patches:
        count = text.count(old)
        if count != 1:
            raise StaleMutant(
                f"mutant {mutant.name}: the text to replace occurs {count} times in "
                f"{mutant.path} (expected exactly once); update the catalogue in "
                f"leasefence/harness/mutants/catalogue.py"
            )
        text = text.replace(old, new)
    try:
        compile(text, str(target), "exec")
    except SyntaxError as err:
        raise StaleMutant(
            f"mutant {mutant.name}: the patched {mutant.path} does not compile ({err}); a mutant "
            f"must be a bug the tests can catch, not a file Python cannot import"
        ) from None
    target.write_text(text)


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


#: The layers of the gate, each the tests of one verification layer (present ones only run).
GATE_LAYERS: tuple[GateLayer, ...] = (
    GateLayer(
        "unit",
        (
            "tests/unit/test_journal.py",
            "tests/unit/test_journal_stamps.py",
            "tests/unit/test_coordinator.py",
            "tests/unit/test_coordinator_log.py",
            "tests/unit/test_fast_paths.py",
            "tests/unit/test_master.py",
            "tests/unit/test_pipeline.py",
            "tests/unit/test_scenarios.py",
            "tests/unit/test_hostile_workers.py",
            "tests/unit/test_starvation.py",
        ),
    ),
    GateLayer("conformance", ("tests/conformance", "-m", "conformance and not mpi")),
    GateLayer("crash", ("tests/unit/test_crashcheck.py", "-m", "not slow")),
    # Issue 20: the generated transition tests alone, and the checkers' tests of themselves.
    # The CI-bounds replay (about 1.5 min on two idle CPUs) is left out: the quick bounds with
    # the refusal probes judge each mutant.
    GateLayer(
        "transitions",
        ("tests/conformance/test_transitions.py", "-m", "not slow", "-k", "not ci_bounds"),
    ),
    GateLayer("checkers", ("tests/unit/test_checkers_bite.py",)),
)


def available_layers(root: Path = ROOT) -> tuple[GateLayer, ...]:
    """The gate layers whose test files exist, each narrowed to the paths that exist."""
    out = []
    for layer in GATE_LAYERS:
        paths = [a for a in layer.pytest_args if a.startswith("tests/") and (root / a).exists()]
        if not paths:
            continue
        rest = tuple(a for a in layer.pytest_args if not a.startswith("tests/"))
        out.append(GateLayer(layer.name, (*paths, *rest)))
    return tuple(out)


def baseline(layers: Sequence[GateLayer]) -> dict[str, str]:
    """Run every layer on an unmutated copy; a layer that fails there proves nothing (name -> why)."""
    broken = {}
    with tempfile.TemporaryDirectory(prefix="leasefence-baseline-") as tmp:
        tree = Path(tmp)
        copy_tree(tree)
        for layer in layers:
            try:
                failed, out = run_layer(tree, layer)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                failed, out = True, str(exc)
            if failed:
                broken[layer.name] = out[-1500:]
    return broken


def run_mutants(reports: str) -> int:
    """``leasefence verify --mutants``: a baseline run of every layer, then the whole catalogue
    against every layer; prints and writes ``<reports>/mutants.md``; 1 if a mutant survived."""
    layers = available_layers()
    names = ", ".join(layer.name for layer in layers)
    print(f"[mutants] layers: {names}; baseline run without any mutant ...", flush=True)
    broken = baseline(layers)
    if broken:
        for name, why in broken.items():
            print(f"[mutants] layer {name} fails WITHOUT any mutant; fix it first:\n{why}")
        return 1
    results = run_gate(
        CATALOGUE, layers, progress=lambda line: print(f"[mutants] {line}", flush=True)
    )
    table = format_table(results, layers)
    print(table)
    out = Path(reports)
    out.mkdir(parents=True, exist_ok=True)
    (out / "mutants.md").write_text("# leasefence verify --mutants\n\n" + table + "\n")
    survivors = [r.mutant.name for r in results if not r.caught]
    summary = f"{len(results) - len(survivors)}/{len(results)} mutants caught"
    print(summary + (f"; SURVIVED: {', '.join(survivors)}" if survivors else ""))
    return 1 if survivors else 0
