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


@dataclass(frozen=True)
class Plain:
    a: int
    b: str
    c: float = 0.5
    d: dict[str, Any] = field(default_factory=dict)
    e: tuple[int, int] | None = None


@fast_init
@dataclass(frozen=True)
class Fast:
    a: int
    b: str
    c: float = 0.5
    d: dict[str, Any] = field(default_factory=dict)
    e: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class PlainSlots:
    a: int
    b: str
    c: float = 0.5
    d: dict[str, Any] = field(default_factory=dict)
    e: tuple[int, int] | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class FastSlots:
    a: int
    b: str
    c: float = 0.5
    d: dict[str, Any] = field(default_factory=dict)
    e: tuple[int, int] | None = None


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
    # dropped or the factory's object is shared between instances.)
    plain, fast = Plain(*args, **kwargs), Fast(*args, **kwargs)
    assert vars(fast) == vars(plain)
    assert Fast(1, "x").d is not Fast(1, "x").d
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        Fast()
    assert dataclasses.replace(fast, a=9) == Fast(9, *list(vars(fast).values())[1:])
    # And a class with slots (no ``__dict__``): every slot set, frozen, equal to its twin.
    slotted, twin = FastSlots(*args, **kwargs), PlainSlots(*args, **kwargs)
    assert _values(slotted) == _values(twin)
    assert not hasattr(slotted, "__dict__")
    assert repr(slotted).replace("FastSlots", "PlainSlots") == repr(twin)
    assert FastSlots(1, "x").d is not FastSlots(1, "x").d
    with pytest.raises(dataclasses.FrozenInstanceError):
        slotted.a = 2  # type: ignore[misc]
    with pytest.raises(TypeError):
        FastSlots()
    assert dataclasses.replace(slotted, a=9) == FastSlots(9, *list(_values(slotted).values())[1:])


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
