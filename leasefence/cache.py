"""Where leasefence keeps what it fetches or builds for a user: the pinned TLC jar
(``leasefence.tlc.jar``) and the compiled trace validator (``leasefence.harness.compiled``).

A leaf without pathlib: ``trace check`` reads it at every start, and importing pathlib costs
about 18 million instructions.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def cache_root(env: Mapping[str, str] | None = None) -> str:
    """``$XDG_CACHE_HOME/leasefence``, else ``~/.cache/leasefence``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".cache"
    )
    return os.path.join(base, "leasefence")
