"""``impl.frozen.fast_init``: the faster ``__init__`` of the frozen values made on every task."""

from __future__ import annotations

import dataclasses
import types
from dataclasses import dataclass, field
from typing import Any

import pytest

from leasefence.impl.coordvalues import StateLease, Stats
from leasefence.impl.frozen import FACTORY, fast_init
from leasefence.impl.master import ActiveDispatch, ResultOutcome
from leasefence.impl.transport import Envelope, Reply
from leasefence.impl.wire import Result, Work
from leasefence.impl.workload import Outcome

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
    w = Work("w", "t", work_text="{}")  # type: ignore[arg-type]
    assert w == Work("w", "t", {}, None)  # type: ignore[arg-type]  # work_text not compared
    assert w.work_text == "{}"
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


#: Values of each class of a compiled module written for mypyc (impl/frozen.py's module doc),
#: each field's value unlike the others' (two outcomes: every pair of its four flags differs in
#: one), so that an ``__init__`` assigning one field another's parameter is seen.
HOT = [
    Work("w", "t", {"k": 1}, (1, 2), "{}"),  # type: ignore[arg-type]
    Result("w", None, True, 0.5, {"s": "x"}, (1, 2)),  # type: ignore[arg-type]
    Envelope(1, 2, b"x"),
    Reply(2, b"x", 0.25),
    ActiveDispatch("w", "t", (("target", "x"),), (1, 2)),  # type: ignore[arg-type]
    ResultOutcome(False, "s", False, True, True),
    ResultOutcome(False, None, True, False, True),
    StateLease(2, 1.5, 3, (1, 2)),
    Stats(1, 2, 0.5, 0.25),
    Outcome(True, 0.5, {"s": "x"}),
    Outcome(False, 0.25, {"e": "y"}),
]


@pytest.mark.parametrize("value", HOT, ids=lambda v: type(v).__name__)
def test_a_value_of_a_compiled_module_is_native_under_the_build_and_frozen_either_way(
    value: Any,
) -> None:
    from tests.conftest import ENGINE_BUILD

    cls = type(value)
    own = vars(cls)["__init__"]
    if ENGINE_BUILD:  # native: a C struct, its own ``__init__`` compiled
        assert not hasattr(value, "__dict__")
        assert not isinstance(own, types.FunctionType)
    else:  # ``fast_init``'s, in place of the class's own (which the frozen class refuses)
        assert hasattr(value, "__dict__") == ("__slots__" not in vars(cls))
        assert own.__code__.co_filename == "<string>"
    values = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    assert cls(*values.values()) == value
    assert [getattr(cls(*values.values()), name) for name in values] == list(values.values())
    assert dataclasses.replace(value) == value
    if not any(isinstance(v, dict) for v in values.values()):  # (a message's dict: unhashable)
        assert hash(dataclasses.replace(value)) == hash(value)
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(value, next(iter(values)), None)


def test_a_default_factory_gives_a_fresh_value_compiled_or_not() -> None:
    a, b = Work("w", "t"), Work("w", "t")  # type: ignore[arg-type]
    assert a.payload == {}
    assert a.payload is not b.payload
    r = Result("w", None, True)  # type: ignore[arg-type]
    assert r.output == {}
    assert r.output is not Result("w", None, True).output
    o = Outcome(True)
    assert o.output == {}
    assert o.output is not Outcome(True).output


def test_fast_init_checks_a_classs_own_init_against_its_fields() -> None:
    # The form of a compiled module's class, interpreted here: its own ``__init__`` must take
    # the fields as the dataclass's would (a mismatch would store other values once compiled).
    def make(init: Any) -> Any:
        @dataclass(frozen=True, init=False)
        class Own:
            a: int
            b: dict[str, int] = field(default_factory=dict)
            c: int | None = None

        setattr(Own, "__init__", init)  # noqa: B010
        return Own

    def good(self: Any, a: int, b: Any = FACTORY, c: int | None = None) -> None:
        raise AssertionError("replaced")

    def reordered(self: Any, b: Any, a: int = 0, c: int | None = None) -> None: ...

    def other_default(self: Any, a: int, b: Any = FACTORY, c: int | None = 0) -> None: ...

    def no_factory(self: Any, a: int, b: Any = None, c: int | None = None) -> None: ...

    def keyword_only(self: Any, a: int, b: Any = FACTORY, *, c: int | None = None) -> None: ...

    cls = fast_init(make(good))
    assert (cls(1).a, cls(1).b, cls(1, {"x": 1}, 3).c) == (1, {}, 3)
    assert cls(1).b is not cls(1).b
    for bad in (reordered, other_default, no_factory, keyword_only):
        with pytest.raises(TypeError, match=r"fast_init: Own.__init__ takes \("):
            fast_init(make(bad))

    @dataclass(frozen=True, init=False)
    class Zero:
        c: int | None = None

    def zero_for_none(self: Any, c: Any = 0) -> None: ...

    def false_for_zero(self: Any, c: Any = False) -> None: ...

    setattr(Zero, "__init__", zero_for_none)  # noqa: B010
    with pytest.raises(TypeError, match="takes"):
        fast_init(Zero)

    @dataclass(frozen=True, init=False)
    class Number:
        c: int = 0

    setattr(Number, "__init__", false_for_zero)  # noqa: B010  (False == 0, of another type)
    with pytest.raises(TypeError, match="takes"):
        fast_init(Number)

    @dataclass(frozen=True)
    class OwnButInit:
        a: int

        def __init__(self, a: int) -> None:  # kept by ``dataclass``, replaced unseen otherwise
            object.__setattr__(self, "a", a * 2)

    with pytest.raises(TypeError, match="has its own __init__"):
        fast_init(OwnButInit)

    @dataclass(frozen=True, init=False)
    class NoInit:
        a: int

    with pytest.raises(TypeError, match="has no __init__"):
        fast_init(NoInit)
