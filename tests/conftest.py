"""Shared pytest set-up: Hypothesis profiles (``ci`` under CI=true, ``deep`` on demand), the
time limit of the ``slow`` tests, and which modules the suite runs: interpreted, or the build of
``leasefence trace compile`` (the trace validator and the dispatcher compiled)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

import leasefence
from leasefence.harness.compiled import ENGINE_ENV, activate, engine_from_env

# The suite runs the interpreted modules, the reference, whatever the user's cache holds (and so
# do the commands its tests start, which inherit the variable); LEASEFENCE_ENGINE=compiled runs
# it against the build instead (tests/unit/test_compiled.py does, for the trace checker's and the
# dispatcher's tests), where a test marked ``interpreted`` (it patches a function inside a compiled
# module, whose calls mypyc binds at build time) is skipped. Activated here, before any test
# module imports the model or the dispatcher.
if not os.environ.get(ENGINE_ENV):  # unset or empty (empty would read as auto)
    os.environ[ENGINE_ENV] = "interpreted"
ENGINE_BUILD = activate(engine_from_env())


#: A module-level import of ``mpi4py.MPI`` (which starts MPI).
MPI_IMPORT = re.compile(r"^(?:from mpi4py import MPI|import mpi4py\.MPI)\b", re.MULTILINE)


def starts_mpi(name: str) -> bool:
    """Whether importing module ``name`` starts MPI: a program ``mpiexec`` runs, whose source
    imports ``mpi4py.MPI`` at module level."""
    spec = importlib.util.find_spec(name)
    origin = None if spec is None else spec.origin
    if origin is None or not origin.endswith(".py"):
        return False
    return MPI_IMPORT.search(Path(origin).read_text(encoding="utf-8")) is not None


def import_every_module() -> list[str]:
    """Import every module of the package but the command line's entry point (``__main__``,
    which runs on import) and those that start MPI (``starts_mpi``); their names.

    Hypothesis draws some values from the literals of the project's modules already imported
    (its "local constants", read from their source when a module is first seen), so the
    modules earlier tests had imported changed what a fixed seed drew: a test run alone with the
    seed ``make test`` prints drew other examples than in the whole suite, and the system
    conformance machine missed a required case in one selection and hit it in another. Imported
    all first, the pool is the same for every selection of tests under one engine (a compiled
    module has no source, so it adds no literal: the compiled suite's draws are its own)."""
    names = []
    for module in pkgutil.walk_packages(leasefence.__path__, "leasefence."):
        if module.name.endswith(".__main__") or starts_mpi(module.name):
            continue
        importlib.import_module(module.name)
        names.append(module.name)
    return names


EVERY_MODULE = import_every_module()

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
    engine = f"compiled ({ENGINE_BUILD})" if ENGINE_BUILD else "interpreted"
    return [
        f"hypothesis profile: {settings._current_profile}",
        f"trace validator and dispatcher: {engine}",
    ]


#: The time limit of a ``slow`` test without its own ``timeout`` mark, in seconds. Every other
#: test has pyproject.toml's ``timeout`` (pytest-timeout): a bug that makes a test hang (a
#: master loop that never ends) fails that test instead of spending CI's 90 minutes. ``slow``
#: tests run by hand and take long: the deep transition replay ~30 minutes on two idle CPUs and
#: over two hours on a loaded machine (conformance/README.md), so theirs is four hours.
SLOW_TIMEOUT = 4 * 3_600


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("slow") and not item.get_closest_marker("timeout"):
            item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT))
        why = item.get_closest_marker("interpreted")
        if why is not None and ENGINE_BUILD:
            item.add_marker(pytest.mark.skip(reason=f"interpreted modules only: {why.args[0]}"))
