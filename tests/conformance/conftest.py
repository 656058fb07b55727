"""Conformance runs print how often each rule and case fired, in the terminal summary.

With ``LEASEFENCE_COVERAGE_JSON=PATH`` the counts are also written there as JSON (``leasefence
verify`` reads them).
"""

from __future__ import annotations

import os

import pytest

from leasefence.conformance.coverage import COVERAGE


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not COVERAGE.counts:
        return
    terminalreporter.section("conformance coverage (rules and cases fired)")
    for machine in COVERAGE.counts:
        terminalreporter.write_line(COVERAGE.report(machine))
    target = os.environ.get("LEASEFENCE_COVERAGE_JSON")
    if target:
        COVERAGE.write(target)
