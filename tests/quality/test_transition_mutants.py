"""The new planted bugs (``transition_mutants``) against the generated transition tests and the
checkers' tests: each mutant the model can express is caught by the transition tests alone,
each checker mutant by the checkers' tests (slow: one pytest run per mutant and layer)."""

from __future__ import annotations

import pytest
from transition_mutants import CHECKERS_LAYER, EXPRESSIBLE, TRANSITION_MUTANTS, TRANSITIONS_LAYER

from leasefence.harness.mutants import run_gate

CHECKER_MUTANTS = {m.name for m in TRANSITION_MUTANTS if not m.path.startswith("impl/")}


@pytest.mark.slow
@pytest.mark.parametrize("mutant", TRANSITION_MUTANTS, ids=[m.name for m in TRANSITION_MUTANTS])
def test_the_mutant_is_caught_by_the_layer_aimed_at_it(mutant: object) -> None:
    from leasefence.harness.mutants import Mutant

    assert isinstance(mutant, Mutant)
    layers = []
    if mutant.name in EXPRESSIBLE:
        layers.append(TRANSITIONS_LAYER)
    if mutant.name in CHECKER_MUTANTS:
        layers.append(CHECKERS_LAYER)
    if not layers:
        pytest.skip("the model cannot express it at these bounds: the catalogue's layers catch it")
    (result,) = run_gate([mutant], layers)
    assert all(result.caught_by.values()), (result.caught_by, result.errors)
