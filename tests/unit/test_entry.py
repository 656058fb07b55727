"""How a ``leasefence`` process starts and ends: the Makefile's byte-compiled sources (``make
bytecode``) and the entry point (``cli.entry``), both there for start-up and exit time (issue
19)."""

from __future__ import annotations

import gc
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from test_layering import ROOT, package_dirs

import leasefence.cli as cli
from leasefence.impl.journal import WorkLeaseJournal


@pytest.fixture
def journal(tmp_path: Path) -> Path:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path, clock=lambda: 1_767_225_600.0) as j:
        j.lease("a" * 64, 1)
    return path


def test_entry_runs_main_then_freezes_what_it_left_and_returns_its_status(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(cli, "main", lambda: calls.append("main") or 3)
    monkeypatch.setattr(gc, "freeze", lambda: calls.append("freeze"))
    assert cli.entry() == 3
    assert calls == ["main", "freeze"]


def test_main_itself_never_freezes_the_process_that_calls_it(
    monkeypatch: pytest.MonkeyPatch, journal: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse() -> None:
        raise AssertionError("main froze the calling process's objects")

    monkeypatch.setattr(gc, "freeze", refuse)
    assert cli.main(["journal", "inspect", str(journal)]) == 0
    assert "1 active" in capsys.readouterr().out


def test_python_dash_m_leasefence_exits_through_entry(journal: Path) -> None:
    # An atexit handler runs after ``raise SystemExit(...)`` in ``__main__``: by then ``entry``
    # has frozen the objects (``main`` alone would leave the count at 0).
    probe = (
        "import atexit, gc, runpy, sys\n"
        "atexit.register(lambda: print('frozen', gc.get_freeze_count() > 0))\n"
        f"sys.argv = ['leasefence', 'journal', 'inspect', {str(journal)!r}]\n"
        "runpy.run_module('leasefence', run_name='__main__', alter_sys=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "1 active" in done.stdout
    assert done.stdout.rstrip().endswith("frozen True")


def test_the_leasefence_script_is_entry() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["scripts"] == {"leasefence": "leasefence.cli:entry"}


def _rules(makefile: str) -> dict[str, tuple[list[str], list[str]]]:
    """Each rule of ``makefile``: its target's prerequisites and recipe lines."""
    rules: dict[str, tuple[list[str], list[str]]] = {}
    recipe: list[str] = []
    for line in makefile.splitlines():
        head = re.match(r"^([A-Za-z$(). /_-]+):(?!=)(.*)$", line)
        if head and not line.startswith("\t"):
            recipe = []
            for target in head.group(1).split():
                rules[target] = (head.group(2).split(), recipe)
        elif line.startswith("\t"):
            recipe.append(line.strip())
    return rules


def test_every_make_target_that_runs_the_checkouts_code_compiles_its_bytecode_first() -> None:
    rules = _rules((ROOT / "Makefile").read_text())
    for target in ("lint", "verify", "bench", "compile"):
        assert "bytecode" in rules[target][0], f"make {target} does not depend on bytecode"
    assert rules["test"][0] == ["lint"]  # (so make test compiles it too)


def test_make_bytecode_compiles_every_folder_the_package_is_installed_from() -> None:
    command = " ".join(_rules((ROOT / "Makefile").read_text())["bytecode"][1])
    named = command.split(" \\")[0].split()
    assert named[:4] == ["@$(BIN)/python", "-m", "compileall", "-q"]
    folders = {
        str(folder.relative_to(ROOT))
        for folder in package_dirs(ROOT).values()
        if any(folder.glob("*.py"))
    }
    assert folders == set(named[4:])


def test_make_bytecode_goes_on_past_a_cache_it_cannot_write(tmp_path: Path) -> None:
    # A checkout in miniature: the Makefile and the four folders, one holding a source that
    # does not compile (as root, the tests' user in CI, a read-only folder would still be
    # written: a syntax error fails the same way). ``-o``: the install stamp is never remade
    # (the recipe would install into BIN, this test's own virtualenv).
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    for folder in ("leasefence", "model", "impl", "conformance"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "fine.py").write_text("X = 1\n")
    (tmp_path / "impl" / "broken.py").write_text("def (:\n")
    done = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "bytecode", f"BIN={Path(sys.executable).parent}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken.py" in done.stdout + done.stderr
    assert "some bytecode caches were not written" in done.stdout
    for folder in ("leasefence", "model", "impl", "conformance"):
        assert (tmp_path / folder / "__pycache__").is_dir(), folder
    assert not list((tmp_path / "impl" / "__pycache__").glob("broken.*"))
