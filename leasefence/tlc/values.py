"""The TLA+ value parser: values and states exactly as TLC prints them, and back out as JSON."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TypeAlias


@dataclass(frozen=True, order=True)
class ModelValue:
    """A TLC model value (an uninterpreted constant such as ``NoTask``)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Fcn:
    """A TLA+ function or record, as sorted ``(key, value)`` pairs.

    Records are functions from strings; a function whose domain is ``1..n`` is a tuple and is
    parsed as a Python tuple instead, so every value has one representation.
    """

    items: tuple[tuple[Value, Value], ...]

    def get(self, key: Value) -> Value:
        for k, v in self.items:
            if k == key:
                return v
        raise KeyError(key)

    def keys(self) -> list[Value]:
        return [k for k, _ in self.items]


Value: TypeAlias = bool | int | str | ModelValue | frozenset["Value"] | tuple["Value", ...] | Fcn


def _order(v: Value) -> tuple[int, str]:
    """A total order over mixed values, for canonical sorting."""
    rank = {bool: 0, int: 1, str: 2, ModelValue: 3, tuple: 4, frozenset: 5, Fcn: 6}
    return (rank.get(type(v), 9), repr(v) if not isinstance(v, int) else f"{v:+020d}")


def make_fcn(pairs: Sequence[tuple[Value, Value]]) -> Value:
    """The canonical value of a function given by pairs: a tuple when its domain is 1..n."""
    d: dict[Value, Value] = {}
    for k, v in pairs:
        if k in d and d[k] != v:
            raise TlaParseError(f"function maps {k!r} to both {d[k]!r} and {v!r}")
        d.setdefault(k, v)  # `@@` is left-biased
    keys = list(d)
    n = len(keys)
    if all(type(k) is int for k in keys) and sorted(keys) == list(range(1, n + 1)):  # type: ignore[type-var]
        return tuple(d[i] for i in range(1, n + 1))
    return Fcn(tuple(sorted(d.items(), key=lambda kv: _order(kv[0]))))


def as_mapping(v: Value) -> dict[Value, Value]:
    """A function value (record, ``:>``/``@@`` function or tuple) as a dict."""
    if isinstance(v, Fcn):
        return dict(v.items)
    if isinstance(v, tuple):
        return {i + 1: x for i, x in enumerate(v)}
    raise TlaParseError(f"expected a function, got {v!r}")


class TlaParseError(ValueError):
    """A TLA+ value as TLC prints it could not be read."""


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<int>-?\d+)
    | (?P<op><<|>>|\|->|:>|@@|\.\.|[\[\]{}(),])
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise TlaParseError(f"unexpected text at {pos}: {text[pos : pos + 30]!r}")
        kind = m.lastgroup or ""
        yield kind, m.group(kind)
        pos = m.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = list(_tokens(text))
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise TlaParseError(f"unexpected end of value, expected {expected or 'more'}")
        tok = self.toks[self.i]
        if expected is not None and tok[1] != expected:
            raise TlaParseError(f"expected {expected!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def items(self, close: str) -> list[Value]:
        out: list[Value] = []
        if self.peek() == close:
            self.take(close)
            return out
        while True:
            out.append(self.expr())
            if self.take()[1] == close:
                return out
            if self.toks[self.i - 1][1] != ",":
                raise TlaParseError(f"expected ',' or {close!r}")

    def expr(self) -> Value:
        first = self.primary()
        if self.peek() != ":>":
            return first
        pairs: list[tuple[Value, Value]] = []
        key = first
        while True:
            self.take(":>")
            pairs.append((key, self.primary()))
            if self.peek() != "@@":
                return make_fcn(pairs)
            self.take("@@")
            key = self.primary()

    def primary(self) -> Value:
        kind, tok = self.take()
        if kind == "int":
            return int(tok)
        if kind == "str":
            return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), tok[1:-1])
        if kind == "id":
            if tok in ("TRUE", "FALSE"):
                return tok == "TRUE"
            return ModelValue(tok)
        if tok == "{":
            return frozenset(self.items("}"))
        if tok == "<<":
            return tuple(self.items(">>"))
        if tok == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if tok == "[":
            pairs: list[tuple[Value, Value]] = []
            while True:
                k, name = self.take()
                if k != "id":
                    raise TlaParseError(f"expected a record field name, got {name!r}")
                self.take("|->")
                pairs.append((name, self.expr()))
                if self.take()[1] == "]":
                    return make_fcn(pairs)
                if self.toks[self.i - 1][1] != ",":
                    raise TlaParseError("expected ',' or ']' in a record")
        raise TlaParseError(f"unexpected {tok!r}")


def parse_value(text: str) -> Value:
    """Read one TLA+ value as TLC prints it: integers, strings, booleans, model values, sets
    ``{..}``, tuples ``<<..>>``, records ``[a |-> ..]`` and functions ``(k :> v @@ ..)``."""
    p = _Parser(text)
    v = p.expr()
    if p.i != len(p.toks):
        raise TlaParseError(f"trailing text after the value: {p.toks[p.i][1]!r}")
    return v


_VAR = re.compile(r"^/\\ (\w+) = ", re.MULTILINE)


def parse_state(text: str) -> dict[str, Value]:
    """A state as TLC prints it (``/\\ x = 1`` per variable) as a dict of values."""
    marks = list(_VAR.finditer(text))
    if not marks:
        raise TlaParseError(f"no variable in state text {text[:60]!r}")
    out: dict[str, Value] = {}
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        chunk = text[m.end() : nxt.start() if nxt else len(text)]
        out[m.group(1)] = parse_value(chunk)
    return out


def to_json(v: Value) -> object:
    """A TLA+ value as JSON: sets and tuples as lists, functions and records as objects."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, ModelValue):
        return v.name
    if isinstance(v, frozenset):
        return [to_json(x) for x in sorted(v, key=_order)]
    if isinstance(v, tuple):
        return [to_json(x) for x in v]
    return {str(to_json(k)): to_json(x) for k, x in v.items}
