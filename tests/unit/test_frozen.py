"""``impl.frozen.fast_init``: the faster ``__init__`` of the frozen values made on every task."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest

from leasefence.impl.frozen import fast_init
from leasefence.impl.master import ActiveDispatch, ResultOutcome
from leasefence.impl.transport import Envelope
from leasefence.impl.wire import Result, Work

#: The fields of each twin below: a dataclass and the same dataclass given ``fast_init``, with
#: and without slots (made from one list, so that the twins cannot drift apart).
_FIELDS: list[Any] = [
    ("a", int),
    ("b", str),
    ("c", float, field(default=0.5)),
    ("d", dict[str, Any], field(default_factory=dict)),
    ("e", tuple[int, int] | None, field(default=None)),
]


def _twin(name: str, *, fast: bool, slots: bool) -> Any:
    cls = dataclasses.make_dataclass(name, _FIELDS, frozen=True, slots=slots)
    return fast_init(cls) if fast else cls


Plain = _twin("Plain", fast=False, slots=False)
Fast = _twin("Fast", fast=True, slots=False)
PlainSlots = _twin("PlainSlots", fast=False, slots=True)
FastSlots = _twin("FastSlots", fast=True, slots=True)


def _values(x: Any) -> dict[str, Any]:
    return {f.name: getattr(x, f.name) for f in dataclasses.fields(x)}


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((1, "x"), {}),
        ((1, "x", 2.0), {}),
        ((1,), {"b": "y", "e": (1, 2)}),
        ((), {"a": 3, "b": "z", "c": 1.0, "d": {"k": 1}, "e": None}),
    ],
)
def test_a_fast_init_stores_what_the_dataclass_init_stores_with_the_same_parameters(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    # Same values, defaults and a fresh default each time; still frozen. (Fails if a default is
    # dropped or the factory's object is shared between instances.) With slots too: no
    # ``__dict__``, every slot set by the slot's own setter.
    for plain_cls, fast_cls in ((Plain, Fast), (PlainSlots, FastSlots)):
        plain, fast = plain_cls(*args, **kwargs), fast_cls(*args, **kwargs)
        assert _values(fast) == _values(plain)
        assert hasattr(fast, "__dict__") == hasattr(plain, "__dict__")
        assert repr(fast).replace(fast_cls.__name__, plain_cls.__name__) == repr(plain)
        assert fast_cls(1, "x").d is not fast_cls(1, "x").d
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.a = 2
        with pytest.raises(TypeError):
            fast_cls()
        assert dataclasses.replace(fast, a=9) == fast_cls(9, *list(_values(fast).values())[1:])
    assert not hasattr(FastSlots(1, "x"), "__dict__")


def test_the_values_made_on_every_task_equal_their_dataclass_twins() -> None:
    # Each class given fast_init compares, hashes and prints as the dataclass it is.
    r = Result("a" * 64, None, True)  # type: ignore[arg-type]
    assert (r.cpu_s, r.output, r.generation) == (0.0, {}, None)
    assert r == Result("a" * 64, None, True, 0.0, {}, None)  # type: ignore[arg-type]
    w = Work("w", "t", payload_json="{}")  # type: ignore[arg-type]
    assert w == Work("w", "t", {}, None)  # type: ignore[arg-type]  # payload_json not compared
    assert w.payload_json == "{}"
    d = ActiveDispatch("w", "t", (("target", "x"),))  # type: ignore[arg-type]
    assert hash(d) == hash(ActiveDispatch("w", "t", (("target", "x"),), None))  # type: ignore[arg-type]
    assert repr(Envelope(1, 2, b"x")) == "Envelope(source=1, tag=2, data=b'x')"
    o = ResultOutcome(False, "s", False, True, True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.stale = True  # type: ignore[misc]


def test_fast_init_refuses_a_class_it_would_get_wrong() -> None:
    @dataclass
    class Mutable:
        a: int

    @dataclass(frozen=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    for cls in (Mutable, Post):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
