"""Proof that the checks bite: planted bugs of impl/ that the test layers must catch.

F314's four defects run in every `make test`; the whole catalogue runs under `-m slow` and in
`leasefence verify --mutants`.
"""

from __future__ import annotations

import pytest

from leasefence.harness.mutants.catalogue import CATALOGUE, F314_MUTANTS, Mutant
from leasefence.harness.mutants.gate import apply, available_layers, copy_tree, run_gate


def test_every_catalogued_patch_still_applies_to_the_code(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    for mutant in CATALOGUE:
        tree = tmp_path_factory.mktemp(mutant.name)
        copy_tree(tree)
        before = (tree / mutant.path).read_text()
        apply(mutant, tree)
        assert (tree / mutant.path).read_text() != before


def test_the_catalogue_covers_each_f314_defect_once() -> None:
    assert sorted(m.f314_defect for m in F314_MUTANTS) == [1, 2, 3, 4]
    assert len({m.name for m in CATALOGUE}) == len(CATALOGUE)


@pytest.mark.parametrize("mutant", F314_MUTANTS, ids=lambda m: m.name)
def test_each_f314_defect_planted_in_impl_is_caught_by_the_unit_layer(mutant: Mutant) -> None:
    unit = [layer for layer in available_layers() if layer.name == "unit"]
    (result,) = run_gate([mutant], unit)
    assert result.caught_by["unit"], f"{mutant.name} survived the unit layer: {result.errors}"


@pytest.mark.slow
@pytest.mark.parametrize("mutant", CATALOGUE, ids=lambda m: m.name)
def test_every_catalogued_mutant_is_caught_by_some_layer(mutant: Mutant) -> None:
    (result,) = run_gate([mutant], available_layers())
    assert result.caught, f"{mutant.name} survived every layer: {result.caught_by} {result.errors}"


def test_verify_offers_the_mutant_gate_on_its_command_line() -> None:
    from leasefence.cli import build_parser

    args = build_parser().parse_args(["verify", "--mutants"])
    assert args.mutants is True


def test_the_unit_layer_passes_on_an_unmutated_copy_so_a_caught_mutant_means_its_bug() -> None:
    from leasefence.harness.mutants.gate import baseline

    unit = [layer for layer in available_layers() if layer.name == "unit"]
    assert baseline(unit) == {}


def test_a_planted_bug_that_starves_an_item_is_caught_by_the_starvation_tests() -> None:
    # Issue 21 point 3: EveryItemSettled in the implementation. The master loop ends on the
    # starved item (no hang) and the in-process run's check that every item settled fails.
    from leasefence.harness.mutants.gate import GateLayer

    (mutant,) = [m for m in CATALOGUE if m.name == "dispatch-starves-last-item"]
    layer = GateLayer("starvation", ("tests/unit/test_starvation.py",))
    (result,) = run_gate([mutant], [layer])
    assert result.caught_by == {"starvation": True}, result.errors
