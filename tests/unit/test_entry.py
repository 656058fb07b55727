"""How a ``leasefence`` process starts: the Makefile's byte-compiled sources (``make bytecode``),
there for start-up time (issue 19)."""

from __future__ import annotations

import re

from test_layering import ROOT, package_dirs


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
    (recipe,) = _rules((ROOT / "Makefile").read_text())["bytecode"][1]
    named = recipe.split()
    assert named[:4] == ["@$(BIN)/python", "-m", "compileall", "-q"]
    folders = {
        str(folder.relative_to(ROOT))
        for folder in package_dirs(ROOT).values()
        if any(folder.glob("*.py"))
    }
    assert folders == set(named[4:])
