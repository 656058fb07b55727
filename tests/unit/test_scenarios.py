"""Every saved scenario (``tests/scenarios/*.json``) replays against the model and the
implementation: they agree at every step, every invariant holds, and each step gives the
outcome the fixed protocol must give (the four F314 defects' counterexamples are refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from leasefence.conformance.scenarios import load, replay

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.json"))


def test_there_is_a_scenario_for_each_f314_defect() -> None:
    names = {p.name for p in SCENARIOS}
    for n in (1, 2, 3, 4):
        assert any(name.startswith(f"f314-defect{n}-") for name in names), n


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_the_scenario_replays_identically_on_model_and_implementation(path: Path) -> None:
    replay(load(path))
