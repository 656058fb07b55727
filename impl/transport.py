"""Moving messages between the master and its workers: the MPI loops and an in-process twin.

``master_dispatch`` (rank 0) and ``worker_execute`` (every other rank) are the pair that runs a
job. The master loop talks to a ``Transport``: ``MpiTransport`` in a real run, or
``InProcessTransport``, which runs the worker function directly in the same process, without
MPI, sleeps or real time.

Nothing in these loops decides anything: every decision is a ``Master`` method. How a side waits
for its next message (spin, yield, sleep or block on ``Improbe``/``Probe``, adapted to a node
with more ranks than cores) is ``leasefence.impl.poll``'s.

Hooks, not fields (etcd's raft): the loops offer hooks and know no fault. A worker turns its
result into the messages it sends with a ``Respond`` function (the honest ``respond`` unless one
is passed in), and holds a ``Reply`` its ``hold`` seconds; ``InProcessTransport`` takes the same
``respond`` and a ``pick`` of the next ready message; ``master_dispatch`` calls a
``DispatchHooks`` (on dispatch, on result, on progress, and whether and how to restart the master
inside the job). Every fault that plugs into them lives in ``leasefence.harness.faults``.
"""

from __future__ import annotations

import gc
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from leasefence.impl.errors import ProtocolError
from leasefence.impl.frozen import fast_init, mypyc_attr
from leasefence.impl.poll import READY, PollPolicy, guess_policy, mpi, receive
from leasefence.impl.wire import (
    FROM_MASTER,
    FROM_WORKER,
    MAX_CPU_S,
    MAX_FRAME_BYTES,
    NEWLINE,
    Bye,
    Message,
    Rank,
    Result,
    Stop,
    Tag,
    Work,
    claimed_work_id,
    decode,
    decode_frame,
    encode,
    encode_frames,
    frame_messages,
    frames,
    read_frame,
)
from leasefence.impl.workload import Outcome, WorkerFn

if TYPE_CHECKING:  # a worker rank never loads the master's modules (start-up, issue 19)
    from leasefence.impl.master import Master, ResultOutcome

log = logging.getLogger("leasefence.transport")

#: Container objects allocated (net) between two young-generation collections of the cyclic
#: garbage collector while a loop runs; CPython's default is 700. A message makes a few
#: short-lived containers that reference counting frees, and with the default a young
#: collection ran every few dozen messages, walking every young object still alive (a deep
#: pipeline's dispatches among them): 7,600 instructions a task of the master's and its
#: workers' 215,000 in process, 15,000 items (callgrind; with this, 650). Garbage in cycles is
#: still collected, in larger batches (issue 19).
YOUNG_COLLECTION_EVERY = 10_000


@contextmanager
def fewer_collections(every: int = YOUNG_COLLECTION_EVERY) -> Iterator[None]:
    """Collect the young generation every ``every`` allocations at least (see
    ``YOUNG_COLLECTION_EVERY``) while the block runs, then as before. A threshold of 0 (the
    collector turned off by its threshold) is left as it is."""
    young, middle, old = gc.get_threshold()
    if young:
        gc.set_threshold(max(young, every), middle, old)
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


@dataclass(frozen=True, init=False)
class Envelope:
    """One received message before decoding: its source rank (the fence), tag and bytes."""

    source: int
    tag: int
    data: bytes

    def __init__(self, source: int, tag: int, data: bytes) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.source = source  # type: ignore[misc]
        self.tag = tag  # type: ignore[misc]
        self.data = data  # type: ignore[misc]


fast_init(Envelope)


class Transport(Protocol):
    """How the master loop reaches the workers."""

    @property
    def worker_ranks(self) -> tuple[Rank, ...]: ...

    def send(self, rank: Rank, msg: Message) -> None: ...

    def send_many(self, rank: Rank, msgs: Sequence[Message]) -> None:
        """``msgs`` (all WORK, in order) to ``rank`` in as few frames as ``wire.frames`` makes."""
        ...

    def receive(self, timeout: float) -> Envelope | None:
        """The next message from any worker, or None after ``timeout`` seconds."""
        ...


