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
coordinator's lease and statistics, kept for every state task: 0.54 to 0.31 us each). Only for a
frozen dataclass without ``__post_init__``, init-only or keyword-only fields (checked).

A class of a compiled module (``harness/compiled.py``) is written differently, since mypyc makes
a class with a decorator it does not know an interpreted one (a ``__dict__``, a Python
``__init__``, every attribute read a lookup): ``@dataclass(frozen=True, init=False)`` with its
own ``__init__`` assigning each field, and ``fast_init(cls)`` called after the class, not as a
decorator. Compiled, that ``__init__`` is native and the class's fields are slots of a C
struct (a WORK, a RESULT, a dispatch: 0.4 to 0.03 us each, issue 19) and ``fast_init`` leaves
the class as it is. Interpreted, the frozen ``__setattr__`` would refuse those assignments:
``fast_init`` checks that the class's ``__init__`` takes the fields' parameters with their
defaults (``FACTORY`` for a field with a default factory; a default of another type, ``0`` for
``0.0``, is refused) and replaces it as above. What it cannot check is the body: that each field
is assigned its own parameter (tests/unit/test_frozen.py builds each such class, compiled too,
from distinct values and reads them back). A class given ``init=True`` and an ``__init__`` of
its own (which ``dataclass`` keeps) is refused: ``fast_init`` would replace it unseen.

Under the build these classes behave as native classes do: no ``__dict__``, no weak
references, no subclass in interpreted code, no ``pickle``/``copy`` (their ``__init__`` takes
the fields, which ``copy``'s reconstruction does not pass; nothing copies them), a field typed
``float`` stores an ``int`` as a ``float``, one typed ``int`` stores an ``IntEnum`` or a
``bool`` as a plain ``int``, and a value of another type is refused with ``TypeError``.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
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

#: The default of a parameter whose field has a default factory (a value no caller passes):
#: a compiled class's own ``__init__`` (module doc) calls the factory when it gets this.
FACTORY: Any = object()


def fast_init(cls: type[T]) -> type[T]:
    """``cls`` (a frozen dataclass, module doc) with the ``__init__`` described there; a class
    of a compiled module as it is."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass")
    own = vars(cls).get("__init__")
    if params.init:
        if isinstance(own, types.FunctionType) and own.__code__.co_filename != "<string>":
            raise TypeError(f"fast_init: {cls.__name__} has its own __init__ (say init=False)")
        own = None  # the dataclass's, replaced below
    elif not isinstance(own, types.FunctionType):
        if own is None:
            raise TypeError(f"fast_init: {cls.__name__} has no __init__ (init=False)")
        return cls  # compiled: its own ``__init__`` is native (module doc)
    slots = vars(cls).get("__slots__")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init: {cls.__name__} has a __post_init__")
    every = dataclasses.fields(cls)  # type: ignore[arg-type]
    if any(not f.init or f.kw_only for f in every) or len(every) != len(
        getattr(cls, "__dataclass_fields__", {})
    ):
        raise TypeError(f"fast_init: {cls.__name__} has init-only, keyword-only or hidden fields")
    names: dict[str, Any] = {"FACTORY": FACTORY}
    args: list[str] = []
    body: list[str] = []
    for f in every:
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            args.append(f"{f.name}=FACTORY")
            body.append(f"    if {f.name} is FACTORY:\n        {f.name} = _factory_{f.name}()")
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
    if own is not None:
        _check_own_init(cls, own, every)
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body) + "\n"
    exec(source, names)  # (as ``dataclasses`` makes its own ``__init__``)
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__ if own is None else own.__doc__
    setattr(cls, "__init__", init)  # noqa: B010 (mypy refuses an assignment to a method)
    return cls


def _check_own_init(cls: type, own: types.FunctionType, every: tuple[Any, ...]) -> None:
    """``TypeError`` unless the class's own ``__init__`` takes exactly the fields, in order, as
    positional-or-keyword parameters with the fields' defaults, of the same type (``FACTORY`` for
    a factory): what its compiled form stores is then what the ``__init__`` that replaces it
    stores (given a body that assigns each field its parameter, module doc)."""
    wanted = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for f in every:
        default = inspect.Parameter.empty
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = FACTORY
        wanted.append(
            inspect.Parameter(f.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default)
        )
    got = [
        p.replace(annotation=inspect.Parameter.empty)
        for p in inspect.signature(own).parameters.values()
    ]
    if got != wanted or [type(p.default) for p in got] != [type(p.default) for p in wanted]:
        raise TypeError(
            f"fast_init: {cls.__name__}.__init__ takes ({', '.join(map(str, got[1:]))}), "
            f"its fields are ({', '.join(map(str, wanted[1:]))})"
        )
