"""The state-shard coordinator: owner fencing, epochs, statistics and crash-safe snapshots."""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from leasefence.impl import coordinator as impl_module
from leasefence.impl.coordinator import (
    TASK_FIELDS,
    StateShardCoordinator,
    Stats,
    state_task_id,
)
from leasefence.impl.errors import (
    CoordinatorError,
    InvalidArgument,
    InvalidTtl,
    SnapshotError,
    UnknownTask,
)
from leasefence.model import coordinator as model
from leasefence.model.state import Coordinator


class Clock:
    """A settable Unix clock: tests move time by assignment, never by sleeping."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _checkpoint(path: Path) -> Any:
    """The checkpoint a snapshot file starts with (records of later changes may follow it)."""
    text = path.read_text()
    return json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))[0]


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _write_json(path: Path, doc: object) -> bytes:
    raw = json.dumps(doc).encode()
    path.write_bytes(raw)
    return raw


# -- state task identity -----------------------------------------------------------------------


def _task_of(payload: dict[str, Any]) -> str:
    return state_task_id(*(payload[name] for name in TASK_FIELDS))


def test_two_exact_work_payloads_with_the_same_six_fields_map_to_one_task() -> None:
    fields = {
        "input": {"path": "in/a.cnf", "size": 7},
        "focus": ["x1", "x2"],
        "target": "unsat-core",
        "action": "split",
        "schedule": [1, 2.5, None],
        "continuation": {"depth": 3, "hint": True},
    }
    first = {**fields, "work_id": "a" * 64, "parameter": 0.1, "algorithm": "cdcl"}
    second = {
        **fields,
        "work_id": "b" * 64,
        "parameter": 0.9,
        "algorithm": "lookahead",
        # The same JSON written differently: a tuple for a list, keys in another order.
        "focus": ("x1", "x2"),
        "continuation": {"hint": True, "depth": 3},
    }
    assert _task_of(first) == _task_of(second)
    assert len(_task_of(first)) == 64
    assert int(_task_of(first), 16) >= 0
    assert _task_of(first) != _task_of({**first, "action": "merge"})


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=8,
)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@given(
    fields=st.lists(_json_values, min_size=6, max_size=6),
    index=st.integers(0, 5),
    other=_json_values,
)
def test_changing_any_one_of_the_six_fields_changes_the_task(
    fields: list[object], index: int, other: object
) -> None:
    assume(_canonical(fields[index]) != _canonical(other))
    changed = list(fields)
    changed[index] = other
    assert state_task_id(*fields) == state_task_id(*list(fields))
    assert state_task_id(*fields) != state_task_id(*changed)


def _reference_task_id(fields: list[object]) -> str:
    """The definition: SHA-256 of the six fields as canonical JSON, written by ``json.dumps``."""
    named = dict(zip(TASK_FIELDS, fields, strict=True))
    text = json.dumps(named, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


class _Str(str):
    pass


@given(fields=st.lists(st.text(), min_size=6, max_size=6), index=st.integers(0, 5))
def test_six_strings_name_the_task_json_dumps_names(fields: list[object], index: int) -> None:
    """The fast path for six ``str`` (quotes, backslashes, control characters, non-ASCII and
    lone surrogates escaped as ``json.dumps`` escapes them) against the definition; a ``str``
    subclass names the same task."""
    assert state_task_id(*fields) == _reference_task_id(fields)
    subclassed = list(fields)
    subclassed[index] = _Str(fields[index])
    assert state_task_id(*subclassed) == _reference_task_id(fields)


@pytest.mark.parametrize(
    "text", ['"', "\\", "\n", "\x00", "\x7f", "é", "\ud800", "\U0001f600", "</"]
)
def test_each_escape_of_a_field_gives_the_task_json_dumps_gives(text: str) -> None:
    for index in range(6):
        fields: list[object] = ["in", "f", "t", "a", "s", "c"]
        fields[index] = f"x{text}y"
        assert state_task_id(*fields) == _reference_task_id(fields)


def _circular() -> list[object]:
    loop: list[object] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ({1, 2}, "not plain JSON: a set"),
        (math.nan, "not finite"),
        (b"bytes", "not plain JSON: a bytes"),
        ({1: "a"}, "key that is not a str"),
        ([object()], "focus[0] is not plain JSON"),
        (_circular(), "contains itself"),
    ],
    ids=["set", "nan", "bytes", "int-key", "object", "circular"],
)
def test_state_task_fields_that_are_not_plain_json_are_refused_with_the_field_named(
    value: object, fragment: str
) -> None:
    with pytest.raises(InvalidArgument, match="focus") as err:
        state_task_id("in", value, "t", "a", "s", None)
    assert fragment in str(err.value)


# -- F314 §4 item 4: owner fencing -------------------------------------------------------------


def test_an_active_state_task_cannot_be_taken_by_a_second_worker_and_a_wrong_owner_completion_has_no_effect() -> (
    None
):
    c = StateShardCoordinator(clock=Clock())
    assert c.lease("s1", 1)
    assert not c.lease("s1", 2)
    assert c.active_owner("s1") == 1
    assert c.leases["s1"].owner == 1

    assert not c.complete("s1", 2, reward=10.0, cost=3.0)
    assert not c.abandon("s1", 2, cost=3.0)
    assert not c.discard("s1", 2)
    assert c.active_owner("s1") == 1
    assert c.stats("s1") == Stats()

    assert c.complete("s1", 1, reward=10.0, cost=3.0)
    assert c.active_owner("s1") is None
    assert c.stats("s1") == Stats(completions=1, reward=10.0, cost=3.0)
    # A late or duplicated result of the finished lease is refused too.
    assert not c.complete("s1", 1, reward=10.0, cost=3.0)
    assert c.stats("s1") == Stats(completions=1, reward=10.0, cost=3.0)


@pytest.mark.parametrize("release", ["complete", "abandon", "discard"])
def test_after_complete_abandon_or_discard_the_task_can_be_leased_again(release: str) -> None:
    c = StateShardCoordinator(clock=Clock())
    assert c.lease("s1", 1)
    assert getattr(c, release)("s1", 1)
    assert c.lease("s1", 2)
    assert c.active_owner("s1") == 2


def test_complete_abandon_and_discard_move_exactly_the_documented_statistics() -> None:
    clock = Clock()
    c = StateShardCoordinator(clock=clock)
    assert c.lease("s1", 1)
    assert c.stats("s1") == Stats()  # leased: known, nothing booked
    assert c.complete("s1", 1, reward=2.5, cost=1.0)
    assert c.stats("s1") == Stats(completions=1, failures=0, reward=2.5, cost=1.0)
    assert c.lease("s1", 2)
    assert c.abandon("s1", 2, cost=0.5)
    assert c.stats("s1") == Stats(completions=1, failures=1, reward=2.5, cost=1.5)
    assert c.lease("s1", 3)
    assert c.discard("s1", 3)
    assert c.stats("s1") == Stats(completions=1, failures=1, reward=2.5, cost=1.5)
    assert c.lease("s1", 1)
    clock.now += 100
    assert c.recover_expired(10) == ["s1"]
    assert c.stats("s1") == Stats(completions=1, failures=1, reward=2.5, cost=1.5)

    assert c.lease("s2", 1)
    assert c.complete("s2", 1, reward=1.0, cost=4.0)
    assert c.totals() == Stats(completions=2, failures=1, reward=3.5, cost=5.5)
    assert set(c.statistics) == {"s1", "s2"}


@pytest.mark.parametrize("autosave", [True, False])
@pytest.mark.parametrize("call", ["lease", "complete", "abandon", "discard"])
def test_a_change_whose_record_cannot_be_made_changes_nothing_with_or_without_autosave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, autosave: bool
) -> None:
    # Without autosave (group commit) a change prepares no undo: its record is made before
    # anything changes, so a record that fails leaves leases, statistics and the pending log
    # as they were. (Making the record after the change, as the undo once allowed, fails here.)
    c = StateShardCoordinator(tmp_path / "s.json", clock=Clock(), autosave=autosave)
    assert c.lease("s1", 1, generation=(1, 1))
    assert c.complete("s1", 1, reward=1.0, cost=2.0, generation=(1, 1))
    if call != "lease":
        assert c.lease("s1", 2, generation=(1, 2))
    before = (dict(c.leases), dict(c.statistics), c.pending())

    def broken(*args: object) -> bytes:
        raise InvalidArgument("planted: no record")

    monkeypatch.setattr(impl_module, "lease_record" if call == "lease" else "free_record", broken)
    calls = {
        "lease": lambda: c.lease("s2", 2, generation=(1, 2)),
        "complete": lambda: c.complete("s1", 2, reward=1.0, cost=1.0, generation=(1, 2)),
        "abandon": lambda: c.abandon("s1", 2, cost=1.0, generation=(1, 2)),
        "discard": lambda: c.discard("s1", 2, generation=(1, 2)),
    }
    with pytest.raises(InvalidArgument, match="planted"):
        calls[call]()
    assert (dict(c.leases), dict(c.statistics), c.pending()) == before
    monkeypatch.undo()
    c.commit()
    reloaded = StateShardCoordinator(tmp_path / "s.json", clock=Clock(), autosave=False)
    assert dict(reloaded.statistics) == before[1]


def test_a_coordinator_without_a_file_makes_no_record_and_still_fences(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Without a snapshot path nothing is ever written, so no record is made (a record cost
    # more than the decision, issue 19); the answers are those of a coordinator with a file.
    # (Fails if a change without a file still makes its record.)
    def broken(*args: object) -> bytes:
        raise AssertionError("a record was made without a file")

    monkeypatch.setattr(impl_module, "lease_record", broken)
    monkeypatch.setattr(impl_module, "free_record", broken)
    c = StateShardCoordinator(clock=Clock(), autosave=False)
    assert c.lease("s1", 1, generation=(1, 1))
    assert not c.lease("s1", 2, generation=(1, 2))  # L1
    assert not c.complete("s1", 1, reward=1.0, generation=(1, 2))  # L2: another token
    assert c.complete("s1", 1, reward=1.0, cost=0.5, generation=(1, 1))
    assert c.stats("s1") == Stats(completions=1, reward=1.0, cost=0.5)
    assert c.lease("s1", 2)
    assert c.abandon("s1", 2, cost=0.25)
    assert not c.pending()
    assert c.stats("s1") == Stats(completions=1, failures=1, reward=1.0, cost=0.75)


def test_the_statistics_of_a_task_never_leased_raise_unknown_task_naming_it() -> None:
    c = StateShardCoordinator(clock=Clock())
    assert c.lease("s1", 1)
    assert not c.complete("s9", 1)  # an unknown task is refused, not an error
    with pytest.raises(UnknownTask, match="s9"):
        c.stats("s9")
    with pytest.raises(KeyError):
        c.stats("s9")
    assert c.active_owner("s9") is None
    for odd in (["s1"], 1, None):  # names no task: refused as unknown, not a TypeError
        assert c.active_owner(odd) is None
        with pytest.raises(UnknownTask, match="never leased"):
            c.stats(odd)


@pytest.mark.parametrize(
    "call",
    [
        lambda c: c.lease("", 1),
        lambda c: c.lease(7, 1),
        lambda c: c.lease("s2", "1"),
        lambda c: c.lease("s2", True),
        lambda c: c.complete("s1", 1, reward=math.nan),
        lambda c: c.complete("s1", 1, cost=math.inf),
        lambda c: c.abandon("s1", 1, cost=10**400),
        lambda c: c.lease("s2", 1, (True, 1)),
        lambda c: c.lease("s2", 1, [1, 1]),
        lambda c: c.lease("s2", 1, (1, -1)),
        lambda c: c.lease("s2", 1, (1, 2, 3)),
        lambda c: c.complete("s1", True),
        lambda c: c.complete(b"s1", 1),
        lambda c: c.abandon("s1", 1.0),
        lambda c: c.discard("s1", 1, (1,)),
        lambda c: c.complete("s1", 1, reward=True),
    ],
    ids=[
        "empty-task", "int-task", "str-rank", "bool-rank", "nan-reward", "inf-cost", "huge-cost",
        "bool-generation", "list-generation", "negative-generation", "long-generation",
        "complete-bool-rank", "complete-bytes-task", "abandon-float-rank", "discard-short-generation",
        "bool-reward",
    ],
)  # fmt: skip
def test_arguments_the_snapshot_could_not_hold_are_refused_before_any_effect(
    call: Any, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    before = path.read_bytes()
    with pytest.raises(InvalidArgument):
        call(c)
    assert c.active_owner("s1") == 1
    assert c.stats("s1") == Stats()
    assert path.read_bytes() == before


# -- refusals change nothing (L3) --------------------------------------------------------------


@pytest.mark.parametrize(
    "refused",
    [
        lambda c: c.lease("s1", 2),
        lambda c: c.lease("s1", 1),
        lambda c: c.complete("s1", 2, reward=5.0, cost=1.0),
        lambda c: c.abandon("s1", 2, cost=1.0),
        lambda c: c.discard("s1", 2),
        lambda c: c.complete("s9", 1, reward=5.0),
        lambda c: c.abandon("s9", 1),
        lambda c: c.discard("s9", 1),
        lambda c: c.recover_expired(3_600),
    ],
    ids=[
        "second-worker-lease",
        "same-worker-lease",
        "wrong-owner-complete",
        "wrong-owner-abandon",
        "wrong-owner-discard",
        "unknown-complete",
        "unknown-abandon",
        "unknown-discard",
        "nothing-to-recover",
    ],
)
def test_a_refusal_leaves_every_statistic_and_the_snapshot_file_unchanged(
    refused: Any, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 3)
    assert c.complete("s1", 3, reward=2.0, cost=1.0)
    assert c.lease("s1", 1)
    before = (path.read_bytes(), os.stat(path).st_ino, _files(tmp_path))
    stats, totals, leases = dict(c.statistics), c.totals(), dict(c.leases)

    assert refused(c) in (False, [])

    assert (path.read_bytes(), os.stat(path).st_ino, _files(tmp_path)) == before
    assert dict(c.statistics) == stats
    assert c.totals() == totals
    assert dict(c.leases) == leases


# -- recovery ----------------------------------------------------------------------------------


def test_recover_expired_voids_expired_and_future_dated_leases_and_keeps_live_ones() -> None:
    clock = Clock(1_000.0)
    c = StateShardCoordinator(clock=clock)
    for task, worker, stamp in [("old", 1, 900.0), ("live", 2, 950.0), ("future", 3, 1_200.0)]:
        clock.now = stamp
        assert c.lease(task, worker)
    clock.now = 1_000.0
    assert c.recover_expired(100) == ["future", "old"]
    assert c.active_owner("live") == 2
    assert c.recover_expired(0) == ["live"]
    assert c.leases == {}
    assert c.totals() == Stats()


@pytest.mark.parametrize("ttl", [-1, math.nan, math.inf])
def test_recover_expired_refuses_a_ttl_that_is_negative_or_not_finite(ttl: float) -> None:
    c = StateShardCoordinator(clock=Clock())
    assert c.lease("s1", 1)
    with pytest.raises(InvalidTtl):
        c.recover_expired(ttl)
    assert c.active_owner("s1") == 1


def test_the_ttl_and_autosave_are_read_as_given_compiled_or_not() -> None:
    """The TTL is refused naming the value given (``-1``, not a float made of it) and an int
    TTL is taken; ``autosave`` is any truth value: what a compiled coordinator with typed
    parameters would convert or refuse with ``TypeError`` (the suite runs against the build)."""
    c = StateShardCoordinator(clock=Clock(), autosave=0)
    assert c.lease("s1", 1)
    with pytest.raises(InvalidTtl, match=r"got -1$"):
        c.recover_expired(-1)
    assert c.recover_expired(0) == ["s1"]


# -- F314 §4 item 5: snapshots across coordinator epochs (L6) ----------------------------------


def test_a_snapshot_across_a_coordinator_epoch_makes_leases_stale_and_keeps_legacy_time_out_of_statistics(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    clock = Clock(1_000.0)
    first = StateShardCoordinator(path, clock=clock)
    assert first.epoch == 1
    assert first.lease("s1", 1)
    assert first.complete("s1", 1, reward=4.0, cost=2.0)
    assert first.lease("s1", 2)
    assert first.lease("s2", 3)
    assert first.abandon("s2", 3, cost=1.0)
    assert first.lease("s2", 1)
    totals = first.totals()

    # The master dies without a goodbye; a new one loads the snapshot at the same wall time.
    second = StateShardCoordinator(path, clock=clock)
    assert second.epoch == 2
    assert second.totals() == totals
    assert second.stats("s1") == Stats(completions=1, reward=4.0, cost=2.0)
    assert {t: (x.owner, x.updated, x.epoch) for t, x in second.leases.items()} == {
        "s1": (2, 0.0, 1),
        "s2": (1, 0.0, 1),
    }
    assert second.active_owner("s1") is None
    assert not second.complete("s1", 2, reward=99.0)  # the old rank owns nothing now
    assert not second.discard("s2", 1)
    assert second.totals() == totals
    assert second.recover_expired(3_600) == ["s1", "s2"]  # even with a long TTL
    assert second.lease("s1", 4)
    assert second.leases["s1"].epoch == 2

    # A legacy snapshot: no clock tag, no schema, no epoch, monotonic times far in the "future".
    legacy = tmp_path / "legacy.json"
    _write_json(
        legacy,
        {
            "leases": {"s1": {"worker": 2, "updated": 9.9e8}, "s3": {"worker": 5, "updated": 12.5}},
            "stats": {"s1": {"completions": 3, "failures": 1, "reward": 6.0, "cost": 4.0}},
        },
    )
    migrated = StateShardCoordinator(legacy, clock=Clock(1_700_000_000.0))
    assert migrated.epoch == 1
    assert {t: (x.owner, x.updated, x.epoch) for t, x in migrated.leases.items()} == {
        "s1": (2, 0.0, 0),
        "s3": (5, 0.0, 0),
    }
    assert migrated.stats("s1") == Stats(completions=3, failures=1, reward=6.0, cost=4.0)
    assert migrated.stats("s3") == Stats()
    assert migrated.totals() == Stats(completions=3, failures=1, reward=6.0, cost=4.0)
    assert migrated.active_owner("s1") is None
    assert migrated.lease("s1", 7)  # a stale lease is no obstacle, whatever its old time
    assert migrated.leases["s1"].updated == 1_700_000_000.0
    assert migrated.recover_expired(3_600) == ["s3"]
    assert migrated.totals() == Stats(completions=3, failures=1, reward=6.0, cost=4.0)
    saved = _checkpoint(legacy)  # the checkpoint written at load; the log of changes follows it
    assert saved["clock"] == "unix"
    assert saved["schema"] == impl_module.SCHEMA
    assert saved["epoch"] == 1


def test_a_legacy_snapshot_is_copied_aside_before_it_is_first_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    original = _write_json(
        path, {"clock": "monotonic", "epoch": 4, "leases": {"s1": {"owner": 1, "updated": 3.0}}}
    )
    c = StateShardCoordinator(path, clock=Clock())
    assert c.epoch == 5
    assert c.leases["s1"].epoch == 4
    assert (tmp_path / "state.json.legacy").read_bytes() == original
    assert json.loads(path.read_text())["epoch"] == 5


def test_each_restart_starts_a_new_durable_epoch_even_without_changes(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    assert StateShardCoordinator(path, clock=Clock()).epoch == 1
    assert StateShardCoordinator(path, clock=Clock()).epoch == 2
    assert StateShardCoordinator(path, clock=Clock()).epoch == 3
    assert StateShardCoordinator(path, clock=Clock(), autosave=False).epoch == 4
    assert StateShardCoordinator(path, clock=Clock(), autosave=False).epoch == 4


def test_autosave_makes_every_successful_change_survive_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    assert c.complete("s1", 1, reward=1.5, cost=0.5)
    assert c.lease("s2", 2)
    # `c` is simply dropped: no save(), no close().
    reloaded = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert reloaded.stats("s1") == Stats(completions=1, reward=1.5, cost=0.5)
    assert reloaded.leases["s2"].owner == 2


def test_save_writes_a_unix_tagged_snapshot_readable_only_by_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock(1_234.5), autosave=False)
    assert not path.exists()
    assert c.lease("s1", 2)
    c.save()
    assert _files(tmp_path) == ["state.json"]
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text()) == {
        "schema": 1,
        "clock": "unix",
        "epoch": 1,
        "leases": {"s1": {"owner": 2, "updated": 1_234.5, "epoch": 1}},
        "stats": {"s1": {"completions": 0, "failures": 0, "reward": 0.0, "cost": 0.0}},
    }
    with pytest.raises(CoordinatorError, match="no snapshot path"):
        StateShardCoordinator(clock=Clock()).save()


# -- crashes -----------------------------------------------------------------------------------

# The child loads the snapshot, books one more completion, and saves; its os.replace reports the
# temporary file to the parent and blocks, so the parent can SIGKILL it between fsync and replace.
_CHILD = r"""
import os, sys
from leasefence.impl.coordinator import StateShardCoordinator

