"""Strict JSON for everything read from disk or the wire: no duplicate keys, no NaN/Infinity;
and the exact text ``json`` writes for a plain value, for records built without ``json.dumps``."""

from __future__ import annotations

import math
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any


def strict_hooks(error: Callable[[str], Exception], duplicate: str) -> dict[str, Any]:
    """Keyword arguments for ``json.loads`` that raise ``error(message)`` on a key seen twice
    (``duplicate`` is the message, formatted with the key's repr), a NaN/Infinity constant, or
    a number literal too large for a float (``1e999``, which would read as infinity)."""

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out = dict(items)
        if len(out) != len(items):  # a key seen twice: name the first one
            seen: set[str] = set()
            for key, _ in items:
                if key in seen:
                    raise error(duplicate.format(repr(key)))
                seen.add(key)
        return out

    def constant(name: str) -> Any:
        raise error(f"{name} is not a JSON number")

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise error(f"{text[:40]} is not a JSON number a float can hold: it must be finite")
        return value

    return {"object_pairs_hook": pairs, "parse_constant": constant, "parse_float": number}


def json_scalar(value: object) -> str | None:
    """``value``'s text exactly as ``json.dumps(value, ensure_ascii=True, allow_nan=False)``
    writes it, for the plain types a record holds (``str``, ``int``, ``float``, ``bool``,
    ``None``, exactly those types); None for anything else (a subclass, a container, NaN or an
    infinity, an integer over the digit limit), which the caller hands to ``json`` itself, so
    that its result and its errors stay ``json``'s. Records are built with it instead of a
    ``json.dumps`` call each (a few microseconds of Python per call, issue 19)."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)  # type: ignore[arg-type]
    if kind is int:
        try:
            return int.__repr__(value)
        except ValueError:  # over the integer string conversion limit: json's error
            return None
    if kind is float:
        return float.__repr__(value) if math.isfinite(value) else None  # type: ignore[arg-type]
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    return None


#: The float ``float_text`` wrote last, and its text.
_last_float: list[Any] = [None, ""]


def float_text(value: float) -> str:
    """``json``'s text of a finite ``float`` (its ``repr``), remembering the last one written: a
    step's clock reading, one object, is written by the journal and by the coordinator alike
    (the same object is the same value; holding it, no other float can take its identity)."""
    last = _last_float
    if value is last[0]:
        return last[1]  # type: ignore[no-any-return]
    text = float.__repr__(value)
    last[0], last[1] = value, text
    return text
