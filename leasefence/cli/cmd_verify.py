"""``leasefence verify``: run every verification layer that exists and print one summary table."""

from __future__ import annotations

import argparse

from leasefence.verify import run_verify


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence verify` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "The main job: runs lint and types, the exhaustive model check (fixed protocol and "
        "each pre-fix flavour), and every further layer present, prints one table (layer, "
        "what ran, figures, result, time), writes reports/verify.md and reports/verify.json, "
        "and exits non-zero on any failure."
    )
    p.add_argument("--deep", action="store_true", help="larger bounds and deeper profiles")
    p.add_argument(
        "--reports", default="reports", help="folder for verify.md/verify.json (default reports)"
    )
    p.add_argument(
        "--mutants",
        action="store_true",
        help=(
            "instead of the layers, run the whole planted-bug catalogue (leasefence/harness/mutants.py) "
            "against every test layer and print mutant x layer -> caught/missed; exit 1 if any "
            "mutant survives every layer"
        ),
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.mutants:
        return _run_mutants(args.reports)
    return run_verify(deep=args.deep, reports=args.reports)


def _run_mutants(reports: str) -> int:
    from pathlib import Path

    from leasefence.harness.mutants import (
        CATALOGUE,
        available_layers,
        baseline,
        format_table,
        run_gate,
    )

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
