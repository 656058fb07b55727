"""Every test has a time limit, so a bug that hangs fails a test instead of stalling CI."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _conftest() -> Any:
    """tests/conftest.py by its path (``import conftest`` finds whichever folder's comes first)."""
    spec = importlib.util.spec_from_file_location(
        "leasefence_tests_conftest", ROOT / "tests/conftest.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Item:
    """What the hook reads of a collected test: its markers."""

    def __init__(self, *marks: pytest.MarkDecorator) -> None:
        self.own = [m.mark for m in marks]

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((m for m in self.own if m.name == name), None)

    def add_marker(self, mark: pytest.MarkDecorator) -> None:
        self.own.append(mark.mark)


def test_every_test_of_make_test_has_the_configured_time_limit() -> None:
    ini = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert 0 < int(ini["timeout"]) < 15 * 60, "make test must stay well under CI's 15 minutes"


def test_a_slow_test_without_its_own_limit_gets_the_slow_limit() -> None:
    slow, plain, own = (
        _Item(pytest.mark.slow),
        _Item(),
        _Item(pytest.mark.slow, pytest.mark.timeout(7)),
    )
    conftest = _conftest()
    conftest.pytest_collection_modifyitems([slow, plain, own])
    assert [m.args for m in slow.own if m.name == "timeout"] == [(conftest.SLOW_TIMEOUT,)]
    assert plain.get_closest_marker("timeout") is None  # the configured limit applies
    assert [m.args for m in own.own if m.name == "timeout"] == [(7,)]
