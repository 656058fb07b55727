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
from typing import Any

from leasefence.paths import ROOT

# (ROOT: the source checkout, from leasefence.paths)
#: What is copied for a mutant run (symlinks kept, so leasefence/impl points into the copy).
COPIED = ("leasefence", "model", "impl", "conformance", "tests", "tla", "docs", "pyproject.toml")


@dataclass(frozen=True)
class Mutant:
    """One planted bug: in ``path``, each ``(old, new)`` of ``patches``; it breaks ``breaks``."""

    name: str
    path: str
    patches: tuple[tuple[str, str], ...]
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
    for old, new in mutant.patches:
        count = text.count(old)
        if count != 1:
            raise StaleMutant(
                f"mutant {mutant.name}: the text to replace occurs {count} times in "
                f"{mutant.path} (expected exactly once); update the catalogue in "
                f"leasefence/harness/mutants.py"
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


J, C, M, R = "impl/journal.py", "impl/coordinator.py", "impl/master.py", "impl/rules.py"

#: The catalogue. F314's four defects first; each entry names what it breaks.
CATALOGUE: tuple[Mutant, ...] = (
    Mutant(
        "f314-1-duplicate-owner",
        J,
        (
            (
                "if work_id in self._completed or work_id in self._leases:\n            return False",
                "if work_id in self._completed:\n            return False",
            ),
        ),
        "L1/L3: a second worker's lease of active work is granted and overwrites the owner",
        f314_defect=1,
    ),
    Mutant(
        "f314-2-state-lease-overwrite",
        C,
        (
            (
                "        if self._active(task_id) is not None:\n            return False\n",
                "",
            ),
        ),
        "L1: a second worker takes an active state task",
        f314_defect=2,
    ),
    Mutant(
        "f314-3-monotonic-time-persisted",
        J,
        (
            (
                "now = self._now()\n        attempt = self._attempts.get(work_id, 0) + 1",
                "now = time.monotonic()\n        attempt = self._attempts.get(work_id, 0) + 1",
            ),
            (
                '            "clock": UNIX,\n            "attempt": attempt,\n',
                '            "attempt": attempt,\n',
            ),
            (
                "self._leases[work_id] = LeaseRecord(worker, now, UNIX, generation)",
                "self._leases[work_id] = LeaseRecord(worker, now, None, generation)",
            ),
        ),
        "L4: leases stamped with monotonic time and no clock tag",
        f314_defect=3,
    ),
    Mutant(
        "f314-4-reported-id-wins",
        R,
        (
            (
                "return active if active is not None else reported",
                "return reported if reported is not None else active",
            ),
        ),
        "L7: the worker-reported state ID overrides the master's stored one",
        f314_defect=4,
    ),
    Mutant(
        "journal-complete-unfenced",
        J,
        (
            (
                "if worker is not None and (held is None or not _owns(held, worker, generation)):\n            return False",
                "if False:\n            return False",
            ),
        ),
        "L2: a late completion by a former owner completes the current owner's lease",
    ),
    Mutant(
        "rollback-deletes-other-owner",
        J,
        (
            (
                "if held is None or (worker is not None and not _owns(held, worker, generation)):",
                "if held is None:",
            ),
        ),
        "L2: abandon by another worker deletes the current owner's record",
    ),
    Mutant(
        "state-release-unfenced",
        C,
        (
            (
                "if lease is None or (lease.owner, lease.generation) != (worker, generation):",
                "if lease is None:",
            ),
        ),
        "L2: complete/abandon/discard of a state task by a worker that does not own it",
    ),
    Mutant(
        "compaction-relabels-clock",
        J,
        (
            (
                'if held.clock is not None:\n                    body["clock"] = held.clock',
                'body["clock"] = UNIX',
            ),
        ),
        "L5: compaction relabels a legacy monotonic value as Unix time",
    ),
    Mutant(
        "recovery-ignores-legacy",
        R,
        (("    if clock != UNIX:\n        return True\n", ""),),
        "L5: a legacy record is reclaimed only by the Unix rule, so a future one stays stuck",
    ),
    Mutant(
        "no-future-dated-rule",
        R,
        (("    if updated - now > ttl:\n        return True\n", ""),),
        "NoStuckLease: a lease dated in the future after a rollback is never reclaimed",
    ),
    Mutant(
        "reject-dispatch-wrong-order",
        M,
        (("undone = tuple(reversed(taken))", "undone = tuple(taken)"),),
        "F313: RejectDispatch undoes the steps taken in reverse order",
    ),
    Mutant(
        "reject-dispatch-forgets-work-lease",
        M,
        (
            (
                '            if step == "lease_work":\n                self.journal.abandon(item.work_id, worker=rank, **_kw(generation))',
                '            if step == "lease_work":\n                pass',
            ),
        ),
        "L3/L1: a rejected dispatch leaves its work lease held",
    ),
    Mutant(
        "completion-without-source-rank",
        M,
        (
            (
                "work_ok = self.journal.complete(work_id, worker=rank, **_kw(gen))",
                "work_ok = self.journal.complete(work_id, **_kw(gen))",
            ),
        ),
        "L2: completion is not fenced by the MPI source rank",
    ),
    Mutant(
        "stale-result-accepted",
        M,
        (("disp is None and len(mine) >= self.pipeline", "False"),),
        "L7/L2: a result for another work than the rank's dispatch is settled, not refused",
    ),
    Mutant(
        "snapshot-keeps-ownership",
        C,
        (
            (
                "owner=x.owner, updated=0.0, epoch=x.epoch, generation=x.generation",
                "owner=x.owner, updated=x.updated, epoch=loaded.epoch + 1, generation=x.generation",
            ),
        ),
        "L6: after a restart old ranks keep ownership of state tasks",
    ),
    Mutant(
        "torn-tail-read-as-corruption",
        J,
        (
            (
                "    scan.good_end = scan.bad[0].offset if scan.bad else len(data)",
                "    scan.corrupt = bool(scan.bad)\n    scan.good_end = scan.bad[0].offset if scan.bad else len(data)",
            ),
        ),
        "durability: a crash mid-append makes the journal unopenable",
    ),
    Mutant(
        "corruption-read-as-torn-tail",
        J,
        (
            (
                "            if scan.bad:\n                scan.corrupt = True",
                "            if scan.bad:\n                scan.corrupt = False",
            ),
        ),
        "durability: a corrupt middle record silently drops every record after it",
    ),
    Mutant(
        "ack-before-fsync",
        J,
        (
            (
                "            _write_all(self._fd, data)\n            os.fsync(self._fd)",
                "            _write_all(self._fd, data)",
            ),
        ),
        "durability: a call is acknowledged before its record is fsynced",
    ),
    # Issue 12: pipelined dispatch is safe only with the whole owner token (rank, generation).
    Mutant(
        "journal-fence-ignores-generation",
        J,
        (
            (
                "return held.owner == worker and held.generation == generation",
                "return held.owner == worker",
            ),
        ),
        "L2 at depth 2: a result of an older generation completes the rank's newer work lease",
    ),
    Mutant(
        "state-fence-ignores-generation",
        C,
        (
            (
                "if lease is None or (lease.owner, lease.generation) != (worker, generation):",
                "if lease is None or lease.owner != worker:",
            ),
        ),
        "L2 at depth 2: a forgotten dispatch's result commits the state task of a newer one",
    ),
    Mutant(
        "result-found-by-work-id",
        M,
        (("        if presented is not None:", "        if False:"),),
        "L2 at depth 2: a late result is matched to the rank's newer dispatch of the same work",
    ),
    Mutant(
        "generation-without-epoch",
        M,
        (
            (
                "return (self._epoch(), self._generations[rank])",
                "return (1, self._generations[rank])",
            ),
        ),
        "L2 at depth 2: after a restart a token repeats, so a result from before it matches",
    ),
)

#: The F314 defects, which ``make test`` gates on (tests/quality).
F314_MUTANTS = tuple(m for m in CATALOGUE if m.f314_defect is not None)


#: The layers of the gate, each the tests of one verification layer (present ones only run).
GATE_LAYERS: tuple[GateLayer, ...] = (
    GateLayer(
        "unit",
        (
            "tests/unit/test_journal.py",
            "tests/unit/test_coordinator.py",
            "tests/unit/test_master.py",
            "tests/unit/test_pipeline.py",
            "tests/unit/test_scenarios.py",
        ),
    ),
    GateLayer("conformance", ("tests/conformance", "-m", "conformance and not mpi")),
    GateLayer("crash", ("tests/unit/test_crashcheck.py", "-m", "not slow")),
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


def verify_rows(deep: bool) -> list[Any]:
    """The ``verify`` layer: F314's four defects against the unit layer; with ``--deep`` every
    mutant against every layer (``verify --mutants`` prints that as a table)."""
    import time

    from leasefence.report import FAIL, PASS, Row

    # Default: F314's four defects against the unit layer (each must be caught there, as
    # tests/quality requires); --deep: the whole catalogue against every layer.
    layers = (
        available_layers() if deep else tuple(x for x in available_layers() if x.name == "unit")
    )
    mutants = CATALOGUE if deep else F314_MUTANTS
    rows = []
    for mutant in mutants:
        t = time.perf_counter()
        (res,) = run_gate([mutant], layers)
        caught = [name for name, hit in res.caught_by.items() if hit]
        rows.append(
            Row(
                "planted bugs",
                mutant.name,
                f"caught by {', '.join(caught)}" if caught else "survived every layer",
                PASS if res.caught else FAIL,
                time.perf_counter() - t,
                f"{mutant.breaks}; {res.errors}" if res.errors else mutant.breaks,
            )
        )
    return rows
