"""The planted bugs against the layer aimed at each: every mutant of impl/ in the catalogue
(F314's, the older ones and issue 20's) is caught by the generated transition tests alone (the
ones the model can express by the replayed transitions, the others by the probes and the
dispatch loop at each kind of state), but those ``catalogue.BEYOND_THE_MODEL`` names with why;
every checker mutant of issue 20 by the checkers' tests of themselves (slow: one pytest run
per mutant and layer)."""

from __future__ import annotations

import pytest

from leasefence.harness.mutants.catalogue import (
    BEYOND_THE_MODEL,
    CATALOGUE,
    EXPRESSIBLE,
    TRANSITION_MUTANTS,
    Mutant,
)
from leasefence.harness.mutants.gate import GATE_LAYERS, run_gate

LAYER = {layer.name: layer for layer in GATE_LAYERS}
CHECKER_MUTANTS = {m.name for m in TRANSITION_MUTANTS if not m.path.startswith("impl/")}


@pytest.mark.slow
@pytest.mark.parametrize("mutant", CATALOGUE, ids=[m.name for m in CATALOGUE])
def test_the_mutant_is_caught_by_the_layer_aimed_at_it(mutant: Mutant) -> None:
    if mutant.name in BEYOND_THE_MODEL:
        pytest.skip(BEYOND_THE_MODEL[mutant.name])
    layers = []
    if mutant.name in EXPRESSIBLE or mutant.path.startswith("impl/"):
        layers.append(LAYER["transitions"])
    if mutant.name in CHECKER_MUTANTS:
        layers.append(LAYER["checkers"])
    if not layers:
        pytest.skip("the model cannot express it at these bounds: the catalogue's layers catch it")
    (result,) = run_gate([mutant], layers)
    assert all(result.caught_by.values()), (result.caught_by, result.errors)
