"""Edges: files readable only by their owner, size limits with clear errors, and worker messages
never unpickled."""

from __future__ import annotations

import ast
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.errors import ProtocolError, RecordTooLarge
from leasefence.impl.journal import MAX_RECORD_BYTES, WorkLeaseJournal, lock_path
from leasefence.impl.wire import (
    FROM_WORKER,
    MAX_MESSAGE_BYTES,
    Bye,
    Result,
    Tag,
    WorkId,
    decode,
    encode,
)

IMPL = Path(__file__).resolve().parents[2] / "impl"
A, B = "a" * 64, "b" * 64


@pytest.fixture
def open_umask() -> Iterator[None]:
    """umask 0: whatever mode a file gets, the code asked for it."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
def test_journal_lock_broken_and_compacted_files_are_owner_only_even_with_umask_0(
    tmp_path: Path,
) -> None:
    path = tmp_path / ".work_leases.jsonl"
    with WorkLeaseJournal(path, clock=lambda: 1.0) as j:
        assert j.lease(A, 1)
    path.write_bytes(path.read_bytes() + b'{"torn')
    with WorkLeaseJournal(path, clock=lambda: 2.0) as j:
        assert j.lease(B, 2)  # cuts the torn tail into .broken
        j.compact()  # replaces the journal by a new file
    broken = path.with_name(path.name + ".broken")
    for p in (path, lock_path(path), broken):
        assert _mode(p) == 0o600, p


@pytest.mark.usefixtures("open_umask")
def test_snapshot_and_its_temporary_files_are_owner_only_even_with_umask_0(
    tmp_path: Path,
) -> None:
    snap = tmp_path / "state.json"
    c = StateShardCoordinator(snap, clock=lambda: 1.0)
    assert c.lease("t", 1)
    assert _mode(snap) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.json"]  # no temporary left


def test_a_record_over_the_line_limit_is_refused_naming_the_path_size_and_limit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "j.jsonl"
    with WorkLeaseJournal(path) as j:
        with pytest.raises(
            RecordTooLarge, match=rf"{path}.* over the {MAX_RECORD_BYTES}-byte limit"
        ):
            j.lease(A, 10**4000)
        assert j.leases == {}
    assert path.read_bytes() == b""


def test_a_worker_rank_too_long_to_print_is_refused_as_too_large(tmp_path: Path) -> None:
    with WorkLeaseJournal(tmp_path / "j.jsonl") as j, pytest.raises(RecordTooLarge):
        j.lease(A, 10**5000)


def test_messages_over_the_size_limit_are_refused_both_ways_with_the_sizes_named() -> None:
    big = Result(WorkId("0" * 64), None, True, 0.0, {"x": "y" * MAX_MESSAGE_BYTES})
    with pytest.raises(ProtocolError, match=rf"exceeds the limit of {MAX_MESSAGE_BYTES}"):
        encode(big)
    with pytest.raises(ProtocolError, match=rf"{MAX_MESSAGE_BYTES + 1} bytes exceeds"):
        decode(Tag.RESULT, b" " * (MAX_MESSAGE_BYTES + 1), FROM_WORKER)
    tag, data = encode(Bye(1))
    assert decode(tag, data + b" " * (MAX_MESSAGE_BYTES - len(data)), FROM_WORKER) == Bye(1)


#: mpi4py's lower-case communication calls pickle their payload; only buffer calls may be used.
PICKLING_CALLS = {
    "recv",
    "irecv",
    "mrecv",
    "imrecv",
    "sendrecv",
    "bcast",
    "scatter",
    "gather",
    "allgather",
    "alltoall",
    "reduce",
    "allreduce",
}
PICKLE_MODULES = {"pickle", "cPickle", "_pickle", "marshal", "shelve", "dill", "cloudpickle"}


def _impl_sources() -> list[Path]:
    return sorted(IMPL.glob("*.py"))


@pytest.mark.parametrize("source", _impl_sources(), ids=lambda p: p.name)
def test_no_implementation_module_unpickles_or_uses_a_pickling_mpi_call(source: Path) -> None:
    tree = ast.parse(source.read_text(), filename=str(source))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & PICKLE_MODULES, source
        elif isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] not in PICKLE_MODULES, source
            assert "pickle" not in {a.name for a in node.names}, source  # mpi4py's MPI.pickle
        elif isinstance(node, ast.Attribute):
            assert node.attr not in PICKLING_CALLS, f"{source.name}:{node.lineno} .{node.attr}"
            assert node.attr != "pickle", f"{source.name}:{node.lineno} MPI.pickle"


def test_the_master_side_receives_into_a_byte_buffer_and_decodes_json() -> None:
    transport = (IMPL / "transport.py").read_text()
    assert ".Recv([buf, lib.BYTE])" in transport  # lib: the mpi4py.MPI module (poll.mpi)
    assert "decode(" in transport


def test_a_pickled_result_is_refused_without_being_unpickled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pickle

    payload = pickle.dumps({"v": 1, "type": "result"})

    def never(*args: object, **kwargs: object) -> object:
        raise AssertionError("a worker message was unpickled")

    monkeypatch.setattr(pickle, "loads", never)
    monkeypatch.setattr(pickle, "load", never)
    monkeypatch.setattr(pickle, "Unpickler", never)
    with pytest.raises(ProtocolError):
        decode(Tag.RESULT, payload, FROM_WORKER)
