"""The built wheel works outside the checkout: every subcommand runs or says it needs a checkout.

The wheel is built with ``pip wheel --no-deps`` and installed with ``--no-deps`` into a fresh
virtualenv in a temporary folder; a ``.pth`` line lets that virtualenv see the dependencies of the
development one (``.pth`` files in that folder, such as the editable install's finder, are not
run), so nothing is downloaded. Every command then runs from a temporary working directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_layering import ROOT, modules, package_dirs

from leasefence.cli import COMMANDS, NEEDS_CHECKOUT
from leasefence.impl.journal import WorkLeaseJournal

#: A config small enough that TLC and the agreement finish in seconds (bounds of MCLeaseFence.tla).
TINY_CFG = """CONSTANTS
    TaskOf <- MCTaskOfSmall
    Ranks = {1}
    TTL = 1
    MaxWall = 1
    MaxReboots = 0
    MaxRollbacks = 0
    MaxRestarts = 0
    MaxAttempts = 1
    MaxLeases = 1
    MaxDups = 0
    Flavour = "fixed"
    NoTask = NoTask
SPECIFICATION Spec
CONSTRAINT WithinConstraint
INVARIANTS
    TypeOK
    L1_SingleOwner
"""

#: One small real invocation per subcommand (run in order, from one temporary folder), and the
#: exit statuses it may end with: 3 for ``tlc`` is "no TLC (java or jar) here", said in one line.
INVOCATIONS: list[tuple[list[str], set[int]]] = [
    (["model", "check", "--works", "w1:s1", "--ranks", "1", "--max-wall", "1", "--quiet"], {0}),
    (["tlc", "tiny.cfg"], {0, 3}),
    (["tlc", "agree", "tiny.cfg"], {0, 3}),
    (["run", "--work", "3", "--worker", "trivial", "--trace", "t.ndjson"], {0}),
    (["trace", "check", "t.ndjson"], {0}),
    (["journal", "inspect", "j.jsonl"], {0}),
    (["journal", "recover", "j.jsonl", "--ttl", "0"], {0}),
    (["journal", "compact", "j.jsonl"], {0}),
    (["journal", "repair", "j.jsonl"], {0}),
    (["crashcheck", "--points", "20", "--size", "4", "--kill-rounds", "1", "--quiet"], {0}),
    (["verify"], {2}),
    (["campaign"], {2}),
    (["bench", "--tiny", "--only", "journal,dispatch"], {0}),
]


_UNSHIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "states", "*.dot", "*.st")


@dataclass(frozen=True)
class Installed:
    """The wheel, the virtualenv it is installed in, and how to run its ``leasefence``."""

    wheel: Path
    script: Path
    env: dict[str, str]
    cwd: Path

    def run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.script), *argv]
        if argv[0] == "run":  # the MPI dispatcher starts under mpiexec
            cmd = [str(Path(sys.executable).with_name("mpiexec")), "-n", "2", *cmd]
        return subprocess.run(
            cmd, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=300
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert not base.is_relative_to(ROOT)
    # Built from a copy: setuptools builds in the source folder, and a build/ left there from an
    # earlier run could slip deleted modules into the wheel.
    source = base / "source"
    for folder in {path.relative_to(ROOT).parts[0] for path in package_dirs(ROOT).values()}:
        shutil.copytree(ROOT / folder, source / folder, symlinks=True, ignore=_UNSHIPPED)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run([*pip, "wheel", "--no-deps", "-w", str(base), str(source)], check=True)
    (wheel,) = base.glob("leasefence-*.whl")
    target = base / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    subprocess.run([*pip, "--python", str(python), "install", "--no-deps", str(wheel)], check=True)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(purelib) / "dev-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    cwd = base / "work"
    cwd.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    # mpiexec comes from the mpich wheel in the development virtualenv (beside its python).
    env["PATH"] = os.pathsep.join(
        [str(target / "bin"), str(Path(sys.executable).parent), env.get("PATH", "")]
    )
    # The mpich wheel's libmpi sits in the development virtualenv's lib/, where mpi4py, seen
    # through the .pth line, does not look from another prefix.
    env["LD_LIBRARY_PATH"] = str(Path(sys.prefix) / "lib")
    env["LEASEFENCE_NO_DOWNLOAD"] = "1"
    return Installed(wheel, target / "bin" / "leasefence", env, cwd)


def test_the_wheel_holds_every_module_of_the_checkout_and_the_tla_spec(
    installed: Installed,
) -> None:
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for module, path in modules(package_dirs(ROOT)).items():
        inside = module.replace(".", "/") + (
            "/__init__.py" if path.name == "__init__.py" else ".py"
        )
        assert inside in names, f"{module} ({path.relative_to(ROOT)}) is not in the wheel"
    for spec in sorted((ROOT / "tla").glob("*.tla")) + sorted((ROOT / "tla").glob("*.cfg")):
        assert f"leasefence/spec/{spec.name}" in names


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    probe = "import leasefence, leasefence.paths as p; print(leasefence.__file__, p.checkout())"
    out = subprocess.run(
        [str(installed.script.with_name("python")), "-c", probe],
        cwd=installed.cwd,
        env=installed.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert not Path(out[0]).is_relative_to(ROOT)
    assert out[1] == "None"


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_subcommand_prints_its_help_from_the_installed_wheel(
    installed: Installed, command: str
) -> None:
    proc = installed.run(command, "--help")
    assert proc.returncode == 0, proc.stderr
    assert f"usage: leasefence {command}" in proc.stdout


def test_every_subcommand_has_a_real_invocation_below() -> None:
    assert {argv[0] for argv, _ in INVOCATIONS} == set(COMMANDS)


def test_every_subcommand_works_from_the_wheel_or_says_in_one_line_that_it_needs_a_checkout(
    installed: Installed,
) -> None:
    (installed.cwd / "tiny.cfg").write_text(TINY_CFG)
    with WorkLeaseJournal(installed.cwd / "j.jsonl") as journal:
        journal.lease("a" * 64, 1)
    for argv, allowed in INVOCATIONS:
        proc = installed.run(*argv)
        said = f"leasefence {' '.join(argv)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        assert "Traceback" not in proc.stderr, said
        assert proc.returncode in allowed, said
        if argv[0] in NEEDS_CHECKOUT:
            assert proc.stderr.strip().count("\n") == 0, said
            assert "needs a source checkout" in proc.stderr, said
        if proc.returncode == 3:
            assert "TLC unavailable" in proc.stdout, said
