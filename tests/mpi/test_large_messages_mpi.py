"""Real ``mpiexec`` jobs whose WORKs and RESULTs are larger than MPI's eager limit (MPICH: one
8 KiB cell of its shared-memory queue). Such a message is sent only once its receiver takes it;
a worker sending a large RESULT waits for the master, and a master whose send of a large WORK to
that worker blocked waited for the worker: both for ever. The master posts its sends
(``MpiTransport``); every item must complete, exactly once, whatever the sizes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from leasefence.harness import compiled

pytestmark = pytest.mark.mpi

BIN = Path(sys.executable).parent
#: Generous: the job takes about a second; a hang is what this catches (the job's own watchdog
#: prints every rank's stack after ``WATCHDOG`` seconds and exits, so the failure says where).
TIMEOUT = 240
WATCHDOG = 90

JOB = """
import dataclasses, faulthandler, os, sys
faulthandler.dump_traceback_later({watchdog}, exit=True)
from leasefence.harness.compiled import EVERY_RANK, activate
activate(os.environ.get("LEASEFENCE_JOB_ENGINE", "interpreted"), EVERY_RANK)
from mpi4py import MPI
from leasefence.harness.bench.memory_journal import MemoryJournal
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.master import Master, StepClock
from leasefence.impl.poll import node_policy
from leasefence.impl.transport import MpiTransport, master_dispatch, worker_execute
from leasefence.impl.workload import Outcome, generate, work_id_of
from leasefence.harness.compiled import is_compiled

items, size, hostile = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
comm = MPI.COMM_WORLD
policy = node_policy(comm)
if comm.Get_rank() == 1 and hostile:  # a message far over the frame limit, tagged RESULT
    comm.Send([bytearray(b"x" * hostile), MPI.BYTE], dest=0, tag=2)
if comm.Get_rank() != 0:
    worker_execute(comm, lambda work: Outcome(True, 0.0, {{"blob": "y" * size}}), poll=policy)
    sys.exit(0)
catalogue = []
for item in generate(items, seed=0):
    payload = dict(item.payload, blob="x" * size)
    catalogue.append(
        dataclasses.replace(item, payload=payload, work_id=work_id_of(payload), work_text=None)
    )
clock = StepClock()
master = Master(
    MemoryJournal(clock), StateShardCoordinator(None, clock=clock, autosave=False), catalogue,
    ttl=3600.0, clock=clock, pipeline=64, fence="generation", group_commit=True,
)
transport = MpiTransport(comm, policy)
master = master_dispatch(master, transport)
c = master.counters
print("completed", c.completed, "duplicates", c.duplicate_completions, "sending", transport.sending)
print("malformed", c.malformed_messages)
print("compiled", is_compiled(sys.modules["leasefence.impl.transport"]))
"""


@pytest.mark.parametrize(
    ("ranks", "size"),
    [(3, 10_000), (3, 50_000), (2, 30_000), (4, 20_000)],
)
def test_large_works_and_results_never_deadlock(tmp_path: Path, ranks: int, size: int) -> None:
    """Fails (by the job's watchdog or the timeout) if the master blocks in a send while a worker
    blocks in its own to the master; and if an item is not completed exactly once, or a send
    of the master's is still outstanding once every worker has said BYE."""
    items = 400
    script = tmp_path / "job.py"
    script.write_text(JOB.format(watchdog=WATCHDOG))
    cmd = [str(BIN / "mpiexec"), "-n", str(ranks), sys.executable, str(script), str(items)]
    proc = subprocess.run(
        [*cmd, str(size), "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"completed {items} duplicates 0 sending 0" in proc.stdout, proc.stdout + proc.stderr
    assert "malformed 0" in proc.stdout, proc.stdout + proc.stderr


@pytest.mark.timeout(1_800)  # the compiled case may build first (as tests/unit/test_compiled.py)
@pytest.mark.parametrize("engine", ["interpreted", "compiled"])
def test_a_message_far_over_the_frame_limit_is_refused_and_the_run_goes_on(
    tmp_path: Path, engine: str
) -> None:
    """A worker sends 64 MiB tagged RESULT before it starts: the master takes it off MPI's queue
    without reading it whole (``mpi_receive``), counts one malformed message, names its size, and
    every item still completes exactly once, with the interpreted modules and with the build on
    every rank. Fails if the truncated receive leaves the message (or the worker's send) behind,
    or if the master stops on it."""
    if engine == "compiled":
        try:  # (made once, about a minute; tests/unit/test_compiled.py uses the same build)
            compiled.compile_validator(say=lambda _line: None)
        except compiled.NoToolchain as exc:
            pytest.skip(f"no compiled dispatcher can be built here: {exc}")
    items, hostile = 50, 64 * 1024 * 1024
    script = tmp_path / "job.py"
    script.write_text(JOB.format(watchdog=WATCHDOG))
    cmd = [str(BIN / "mpiexec"), "-n", "3", sys.executable, str(script), str(items), "100"]
    proc = subprocess.run(
        [*cmd, str(hostile)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env=dict(os.environ, LEASEFENCE_JOB_ENGINE=engine),
    )
    out = proc.stdout + proc.stderr
    assert f"compiled {engine == 'compiled'}" in proc.stdout, out
    assert proc.returncode == 0, out
    assert f"completed {items} duplicates 0 sending 0" in proc.stdout, out
    assert "malformed 1" in proc.stdout, out
    assert f"rank 1 sent a message of {hostile} bytes (tag 2), over the limit" in proc.stderr, out