@dataclass(frozen=True, init=False)
class Reply:
    """One message a worker sends for a WORK, held ``hold`` seconds before it goes out (0: at
    once; a worker keeps taking work meanwhile)."""

    tag: int
    data: bytes
    hold: float = 0.0

    def __init__(self, tag: int, data: bytes, hold: float = 0.0) -> None:
        # Compiled: native. Interpreted: replaced by ``fast_init`` (impl/frozen.py).
        self.tag = tag  # type: ignore[misc]
        self.data = data  # type: ignore[misc]
        self.hold = hold  # type: ignore[misc]


fast_init(Reply)


#: How a worker turns its result into the messages it sends: ``(result, rank, attempt)`` to
#: replies, ``attempt`` counting the WORKs of that work ID this rank received before.
Respond = Callable[[Result, int, int], Sequence[Reply]]


def result_of(work: Work, worker_fn: WorkerFn) -> Result:
    """Run ``work`` and build its RESULT, echoing the master's state task ID and the WORK's
    generation (protocol v1). An exception in the worker function, or an outcome that no RESULT
    can carry (``outcome_fault``), is a failed result whose output says why: the worker function
    is user code, and its mistakes must neither stop the worker nor reach the master as a
    malformed message."""
    try:
        outcome: object = worker_fn(work)  # (``object``: checked below, in either engine)
    except Exception as exc:  # the worker function is user code: report, do not die
        log.exception("worker function failed on %s", work.work_id[:12])
        return _failed(work, repr(exc)[:500])
    fault = outcome_fault(outcome)
    if fault is not None or not isinstance(outcome, Outcome):
        log.error("worker function's outcome for %s refused: %s", work.work_id[:12], fault)
        return _failed(work, f"the worker function's outcome is refused: {fault}")
    cpu = outcome.cpu_s
    return Result(
        work.work_id,
        work.state_task_id,
        outcome.ok,
        cpu if type(cpu) is float else _seconds(cpu) or 0.0,
        outcome.output,
        work.generation,
    )


def _failed(work: Work, error: str) -> Result:
    return Result(work.work_id, work.state_task_id, False, 0.0, {"error": error}, work.generation)


def outcome_fault(outcome: object) -> str | None:
    """Why a worker function's ``outcome`` cannot be a RESULT (None: it can): not an
    ``Outcome``, ``ok`` not a bool, ``cpu_s`` not a number of seconds in ``0..MAX_CPU_S``
    (``_seconds``), ``output`` not a mapping. The same verdicts in either engine: a compiled
    ``Outcome`` refuses some of these values when it is made (``TypeError``, in the worker
    function: a failed result as well) and stores ``cpu_s`` as ``float()`` of it, which
    ``_seconds`` does here too."""
    if not isinstance(outcome, Outcome):
        return f"a worker function returns an Outcome, not {type(outcome).__name__}"
    # (``object``: interpreted, an ``Outcome`` stores whatever it was given)
    ok: object = outcome.ok
    cpu: object = outcome.cpu_s
    output: object = outcome.output
    if type(ok) is not bool:
        return f"Outcome.ok must be True or False, got {ok!r:.40}"
    if _seconds(cpu) is None:
        return f"Outcome.cpu_s must be a number of seconds in 0..{MAX_CPU_S:g}, got {cpu!r:.40}"
    if type(output) is not dict and not isinstance(output, Mapping):
        return f"Outcome.output must be a mapping (a JSON object), got {type(output).__name__}"
    return None


def _seconds(value: object) -> float | None:
    """``value`` as seconds of CPU (``float()`` of a number, as a compiled ``Outcome`` stores
    it; never of a string), or None when that fails or is outside ``0..MAX_CPU_S`` (NaN is)."""
    if type(value) is float:
        number = value
    elif isinstance(value, (str, bytes, bytearray)):
        return None
    else:
        try:
            number = float(value)  # type: ignore[arg-type]
        except (TypeError, ValueError, OverflowError):
            return None
    return number if 0.0 <= number <= MAX_CPU_S else None


def encode_result(result: Result) -> tuple[int, bytes]:
    """The RESULT's tag and bytes; an output that cannot be encoded becomes a failed result
    whose output says why (its CPU time kept when it is a number of seconds, else 0)."""
    try:
        return encode(result)
    except (ProtocolError, TypeError, ValueError) as exc:
        return encode(
            Result(
                result.work_id,
                result.state_task_id,
                False,
                _seconds(result.cpu_s) or 0.0,
                {"error": str(exc)[:500]},
                result.generation,
            )
        )