c = StateShardCoordinator(sys.argv[1], clock=lambda: 2_000.0, autosave=False)
assert c.lease("s1", 2)
assert c.complete("s1", 2, reward=5.0, cost=1.0)

def replace_blocked(src, dst):
    print(src, flush=True)
    sys.stdin.read()

os.replace = replace_blocked
c.save()
print("not killed", flush=True)
"""


@pytest.mark.timeout(120)
def test_a_crash_while_saving_leaves_the_old_snapshot_loadable(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    assert c.complete("s1", 1, reward=1.0, cost=1.0)
    old = path.read_bytes()

    with subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            line = child.stdout.readline() if child.stdout else ""
            assert line, child.stderr.read() if child.stderr else "child said nothing"
            temporary = Path(line.strip())
            assert temporary.parent == tmp_path
            # The new snapshot is complete and fsynced in the temporary file; then the crash.
            assert json.loads(temporary.read_text())["stats"]["s1"]["completions"] == 2
        finally:
            child.send_signal(signal.SIGKILL)
        assert child.wait() == -signal.SIGKILL

    assert path.read_bytes() == old
    survivor = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert survivor.epoch == 2
    assert survivor.stats("s1") == Stats(completions=1, reward=1.0, cost=1.0)
    assert survivor.leases == {}
    survivor.save()  # and the left-over temporary file is no obstacle to saving again
    assert StateShardCoordinator(path, clock=Clock(), autosave=False).epoch == 3


def test_a_partial_temporary_file_left_by_a_crash_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    assert c.complete("s1", 1, reward=1.0)
    torn = tmp_path / ".state.json.k3x9q_1a.tmp"
    torn.write_bytes(path.read_bytes()[:37])
    survivor = StateShardCoordinator(path, clock=Clock())
    assert survivor.stats("s1") == Stats(completions=1, reward=1.0)
    assert survivor.lease("s1", 2)
    assert StateShardCoordinator(path, clock=Clock()).leases["s1"].owner == 2


def test_a_failed_save_is_fatal_and_the_coordinator_refuses_every_later_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    before = path.read_bytes()

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(CoordinatorError, match=r"state\.json.*Input/output error"):
        c.complete("s1", 1, reward=1.0)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert _files(tmp_path) == ["state.json"]
    for call in (lambda: c.lease("s2", 2), lambda: c.discard("s1", 1), c.save):
        with pytest.raises(CoordinatorError, match="refused"):
            call()


def test_a_change_whose_save_is_interrupted_is_undone_with_its_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A save interrupted by something other than an OSError (here Ctrl-C in the append) leaves
    # the coordinator usable and the change undone: its record must go too, or the next commit
    # writes a lease that memory never held. (Fails if the undo keeps the pending record.)
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)

    def interrupted(*args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(impl_module, "append_records", interrupted)
    with pytest.raises(KeyboardInterrupt):
        c.lease("s2", 2)
    monkeypatch.undo()
    assert set(c.leases) == {"s1"}
    assert not c.pending()
    assert c.lease("s3", 3)
    assert set(StateShardCoordinator(path, clock=Clock()).leases) == {"s1", "s3"}


def test_a_commit_after_a_checkpoint_appends_only_the_changes_made_since_it(
    tmp_path: Path,
) -> None:
    # A checkpoint holds every change before it: the next commit appends only later ones. Were
    # the older records appended again, the free of a task whose lease the checkpoint already
    # dropped would make that batch bad: a torn tail, so the lease it acknowledged is lost on
    # the reopen that follows a crash, and a refused file once another commit follows.
    # (Fails if ``save`` leaves the records it folded in pending.)
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.lease("s1", 1)
    c.commit()  # the first write: a checkpoint
    assert c.complete("s1", 1, reward=1.0)
    c.save()  # the free of s1 folded into the checkpoint
    assert not c.pending()
    assert c.lease("s2", 2)
    c.commit()
    assert c.lease("s3", 3)
    c.commit()
    reopened = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert set(reopened.leases) == {"s2", "s3"}
    assert reopened.stats("s1") == Stats(completions=1, reward=1.0)


# -- bad snapshots -----------------------------------------------------------------------------

_GOOD: dict[str, Any] = {
    "schema": 1,
    "clock": "unix",
    "epoch": 2,
    "leases": {"s1": {"owner": 1, "updated": 5.0, "epoch": 2}},
    "stats": {"s1": {"completions": 1, "failures": 0, "reward": 1.0, "cost": 1.0}},
}


def _with(**changes: Any) -> bytes:
    return json.dumps({**_GOOD, **changes}).encode()


def _lease(**changes: Any) -> bytes:
    return _with(leases={"s1": {**_GOOD["leases"]["s1"], **changes}})


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"", "empty"),
        (b'{"schema": 1, "clock": "unix", "epo', "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[]", "not an object"),
        (b'{"epoch": 1, "epoch": 2}', "duplicate key 'epoch'"),
        (_with(epoch=float("nan")), "NaN is not a JSON number"),
        (json.dumps({k: v for k, v in _GOOD.items() if k != "stats"}).encode(), "no 'stats'"),
        (_with(extra=1), "unknown key 'extra'"),
        (_with(clock="monotonic"), "clock is 'monotonic'"),
        (_with(epoch=0), "epoch must be >= 1"),
        (_with(epoch=True), "epoch must be an int"),
        (_lease(epoch=3), "after the snapshot's epoch"),
        (_lease(owner="1"), "owner must be an int"),
        (_lease(updated=None), "updated must be a number"),
        (_with().replace(b'"updated": 5.0', b'"updated": 1e400'), "must be finite"),
        (_with(stats={"s1": {"completions": -1, "failures": 0, "reward": 0, "cost": 0}}), ">= 0"),
        (_with(stats={"s1": {"completions": 1}}), "no 'cost'"),
        (_with(leases=[]), "leases must be an object"),
        (b'{"clock": "unix", "leases": {}}', "no 'schema'"),
        (b'{"leases": {"s1": {"worker": 1, "owner": 2}}}', "exactly one of"),
        (b'{"leases": {"s1": {"updated": 2.0}}}', "exactly one of"),
        (b'{"leases": {"": {"worker": 1}}}', "empty task ID"),
        (b'{"tasks": {}}', "unknown key 'tasks'"),
    ],
)
def test_a_malformed_snapshot_is_refused_naming_the_path_and_left_untouched(
    raw: bytes, fragment: str, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(raw)
    with pytest.raises(SnapshotError) as err:
        StateShardCoordinator(path, clock=Clock())
    assert str(path) in str(err.value)
    assert fragment in str(err.value)
    assert isinstance(err.value, ValueError)
    assert path.read_bytes() == raw
    assert _files(tmp_path) == ["state.json"]


@pytest.mark.parametrize("schema", [0, 2, "1", None])
def test_a_snapshot_of_another_schema_version_is_refused_with_the_version_named(
    schema: object, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    raw = _with(schema=schema)
    path.write_bytes(raw)
    with pytest.raises(SnapshotError, match=f"unsupported schema version {schema!r}"):
        StateShardCoordinator(path, clock=Clock())
    assert path.read_bytes() == raw


def test_a_valid_snapshot_loads_into_the_next_epoch(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    path.write_bytes(_with())
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.epoch == 3
    assert c.leases["s1"].epoch == 2
    assert c.stats("s1") == Stats(completions=1, reward=1.0, cost=1.0)


# -- agreement with the reference model --------------------------------------------------------

_tasks = st.sampled_from(["s1", "s2", "s3"])
_ranks = st.integers(1, 3)
_amounts = st.integers(0, 3)
_steps = st.one_of(
    st.tuples(st.just("lease"), _tasks, _ranks),
    st.tuples(st.just("complete"), _tasks, _ranks, _amounts, _amounts),
    st.tuples(st.just("abandon"), _tasks, _ranks, _amounts),
    st.tuples(st.just("discard"), _tasks, _ranks),
    st.tuples(st.just("recover"), st.integers(0, 3)),
    st.tuples(st.just("tick"), st.integers(-3, 3)),
    st.tuples(st.just("restart")),
)


def _abstract(c: StateShardCoordinator) -> tuple[object, ...]:
    booked = {t: s for t, s in c.statistics.items() if s.completions or s.failures}
    return (
        c.epoch,
        {t: (x.owner, x.updated, x.epoch) for t, x in c.leases.items()},
        {t: (s.completions, s.failures, s.reward, s.cost) for t, s in booked.items()},
    )


def _model_abstract(m: Coordinator) -> tuple[object, ...]:
    return (
        m.epoch,
        {t: (x.owner, x.updated, x.epoch) for t, x in m.leases},
        {t: (s.completions, s.failures, s.reward, s.cost) for t, s in m.stats},
    )


@given(st.lists(_steps, max_size=25))
def test_the_implementation_agrees_with_the_model_call_by_call(
    steps: list[tuple[Any, ...]],
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "state.json"
        clock = Clock(10.0)
        c = StateShardCoordinator(path, clock=clock, autosave=False)
        m = Coordinator()
        wall = 10
        for step in steps:
            got: object
            want: object
            match step:
                case ("lease", task, rank):
                    got = c.lease(task, rank)
                    want, m = model.lease_state(m, task, rank, wall, 0)
                case ("complete", task, rank, reward, cost):
                    got = c.complete(task, rank, reward=reward, cost=cost)
                    want, m = model.complete_state(m, task, rank, reward, cost)
                case ("abandon", task, rank, cost):
                    got = c.abandon(task, rank, cost=cost)
                    want, m = model.abandon_state(m, task, rank, cost)
                case ("discard", task, rank):
                    got = c.discard(task, rank)
                    want, m = model.discard_state(m, task, rank)
                case ("recover", ttl):
                    got = c.recover_expired(ttl)
                    gone, m = model.recover_states(m, ttl, wall, 0)
                    want = list(gone)
                case ("tick", delta):
                    wall += delta
                    clock.now = float(wall)
                    got = want = None
                case ("restart",):
                    c.save()
                    c = StateShardCoordinator(path, clock=clock, autosave=False)
                    m = model.restart_coordinator(m)
                    got = want = None
                case _:
                    raise AssertionError(step)
            assert got == want, step
            assert _abstract(c) == _model_abstract(m), step


# -- every release API checks the whole owner token (issue 12's generation fence) --------------


@pytest.mark.parametrize(
    "release",
    [
        lambda c, g: c.complete("s1", 1, reward=5.0, cost=1.0, generation=g),
        lambda c, g: c.abandon("s1", 1, cost=1.0, generation=g),
        lambda c, g: c.discard("s1", 1, generation=g),
    ],
    ids=["complete", "abandon", "discard"],
)
def test_a_release_presenting_another_generation_of_the_owner_rank_is_refused_without_effect(
    release: Any, tmp_path: Path
) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1, generation=(1, 2))
    before = path.read_bytes()
    for other in [(1, 1), (1, 3), (2, 2), None]:
        assert release(c, other) is False, other
        assert c.active_owner("s1") == 1
        assert c.stats("s1") == Stats()
        assert path.read_bytes() == before
    assert release(c, (1, 2)) is True  # the exact token releases it
    assert c.active_owner("s1") is None
