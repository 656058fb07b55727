"""A faster ``__init__`` for the frozen dataclasses made on every decision (issue 19).

A frozen dataclass's own ``__init__`` sets each field with ``object.__setattr__`` (its
``__setattr__`` refuses), which made building the five or six small values of every task (a WORK,
a RESULT, an envelope, an active dispatch, an outcome) cost three times what a plain class
costs. ``fast_init`` gives such a class an ``__init__`` that stores the same values, with the
same parameters, defaults and default factories, straight into the instance's ``__dict__``;
the class stays frozen (assignment refused), and equality, hashing, ``repr``, ``fields`` and
``replace`` are the dataclass's own. A class with ``__slots__`` (``slots=True``) has no
``__dict__``: its ``__init__`` stores each value with its slot's own setter (the member
descriptor's ``__set__``), which the frozen ``__setattr__`` does not stand in front of (a
coordinator's lease and statistics, two of every task: 0.54 to 0.31 us each). Only for a frozen
dataclass without ``__post_init__``, init-only or keyword-only fields (checked).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

try:  # mypy's, which compiles the dispatcher (``harness/compiled.py``); a plain install has none
    from mypy_extensions import mypyc_attr as mypyc_attr
except ImportError:  # pragma: no cover - installed without mypy: the decorator does nothing

    def mypyc_attr(*attrs: str, **kwattrs: object) -> Callable[[T], T]:
        return lambda cls: cls


# A class of a compiled module that code outside the build subclasses (a hook, a test's
# recorder) says ``@mypyc_attr(allow_interpreted_subclasses=True)``: mypyc refuses such a
# subclass otherwise. (Spelled out at each class: mypyc reads the decorator's call itself.)

#: The default of a parameter whose field has a default factory (a value no caller passes).
_FACTORY: Any = object()


def fast_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass, module doc) with the ``__init__`` described there."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass")
    slots = vars(cls).get("__slots__")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} has a __post_init__")
    every = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init or f.kw_only for f in every) or len(every) != len(
        getattr(cls, "__dataclass_fields__", {})
    ):
        raise TypeError(f"fast_init: {cls.__name__} has init-only, keyword-only or hidden fields")
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    args: list[str] = []
    body: list[str] = []
    for f in every:
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory_{f.name}()")
        else:
            args.append(f.name)
    if slots is None:
        body.append("    values = self.__dict__")
        body.extend(f"    values[{f.name!r}] = {f.name}" for f in every)
    else:
        if set(slots) != {f.name for f in every}:
            raise TypeError(f"fast_init: {cls.__name__} has slots that are not its fields")
        for f in every:
            names[f"_set_{f.name}"] = vars(cls)[f.name].__set__  # the slot's own setter
            body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body) + "\n"
    exec(source, names)  # (as ``dataclasses`` makes its own ``__init__``)
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 (mypy refuses an assignment to a method)
    return cls
