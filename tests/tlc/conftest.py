"""TLC tests: ``tools`` is the TLC the runner finds, or a skip with the runner's own reason."""

from __future__ import annotations

import pytest

from leasefence.tlc.jar import TlcUnavailable, Tools, find_tools


@pytest.fixture(scope="session")
def tools() -> Tools:
    try:
        return find_tools()
    except TlcUnavailable as exc:
        pytest.skip(f"TLC unavailable: {exc}")
