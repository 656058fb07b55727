"""The mutant gate's rows of ``leasefence verify``: each planted bug and the layers that caught it."""

from __future__ import annotations

import time

from leasefence.harness.mutants.catalogue import CATALOGUE, F314_MUTANTS
from leasefence.harness.mutants.gate import available_layers, run_gate
from leasefence.report import FAIL, PASS, Row


def verify_rows(deep: bool) -> list[Row]:
    """The ``verify`` layer: F314's four defects against the unit layer; with ``--deep`` every
    mutant against every layer (``verify --mutants`` prints that as a table)."""
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
