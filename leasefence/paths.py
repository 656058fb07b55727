"""Where leasefence finds its source checkout and the TLA+ spec (a leaf: imports nothing of the
project but the leaf ``leasefence.cache``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from leasefence.cache import cache_root

#: The folder of the ``leasefence`` package (symlinks resolved).
PACKAGE = Path(__file__).resolve().parent

#: The source checkout the package was installed from (editable install), or where a wheel put
#: the package when there is none; ``checkout()`` says which.
ROOT = PACKAGE.parent

#: Exit status of a command that needs a source checkout and runs from an installed wheel.
EXIT_NEEDS_CHECKOUT = 2


def checkout() -> Path | None:
    """The source checkout (``pyproject.toml``, ``impl/`` and ``tests/`` beside the package), or
    None when leasefence runs from an installed wheel."""
    if all((ROOT / name).exists() for name in ("pyproject.toml", "impl", "tests")):
        return ROOT
    return None


def spec_dir() -> Path:
    """The folder of the TLA+ spec and its configs: ``tla/`` of the checkout, else the copy a
    wheel ships as package data (``leasefence/spec``, mapped from ``tla/`` in pyproject.toml)."""
    root = checkout()
    return root / "tla" if root is not None else PACKAGE / "spec"


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/leasefence``, else ``~/.cache/leasefence`` (``leasefence.cache``)."""
    return Path(cache_root(env))


class NeedsCheckout(SystemExit):
    """A command that works only in a source checkout ran from an installed wheel.

    ``leasefence.cli.main`` prints ``message`` as one line and exits with status 2; raised
    anywhere else it still ends the process with status 2, never a traceback.
    """

    def __init__(self, what: str, why: str) -> None:
        super().__init__(EXIT_NEEDS_CHECKOUT)
        self.message = (
            f"leasefence {what} needs a source checkout ({why}); it does not run from an "
            "installed wheel: clone the repository and run it there"
        )


def require_checkout(what: str, why: str) -> Path:
    """The source checkout, or :class:`NeedsCheckout` naming the command ``what`` and ``why`` it
    needs one (e.g. ``require_checkout("verify", "it runs ruff, mypy and the test suite")``)."""
    root = checkout()
    if root is None:
        raise NeedsCheckout(what, why)
    return root