def respond(result: Result, rank: int, attempt: int) -> list[Reply]:
    """The honest worker's ``Respond``: the result, once, at once."""
    return [Reply(*encode_result(result))]


def execute(
    work: Work, worker_fn: WorkerFn, rank: int, attempt: int, respond: Respond = respond
) -> list[Reply]:
    """Run ``work`` and build the messages a worker sends back (``respond``'s)."""
    return list(respond(result_of(work, worker_fn), rank, attempt))


class ManualClock:
    """A Unix clock that moves only when told (in-process runs: no real waiting)."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@mypyc_attr(allow_interpreted_subclasses=True)
class InProcessTransport:
    """Workers as plain function calls in this process.

    ``send(rank, WORK)`` runs the worker function at once and queues the replies ``respond``
    makes of its result. A reply with a ``hold`` is held for that many seconds of ``clock`` (a
    ``ManualClock``, which ``receive`` advances by its timeout whenever nothing is ready, so
    leases expire without waiting); without a manual clock a held reply is delivered only once
    nothing else is ready. ``receive`` hands over the ready reply ``pick(n)`` chooses of the
    ``n`` ready (default: the oldest). With ``frame_results`` a worker answers a WORK frame as
    ``worker_execute`` does when its items are quick: the RESULTs of the frame in frames
    (``wire.frames``), a fault's reply alone with the RESULTs before it sent first; without, a
    reply is one message (``pick`` then reorders single RESULTs).
    """

    def __init__(
        self,
        worker_fn: WorkerFn,
        ranks: Iterable[int] = (1, 2, 3),
        *,
        respond: Respond = respond,
        pick: Callable[[int], int] | None = None,
        clock: ManualClock | None = None,
        frame_results: bool = False,
    ) -> None:
        self._ranks = tuple(Rank(r) for r in ranks)
        self.frame_results = frame_results
        self.worker_fn = worker_fn
        self.respond = respond
        self.pick = pick
        self.clock = clock
        self.queue: list[tuple[float | None, Envelope]] = []  # (release time or None, message)
        self.sent: Counter[int] = Counter()
        self.attempts: Counter[tuple[int, str]] = Counter()
        self.stopped: set[int] = set()

    @property
    def worker_ranks(self) -> tuple[Rank, ...]:
        return self._ranks

    def send(self, rank: Rank, msg: Message) -> None:
        self._arrive(rank, *encode(msg))

    def send_many(self, rank: Rank, msgs: Sequence[Message]) -> None:
        tag, framed = encode_frames(msgs)
        for frame in framed:
            self._arrive(rank, tag, frame)

    def _arrive(self, rank: Rank, tag: int, data: bytes) -> None:
        """The bytes MPI would carry reach the worker of ``rank``: taken apart and decoded as
        ``worker_execute`` does, each message then taken (``take``) in order, the RESULTs of
        the frame held to be sent together under ``frame_results``."""
        batch: list[bytes] | None = [] if self.frame_results else None
        for msg in frame_messages(tag, data, FROM_MASTER):
            if isinstance(msg, ProtocolError):
                raise msg
            self.take(rank, msg, batch)
        self._flush(rank, batch)

    def take(self, rank: Rank, decoded: Message, batch: list[bytes] | None = None) -> None:
        """The worker of ``rank`` takes one decoded message from the master; a RESULT sent at
        once joins ``batch`` (when given) instead of going alone."""
        if isinstance(decoded, Stop):
            self._flush(rank, batch)
            self.queue = [(None, e) if e.source == rank else (t, e) for t, e in self.queue]
            self._put(None, Envelope(rank, *encode(Bye(self.sent[rank]))))
            self.stopped.add(rank)
            return
        assert isinstance(decoded, Work)
        attempt = self.attempts[rank, decoded.work_id]
        self.attempts[rank, decoded.work_id] += 1
        for reply in execute(decoded, self.worker_fn, rank, attempt, self.respond):
            if (
                batch is not None
                and reply.hold <= 0
                and reply.tag == Tag.RESULT
                and NEWLINE not in reply.data
            ):
                batch.append(reply.data)
                continue
            due: float | None = None
            if reply.hold > 0:  # held: the RESULTs before it may still go together
                due = self.clock() + reply.hold if self.clock is not None else float("inf")
            else:  # alone, after the RESULTs before it
                self._flush(rank, batch)
            self._put(due, Envelope(rank, reply.tag, reply.data))

    def _flush(self, rank: Rank, batch: list[bytes] | None) -> None:
        """Send the RESULTs held in ``batch`` in frames, and empty it."""
        if batch:
            for frame in frames(batch):
                self._put(None, Envelope(rank, Tag.RESULT, frame), frame.count(b"\n") + 1)
            batch.clear()

    def inject_raw(self, source: int, tag: int, data: bytes) -> None:
        """Queue arbitrary bytes as if ``source`` had sent them (tests of the decoder path)."""
        self._put(None, Envelope(source, tag, data))

    def _put(self, due: float | None, env: Envelope, results: int = 1) -> None:
        """Queue ``env``, which carries ``results`` RESULT messages if it is a RESULT."""
        if env.tag == Tag.RESULT:
            self.sent[env.source] += results
        self.queue.append((due, env))

    def ready(self) -> Envelope | None:
        """A reply ready now (not one held beyond the clock), or None; never advances the
        clock."""
        now = self.clock() if self.clock is not None else None
        ready = [
            i
            for i, (due, _) in enumerate(self.queue)
            if due is None or (now is not None and due <= now)
        ]
        if not ready:
            return None
        pick = ready[self.pick(len(ready))] if self.pick is not None else ready[0]
        return self.queue.pop(pick)[1]

    def receive(self, timeout: float) -> Envelope | None:
        now = self.clock() if self.clock is not None else None
        ready = [
            i
            for i, (due, _) in enumerate(self.queue)
            if due is None or (now is not None and due <= now)
        ]
        if not ready:
            if self.clock is not None:
                # time passes while nothing is ready, even with nothing queued: a lease whose
                # result will never come (one refused after an in-job restart) must expire
                self.clock.advance(timeout)
                return None
            if not self.queue:
                return None
            ready = [min(range(len(self.queue)), key=lambda i: self.queue[i][0] or 0.0)]
        pick = ready[self.pick(len(ready))] if self.pick is not None else ready[0]
        return self.queue.pop(pick)[1]


# -- MPI ---------------------------------------------------------------------------------------


def mpi_receive(
    comm: Any, source: int, timeout: float | None, policy: PollPolicy | None = None
) -> Envelope | None:
    """The next message from ``source`` (or any), waited for as ``policy`` says (default: ``auto``
    for this job's size, ``guess_policy``); None after ``timeout`` seconds (None: never).

    A message over ``MAX_FRAME_BYTES`` (neither side sends one) is not read whole: its sender
    says how large it is, and a hostile worker could say 2 GiB. It is taken off the queue into
    a buffer one byte over the limit (MPI truncates it, ``ERR_TRUNCATE``), its real size is
    logged, and those bytes are what comes back, which ``decode_frame`` refuses as too large
    (the master counts it as one malformed frame from its source). This needs MPI errors
    raised as exceptions, mpi4py's default (``mpi4py.rc.errors = "exception"``); with
    ``"fatal"`` MPI aborts the job on the truncation instead."""
    lib = mpi()
    got = receive(comm, source, timeout, policy if policy is not None else guess_policy(comm))
    if got is None:
        return None
    message, status = got
    size = status.Get_count(lib.BYTE)
    if size > MAX_FRAME_BYTES:
        return _oversized(lib, message, status, size)
    buf = bytearray(size)
    message.Recv([buf, lib.BYTE])
    return Envelope(status.Get_source(), status.Get_tag(), bytes(buf))


def _oversized(lib: Any, message: Any, status: Any, size: int) -> Envelope:
    """``mpi_receive`` of a message of ``size`` bytes, over ``MAX_FRAME_BYTES``: a buffer of
    ``MAX_FRAME_BYTES + 1`` bytes, the rest dropped by MPI (over shared memory MPICH fills the
    buffer with the message's first bytes; over its network module it may leave it zeros:
    either is refused on its length alone)."""
    buf = bytearray(MAX_FRAME_BYTES + 1)
    try:
        message.Recv([buf, lib.BYTE])
    except lib.Exception as exc:
        if exc.Get_error_class() != lib.ERR_TRUNCATE:
            raise
    source, tag = status.Get_source(), status.Get_tag()
    log.warning(
        "rank %d sent a message of %d bytes (tag %d), over the limit of %d: taken off the "
        "queue truncated to %d bytes, and refused",
        source, size, tag, MAX_FRAME_BYTES, len(buf),
    )  # fmt: skip
    return Envelope(source, tag, bytes(buf))


#: MPICH's names for the size of a cell of its shared-memory queue, in the order it reads them.
CELL_SIZE_ENV = (
    "MPIR_CVAR_CH4_SHM_POSIX_IQUEUE_CELL_SIZE",
    "MPIR_PARAM_CH4_SHM_POSIX_IQUEUE_CELL_SIZE",
    "MPICH_CH4_SHM_POSIX_IQUEUE_CELL_SIZE",
)
#: MPICH's cell size unless one of ``CELL_SIZE_ENV`` sets it (bytes).
DEFAULT_CELL_BYTES = 8192


def frame_bytes(environ: Mapping[str, str] = os.environ) -> int:
    """How large a frame a sender makes (``wire.frames``' ``limit``): what one cell of MPICH's
    shared-memory queue carries (``CELL_SIZE_ENV``, 8 KiB unless set), less 256 bytes for its
    header, and at least 256. A larger message goes through several cells and a protocol that
    needs the receiver: it completes only once the other rank, which is busy, takes it
    (measured with blocking sends, 20,000 trivial tasks on 3 ranks: rank 0's CPU 30 us a task
    with frames of 8,100 bytes, 80 us with 8,192 and beyond; ``MpiTransport`` now posts its
    sends, so that such a message never blocks the master, only waits). A value that is not a
    whole number of bytes is ignored with a warning naming it (MPICH itself would refuse it). A
    frame of one message is sent whatever its size: the limit only decides how many messages
    share a frame."""
    cell = DEFAULT_CELL_BYTES
    for name in CELL_SIZE_ENV:
        text = environ.get(name)
        if text is None:
            continue
        digits = text.strip()
        if digits.isascii() and digits.isdigit():
            cell = int(digits)
        else:
            log.warning("%s=%r is not a number of bytes: frames assume %d", name, text, cell)
        break
    return max(cell - 256, 256)


def mpi_send(comm: Any, dest: int, tag: int, data: bytes) -> None:
    lib = mpi()
    comm.Send([data, lib.BYTE], dest=dest, tag=tag)


class MpiTransport:
    """The master's side of MPI: rank 0 of ``comm`` talks to ranks 1..size-1.

    The master never blocks in a send: a message larger than MPI's eager limit (MPICH: one cell
    of its shared-memory queue, 8 KiB) is sent only once its receiver takes it, and a worker
    sending such a RESULT waits, in its blocking send, for the master to receive it. A blocking
    send of such a WORK to that worker then waited for the worker: both waited for ever (a WORK
    payload and an output of 10 kB each hung a 3-rank job at once). So every send is posted
    (``Isend``) and kept with its bytes until it completes (``_sending``); an eager send is
    complete when posted, and nothing is kept. The workers' sends may block: the master always
    comes back to receive. MPI keeps the order of two messages to one rank however they were
    sent, so a STOP still comes after the WORKs before it."""

    def __init__(self, comm: Any, poll: PollPolicy | None = None) -> None:
        self.comm = comm
        self.poll = poll if poll is not None else guess_policy(comm)
        self._ranks = tuple(Rank(r) for r in range(1, comm.Get_size()))
        self.frame_bytes = frame_bytes()
        #: Each posted send not known to be complete, with the bytes it sends (which must live
        #: until it is). At most the frames in flight to the workers: the pipeline bounds them.
        self._sending: list[tuple[Any, bytes]] = []

    @property
    def worker_ranks(self) -> tuple[Rank, ...]:
        return self._ranks

    @property
    def sending(self) -> int:
        """How many posted sends are not known to be complete yet."""
        self._reap()
        return len(self._sending)

    def send(self, rank: Rank, msg: Message) -> None:
        tag, data = encode(msg)
        self._post(rank, tag, data)

    def send_many(self, rank: Rank, msgs: Sequence[Message]) -> None:
        tag, framed = encode_frames(msgs, self.frame_bytes)
        for frame in framed:
            self._post(rank, tag, frame)

    def _post(self, rank: Rank, tag: int, data: bytes) -> None:
        lib = mpi()
        request = self.comm.Isend([data, lib.BYTE], dest=rank, tag=tag)
        self._sending.append((request, data))  # (kept before any other call can raise)
        if request.Test():  # an eager send is complete at once: nothing to keep
            self._sending.pop()

    def _reap(self) -> None:
        """Forget the sends that have completed, in one ``Testsome`` (which frees each one's
        request): a ``Test`` each cost pipeline x workers calls a turn once WORKs were large,
        each frame one WORK left pending until its worker took it (255 pending on 5 ranks:
        38 us a pass, against 5 us; whole jobs 20-25 % slower)."""
        lib = mpi()
        done = lib.Request.Testsome([request for request, _ in self._sending])
        if done is None:  # (MPI_UNDEFINED: no request was active any more)
            self._sending.clear()
        elif done:
            gone = set(done)
            self._sending = [kept for i, kept in enumerate(self._sending) if i not in gone]

    def receive(self, timeout: float) -> Envelope | None:
        lib = mpi()
        if self._sending:
            self._reap()
        return mpi_receive(self.comm, lib.ANY_SOURCE, timeout, self.poll)

    def ready(self) -> Envelope | None:
        """A message already waiting, or None at once: a few ``Improbe`` calls without pause
        (``poll.READY_POLLS``: MPICH may match a message that has arrived only on the second
        call, each call driving its progress engine once)."""
        lib = mpi()
        return mpi_receive(self.comm, lib.ANY_SOURCE, 0.0, READY)


# -- the pair ----------------------------------------------------------------------------------

OnResult = Callable[[Result, "ResultOutcome"], None]


def deliver(
    master: Master, env: Envelope, on_result: OnResult | None = None
) -> list[ResultOutcome | None]:
    """Take apart one frame from a worker (``wire.read_frame`` for a frame as the workers write
    it, else ``wire.decode_frame``) and hand each message in it to the master, in order; the
    outcome of each, None for one refused. A malformed, unknown or
    unexpected message is logged, counted and dropped, alone (a frame refused whole counts
    once); the master keeps going."""
    source = env.source
    outcomes: list[ResultOutcome | None] = []
    valid = read_frame(env.tag, env.data, FROM_WORKER)  # (a frame as a worker writes it)
    if valid is not None:
        rank = Rank(source)
        for result in valid:
            assert isinstance(result, Result)  # (a RESULT frame: the master takes no WORK)
            outcome = master.handle_result(rank, result)
            if on_result is not None:
                on_result(result, outcome)
            outcomes.append(outcome)
        return outcomes
    for line, msg in decode_frame(env.tag, env.data, FROM_WORKER):
        if isinstance(msg, Bye):
            msg = ProtocolError("BYE before STOP")
        if isinstance(msg, ProtocolError):
            master.count_malformed(source, msg, None if line is None else claimed_work_id(line))
            outcomes.append(None)
            continue
        assert isinstance(msg, Result)
        outcome = master.handle_result(Rank(source), msg)
        if on_result is not None:
            on_result(msg, outcome)
        outcomes.append(outcome)
    return outcomes


@mypyc_attr(allow_interpreted_subclasses=True)
class DispatchHooks:
    """What ``master_dispatch`` tells its caller, and asks it. Every hook here does nothing and
    never restarts (the no-op twin, as etcd's ``state_trace_nop.go``); a caller overrides what
    it needs (``leasefence run``'s report, a harness's faults and measurements)."""

    def on_dispatch(self, master: Master, rank: Rank, work: Work) -> None:
        """A WORK went out to ``rank``."""

    def on_result(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        """``master`` (the one running now) handled ``result`` from ``rank``."""

    def restart_due(self, master: Master, sent: Sequence[tuple[Rank, Work]]) -> bool:
        """Whether to restart the master inside the job now, right after ``sent`` went out."""
        return False

    def on_restart(self, old: Master, new: Master) -> None:
        """``old`` was restarted into ``new`` (``Master.restart_in_job``)."""

    def on_progress(self, master: Master) -> None:
        """One turn of the loop ended (and once more at the very end)."""


def master_dispatch(
    master: Master,
    transport: Transport,
    *,
    poll: float = 0.05,
    reclaim_every: float | None = None,
    hooks: DispatchHooks | None = None,
) -> Master:
    """The master loop (rank 0): dispatch to idle ranks, handle results, reclaim expired leases
    every ``reclaim_every`` seconds (default a quarter of the TTL), until every work item is
    completed or given up (or ``Master.starved`` says none of the rest can ever be); then STOP
    every worker and keep handling results until each has said BYE. A turn of the loop handles
    the results waiting, at most half the dispatches in flight (at least one frame), then
    dispatches again: its decisions share one group commit.

    When ``hooks.restart_due`` says so the master restarts inside the job
    (``Master.restart_in_job``: the workers keep running and the results in flight reach the new
    master); ``hooks.on_restart(old, new)`` is told, and the new master dispatches at once,
    before it handles any result. Returns the master at the end (the given one, or the last
    one it was restarted into), whose counters are the whole run's."""
    with fewer_collections():
        return _dispatch_loop(master, transport, poll, reclaim_every, hooks)


def _dispatch_loop(
    master: Master,
    transport: Transport,
    poll: float,
    reclaim_every: float | None,
    hooks: DispatchHooks | None,
) -> Master:
    hooks = hooks if hooks is not None else DispatchHooks()
    ranks = transport.worker_ranks
    every = reclaim_every if reclaim_every is not None else max(master.ttl / 4, 0.01)
    last = master.clock()
    ready: Callable[[], Envelope | None] = getattr(transport, "ready", lambda: None)

    # Hooks the caller left as they are do nothing: not called once a message then.
    told = type(hooks).on_dispatch is not DispatchHooks.on_dispatch

    def send_pending(m: Master) -> list[tuple[Rank, Work]]:
        sent = m.dispatch_pending(ranks)
        m.commit()  # group commit: every decision so far durable before a WORK leaves
        by_rank: dict[Rank, list[Work]] = {}
        for rank, work in sent:
            by_rank.setdefault(rank, []).append(work)
        for rank, works in by_rank.items():  # each rank's WORKs in frames (issue 19)
            transport.send_many(rank, works)
            if told:
                for work in works:
                    hooks.on_dispatch(m, rank, work)
        return sent

    def pump() -> Master:
        sent = send_pending(master)
        if not hooks.restart_due(master, sent):
            return master
        new = master.restart_in_job()
        hooks.on_restart(master, new)
        send_pending(new)
        return new

    quiet = type(hooks).on_result is DispatchHooks.on_result  # (no closure per result then)

    def handle(env: Envelope) -> list[ResultOutcome | None]:
        if quiet:
            return deliver(master, env)
        return deliver(master, env, lambda r, o: hooks.on_result(master, Rank(env.source), r, o))

    with master.clock.step():  # (the first dispatches are a turn too)
        master = pump()
    # Until every item is completed or given up, or nothing can change any more (starved).
    while not master.finished and not master.starved():
        env = transport.receive(poll)
        # One reading of the clock for the whole turn: every step of it (the results, the
        # reclaim, the dispatches) is stamped with the time its messages were in hand, and the
        # clock is read once a turn rather than twice a task (issue 19: a reading, stamped to
        # 10 us, cost a tenth of a round trip).
        with master.clock.step() as now:
            # The results already waiting, decided in one group: at most half the dispatches
            # in flight when the turn starts (at least one frame), so that the other half keeps
            # the workers busy until the turn's dispatches reach them. A turn that took every
            # result waiting went on while a quick worker's next frames kept arriving, so it
            # ended only once that worker had nothing left to do: the worker then waited for
            # the rest of the turn, and the master for the worker's next frame (issue 19).
            left = master.in_flight() // 2
            while env is not None:
                left -= len(handle(env))
                if left <= 0:
                    break
                env = ready()
            if now < last or now - last >= every:
                master.reclaim_expired()
                last = now
            master = pump()
        hooks.on_progress(master)
    master.commit()
    for rank in ranks:
        transport.send(rank, Stop())
    waiting = set(ranks)
    while waiting:
        env = transport.receive(poll)
        if env is None:
            continue
        if env.tag == Tag.BYE and env.source in waiting:
            try:
                decode(env.tag, env.data, FROM_WORKER)
            except ProtocolError as exc:
                master.count_malformed(env.source, exc)
            waiting.discard(env.source)
        else:
            handle(env)
    hooks.on_progress(master)
    return master


#: How long ``stop_workers`` waits for every worker's BYE (a worker finishes its current item
#: first) before it gives up.
STOP_TIMEOUT = 120.0


def stop_workers(transport: Transport, status: int, timeout: float = STOP_TIMEOUT) -> bool:
    """Stop every worker when the master cannot go on: STOP (carrying the exit ``status``) to
    each, then drop every message until each has said BYE. False if one has not within
    ``timeout`` seconds (the caller aborts the job)."""
    for rank in transport.worker_ranks:
        transport.send(rank, Stop(status))
    waiting = set(transport.worker_ranks)
    deadline = time.monotonic() + timeout
    while waiting and time.monotonic() < deadline:
        env = transport.receive(0.05)
        if env is not None and env.tag == Tag.BYE:
            waiting.discard(Rank(env.source))
    return not waiting


#: How long a worker keeps the RESULTs of one WORK frame to send them together (issue 19): a
#: RESULT is held only while the items after it are quick (``QUICK_ITEM_S``), and once held
#: this long all go. A worker cannot know how long its next item runs: a RESULT held behind a
#: quick item waits for the next item of its frame to end, however long that one runs, as a WORK
#: of the frame not yet started waits for the item before it.
RESULT_FRAME_S = 0.005
#: An item that runs at least this long sends the RESULTs held before it and its own at once:
#: batching pays for items of microseconds, not for items long enough to keep a rank busy.
QUICK_ITEM_S = 0.001


def worker_execute(
    comm: Any, worker_fn: WorkerFn, *, respond: Respond = respond, poll: PollPolicy | None = None
) -> int:
    """The worker loop (ranks 1..N-1): take WORK from rank 0, run it, send the replies
    ``respond`` makes of its result; on STOP send any held replies, then BYE (with the number of
    RESULT messages sent), and return the exit status the STOP carried.

    WORKs come in frames (``wire.frame_messages``); the RESULTs of one frame go back in frames too
    (``wire.frames``), sent when the frame is done, when an item took ``QUICK_ITEM_S`` or more,
    or when the first of them has been held ``RESULT_FRAME_S`` by the end of an item, whichever
    is first. Any other reply (a fault's) goes alone, in order (the RESULTs before it first). A
    reply with a ``hold`` is held that many seconds while the worker keeps taking work. A worker
    holding nothing waits for its next message without a deadline (``poll``: how).
    """
    with fewer_collections():
        return _work_loop(comm, worker_fn, respond, poll)


def _work_loop(comm: Any, worker_fn: WorkerFn, respond: Respond, poll: PollPolicy | None) -> int:
    rank = comm.Get_rank()
    policy = poll if poll is not None else guess_policy(comm)
    sent = 0
    attempts: Counter[str] = Counter()
    held: list[tuple[float, Reply]] = []
    results: list[bytes] = []  # the RESULTs of this frame not sent yet
    since = 0.0  # when the first of them was made
    limit = frame_bytes()

    def send(reply: Reply) -> None:
        nonlocal sent
        flush()
        mpi_send(comm, 0, reply.tag, reply.data)
        sent += reply.tag == Tag.RESULT

    def flush() -> None:
        nonlocal sent
        if results:
            for frame in frames(results, limit):
                mpi_send(comm, 0, Tag.RESULT, frame)
            sent += len(results)
            results.clear()

    while True:
        wait = None
        if held:  # (none held, the usual case: no list built, no clock read)
            due = [r for r in held if r[0] <= time.monotonic()]
            for item in due:
                held.remove(item)
                send(item[1])
            wait = min((t for t, _ in held), default=None)
        env = mpi_receive(
            comm, 0, None if wait is None else max(wait - time.monotonic(), 0.0), policy
        )
        if env is None:
            continue
        for msg in frame_messages(env.tag, env.data, FROM_MASTER):
            if isinstance(msg, ProtocolError):
                log.warning("rank %d dropped a malformed message from the master: %s", rank, msg)
                continue
            if isinstance(msg, Stop):
                flush()
                for _, reply in held:
                    send(reply)
                mpi_send(comm, 0, *encode(Bye(sent)))
                return msg.status
            assert isinstance(msg, Work)
            attempt = attempts.get(msg.work_id, 0)  # (``get``: no ``Counter.__missing__`` call)
            attempts[msg.work_id] = attempt + 1
            started = time.monotonic()
            for reply in execute(msg, worker_fn, rank, attempt, respond):
                if reply.hold > 0:
                    held.append((time.monotonic() + reply.hold, reply))
                elif reply.tag == Tag.RESULT and NEWLINE not in reply.data:
                    if not results:
                        since = started
                    results.append(reply.data)
                else:
                    send(reply)
            if results:
                now = time.monotonic()
                if now - since >= RESULT_FRAME_S or now - started >= QUICK_ITEM_S:
                    flush()
        flush()
