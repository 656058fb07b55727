"""Shared pytest set-up: Hypothesis profiles (``ci`` under CI=true, ``deep`` on demand)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("dev", max_examples=60, deadline=None)
# Hypothesis loads its own "ci" profile when it detects CI (CI=true), with derandomize=True,
# which ignores the seed `make test` passes and prints. Ours states both settings, so a run
# under CI=true draws exactly what the same seed draws anywhere else.
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    print_blob=True,
    derandomize=False,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "deep",
    max_examples=2_000,
    deadline=None,
    derandomize=False,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
_default = "ci" if os.environ.get("CI") == "true" else "dev"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _default))


def pytest_report_header() -> list[str]:
    return [f"hypothesis profile: {settings._current_profile}"]
