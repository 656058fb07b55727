"""The layouts of a WORK and a RESULT as ``msgspec`` reads them: a frame's messages read and
type-checked in one C call (``wire._typed_messages``, issue 19).

Each class is one message of protocol version 1 exactly as ``wire.encode`` writes it today:
every field present (the generation and the state task ID too), none other, fields in the
sorted order in which its text holds them. ``msgspec`` checks here what it can check in C:
each field's JSON type, the version and the type name, the ranges of ``cpu_s`` and of the
generation's parts, the lengths of the IDs. ``wire`` checks the rest (the characters of the
IDs) and builds the message; a text that does not fit, or that ``msgspec`` writes back
otherwise than it is (so a duplicate key, a space, an integer ``cpu_s``), is read by the other
paths, which decide and name what is wrong. ``gc=False``: a layout holds only what JSON
reads (its objects hold no layout), so it is never part of a cycle, and the collector need not
track the thousands a second a run makes. Interpreted on purpose: mypyc does not compile a
class whose metaclass is ``msgspec``'s, and ``wire`` reads these instances' fields as plain
attributes either way.
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from msgspec import Meta, Struct

from leasefence.impl.generation import MAX_GENERATION_PART

#: The largest ``cpu_s`` a RESULT may report (``wire.MAX_CPU_S``, repeated here: ``wire``
#: imports this module; tests/unit/test_fast_paths.py holds the two equal).
MAX_CPU_S: Final = 1e12

_Part = Annotated[int, Meta(ge=0, le=MAX_GENERATION_PART)]
_TaskId = Annotated[str, Meta(min_length=1, max_length=256)]
_WorkId = Annotated[str, Meta(min_length=64, max_length=64)]


class ResultLayout(Struct, forbid_unknown_fields=True, gc=False):
    """``{"cpu_s":S,"generation":[E,C],"ok":B,"output":{..},"state_task_id":"T","type":"result","v":1,"work_id":"W"}``"""

    cpu_s: Annotated[float, Meta(ge=0.0, le=MAX_CPU_S)]
    generation: tuple[_Part, _Part]
    ok: bool
    output: dict[str, Any]
    state_task_id: _TaskId
    type: Literal["result"]
    v: Literal[1]
    work_id: _WorkId


class WorkLayout(Struct, forbid_unknown_fields=True, gc=False):
    """``{"generation":[E,C],"payload":{..},"state_task_id":"T","type":"work","v":1,"work_id":"W"}``"""

    generation: tuple[_Part, _Part]
    payload: dict[str, Any]
    state_task_id: _TaskId
    type: Literal["work"]
    v: Literal[1]
    work_id: _WorkId
