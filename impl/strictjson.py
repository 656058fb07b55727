"""Strict JSON for everything read from disk or the wire: no duplicate keys, no NaN/Infinity."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any


def strict_hooks(error: Callable[[str], Exception], duplicate: str) -> dict[str, Any]:
    """Keyword arguments for ``json.loads`` that raise ``error(message)`` on a key seen twice
    (``duplicate`` is the message, formatted with the key's repr), a NaN/Infinity constant, or
    a number literal too large for a float (``1e999``, which would read as infinity)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise error(duplicate.format(repr(key)))
            out[key] = value
        return out

    def constant(name: str) -> Any:
        raise error(f"{name} is not a JSON number")

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise error(f"{text[:40]} is not a JSON number a float can hold: it must be finite")
        return value

    return {"object_pairs_hook": pairs, "parse_constant": constant, "parse_float": number}
