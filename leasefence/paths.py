"""Where leasefence finds its source checkout (a leaf module: it imports nothing of the project)."""

from __future__ import annotations

from pathlib import Path

#: The folder of the ``leasefence`` package (symlinks resolved).
PACKAGE = Path(__file__).resolve().parent

#: The source checkout the package was installed from (editable install), or where a wheel put
#: the package when there is none; ``checkout()`` says which.
ROOT = PACKAGE.parent


def checkout() -> Path | None:
    """The source checkout (``pyproject.toml``, ``impl/`` and ``tests/`` beside the package), or
    None when leasefence runs from an installed wheel."""
    if all((ROOT / name).exists() for name in ("pyproject.toml", "impl", "tests")):
        return ROOT
    return None
