"""A fixed Hypothesis seed draws the same examples whatever tests ran before.

Hypothesis draws some values from the literals of the project's modules imported so far (its
"local constants"), so the suite imports every module first (``tests/conftest.py``,
``import_every_module``): with a module imported only by some test, which tests ran before
changed what the seed drew, and a test run alone with the seed ``make test`` prints did not
replay what it had drawn in the whole suite.
"""

from __future__ import annotations

import importlib.util
import pkgutil
import subprocess
import sys
from pathlib import Path

import leasefence

ROOT = Path(__file__).resolve().parents[2]
#: The programs ``mpiexec`` runs: importing one starts MPI, so the suite leaves them out.
MPI_PROGRAMS = {"leasefence.harness.bench.mpi_job"}


def _modules() -> set[str]:
    return {
        m.name
        for m in pkgutil.walk_packages(leasefence.__path__, "leasefence.")
        if not m.name.endswith(".__main__")
    }


def test_every_module_but_the_mpi_programs_is_imported_before_any_test_draws() -> None:
    modules = _modules()
    assert len(modules) > 100  # the walk found the package, not an empty path
    assert modules - set(sys.modules) <= MPI_PROGRAMS


def test_the_modules_left_out_are_the_ones_that_start_mpi_on_import() -> None:
    """Importing the rest does not start MPI (a fresh interpreter, whatever this one holds), and
    each module left out does."""
    code = (
        "import sys; sys.path.insert(0, 'tests'); import conftest; "
        "print(' '.join(sorted(conftest.EVERY_MODULE))); "
        "print('mpi4py.MPI' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    imported, started = proc.stdout.splitlines()
    assert imported.split() == sorted(_modules() - MPI_PROGRAMS)
    assert started == "False"
    for name in sorted(_modules()):
        spec = importlib.util.find_spec(name)
        assert spec is not None
        assert spec.origin is not None
        text = Path(spec.origin).read_text(encoding="utf-8") if spec.origin.endswith(".py") else ""
        assert ("\nfrom mpi4py import MPI\n" in text) == (name in MPI_PROGRAMS), name
