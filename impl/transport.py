"""Moving messages between the master and its workers: the MPI loops and an in-process twin.

``master_dispatch`` (rank 0) and ``worker_execute`` (every other rank) are the pair that runs a
job. The master loop talks to a ``Transport``: ``MpiTransport`` in a real run, or
``InProcessTransport``, which runs the worker function directly in the same process and can
inject the faults F314 worries about (late, duplicated, reordered and malformed results, a
wrong or missing reported state ID) without MPI, sleeps or real time. One fault is the master's
own: ``RestartFault`` restarts it inside the running job (``--inject restart``), so that results
in flight cross a master restart while the workers keep running.

Nothing in these loops decides anything: every decision is a ``Master`` method. Neither side
ever blocks inside MPI: receiving is ``Improbe`` plus a short, growing sleep (MPICH busy-polls
in a blocking receive, which would starve the solver on a machine with fewer cores than ranks).
"""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from leasefence.impl.errors import ProtocolError
from leasefence.impl.master import Master, ResultOutcome
from leasefence.impl.wire import (
    FROM_MASTER,
    FROM_WORKER,
    Bye,
    Message,
    Rank,
    Result,
    StateTaskId,
    Stop,
    Tag,
    Work,
    decode,
    encode,
)
from leasefence.impl.workload import Outcome, WorkerFn

log = logging.getLogger("leasefence.transport")

#: Faults a worker can be told to inject (``leasefence run --inject``).
WORKER_INJECTIONS = ("late", "dup", "wrong-id", "missing-id", "malformed", "reorder")
#: Faults the master injects into itself: ``restart`` (``RestartFault``).
MASTER_INJECTIONS = ("restart",)
INJECTIONS = WORKER_INJECTIONS + MASTER_INJECTIONS

# Messages a "malformed" injection sends before the real result, in turn.
_GARBAGE: tuple[tuple[int, bytes], ...] = (
    (Tag.RESULT, b"\x80\x04\x95 not JSON, a pickle header"),
    (Tag.RESULT, b'{"v":1,"type":"result","work_id":"not-hex","ok":true,"cpu_s":0,"output":{}}'),
    (Tag.RESULT, b'{"v":2,"type":"result"}'),
    (99, b'{"v":1,"type":"mystery"}'),
    (Tag.WORK, b'{"v":1,"type":"work"}'),
)


@dataclass(frozen=True)
class Envelope:
    """One received message before decoding: its source rank (the fence), tag and bytes."""

    source: int
    tag: int
    data: bytes


class Transport(Protocol):
    """How the master loop reaches the workers."""

    @property
    def worker_ranks(self) -> tuple[Rank, ...]: ...

    def send(self, rank: Rank, msg: Message) -> None: ...

    def receive(self, timeout: float) -> Envelope | None:
        """The next message from any worker, or None after ``timeout`` seconds."""
        ...


@dataclass(frozen=True)
class Injection:
    """Which faults a worker injects, and how often: each (kind, work, rank, attempt) is hit
    with probability ``rate``, decided by a hash of the seed, so runs are reproducible."""

    kinds: frozenset[str] = frozenset()
    rate: float = 0.15
    seed: int = 0

    @classmethod
    def parse(cls, text: str | None, *, rate: float = 0.15, seed: int = 0) -> Injection:
        """``late,dup,wrong-id`` → an Injection; ``ValueError`` naming an unknown kind."""
        kinds = frozenset(k.strip() for k in (text or "").split(",") if k.strip())
        if unknown := sorted(kinds - set(INJECTIONS)):
            raise ValueError(
                f"unknown fault(s) {', '.join(unknown)}; known: {', '.join(INJECTIONS)}"
            )
        return cls(kinds, rate, seed)

    def hits(self, kind: str, work_id: str, rank: int, attempt: int) -> bool:
        if kind not in self.kinds:
            return False
        digest = hashlib.sha256(f"{self.seed}:{kind}:{work_id}:{rank}:{attempt}".encode())
        return int.from_bytes(digest.digest()[:8], "big") < self.rate * 2**64


@dataclass(frozen=True)
class Reply:
    """One message a worker sends for a WORK; ``late`` ones are held back before sending."""

    tag: int
    data: bytes
    late: bool = False


def execute(
    work: Work, worker_fn: WorkerFn, rank: int, inject: Injection, attempt: int
) -> list[Reply]:
    """Run ``work`` and build the messages a worker sends back, with any injected faults.

    The worker echoes the master's state task ID and the WORK's generation (protocol v1)
    unless told to report a wrong task or none: ``missing-id`` is an old-protocol worker, which
    reports neither a task nor a generation. An exception in the worker function is a failed
    result.
    """
    try:
        outcome = worker_fn(work)
    except Exception as exc:  # the worker function is user code: report, do not die
        log.exception("worker function failed on %s", work.work_id[:12])
        outcome = Outcome(False, 0.0, {"error": repr(exc)[:500]})
    reported: StateTaskId | None = work.state_task_id
    generation = work.generation
    if inject.hits("wrong-id", work.work_id, rank, attempt):
        reported = StateTaskId(hashlib.sha256(f"wrong:{reported}".encode()).hexdigest())
    elif inject.hits("missing-id", work.work_id, rank, attempt):
        reported, generation = None, None
    result = Result(work.work_id, reported, outcome.ok, outcome.cpu_s, outcome.output, generation)
    try:
        tag, data = encode(result)
    except ProtocolError as exc:
        tag, data = encode(
            Result(work.work_id, reported, False, outcome.cpu_s, {"error": str(exc)}, generation)
        )
    replies: list[Reply] = []
    if inject.hits("malformed", work.work_id, rank, attempt):
        bad_tag, bad = _GARBAGE[int(work.work_id[:8], 16) % len(_GARBAGE)]
        replies.append(Reply(bad_tag, bad))
    late = inject.hits("late", work.work_id, rank, attempt)
    replies.append(Reply(tag, data, late))
    if inject.hits("dup", work.work_id, rank, attempt):
        replies.append(Reply(tag, data, late))
    return replies


class ManualClock:
    """A Unix clock that moves only when told (in-process runs: no real waiting)."""

    def __init__(self, start: float = 1_767_225_600.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class InProcessTransport:
    """Workers as plain function calls in this process, with injectable faults.

    ``send(rank, WORK)`` runs the worker function at once and queues its replies. A late
    reply is held for ``late_s`` seconds of ``clock`` (a ``ManualClock``, which ``receive``
    advances by its timeout whenever nothing is ready, so leases expire without waiting);
    without a manual clock a late reply is delivered only once nothing else is ready. With
    ``reorder`` in the injection, ``receive`` picks any ready reply (seeded), not the oldest.
    """

    def __init__(
        self,
        worker_fn: WorkerFn,
        ranks: Iterable[int] = (1, 2, 3),
        *,
        inject: Injection | None = None,
        clock: ManualClock | None = None,
        late_s: float = 0.0,
    ) -> None:
        self._ranks = tuple(Rank(r) for r in ranks)
        self.worker_fn = worker_fn
        self.inject = inject or Injection()
        self.clock = clock
        self.late_s = late_s
        self.queue: list[tuple[float | None, Envelope]] = []  # (release time or None, message)
        self.sent: Counter[int] = Counter()
        self.attempts: Counter[tuple[int, str]] = Counter()
        self.stopped: set[int] = set()
        self._rng = random.Random(self.inject.seed)

    @property
    def worker_ranks(self) -> tuple[Rank, ...]:
        return self._ranks

    def send(self, rank: Rank, msg: Message) -> None:
        tag, data = encode(msg)  # the same bytes MPI would carry
        decoded = decode(tag, data, FROM_MASTER)
        if isinstance(decoded, Stop):
            self.queue = [(None, e) if e.source == rank else (t, e) for t, e in self.queue]
            self._put(None, Envelope(rank, *encode(Bye(self.sent[rank]))))
            self.stopped.add(rank)
            return
        assert isinstance(decoded, Work)
        attempt = self.attempts[rank, decoded.work_id]
        self.attempts[rank, decoded.work_id] += 1
        for reply in execute(decoded, self.worker_fn, rank, self.inject, attempt):
            due: float | None = None
            if reply.late:
                due = self.clock() + self.late_s if self.clock is not None else float("inf")
            self._put(due, Envelope(rank, reply.tag, reply.data))

    def inject_raw(self, source: int, tag: int, data: bytes) -> None:
        """Queue arbitrary bytes as if ``source`` had sent them (tests of the decoder path)."""
        self._put(None, Envelope(source, tag, data))

    def _put(self, due: float | None, env: Envelope) -> None:
        if env.tag == Tag.RESULT:
            self.sent[env.source] += 1
        self.queue.append((due, env))

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
        pick = self._rng.choice(ready) if "reorder" in self.inject.kinds else ready[0]
        return self.queue.pop(pick)[1]


# -- MPI ---------------------------------------------------------------------------------------


def _mpi_receive(comm: Any, source: int, timeout: float) -> Envelope | None:
    """The next message from ``source`` (or any), polled with ``Improbe`` and a growing sleep
    (0.2 ms up to 5 ms), so a waiting rank uses almost no CPU; None after ``timeout``."""
    from mpi4py import MPI

    status = MPI.Status()
    deadline = time.monotonic() + timeout
    pause = 0.0002
    while True:
        message = comm.improbe(source=source, tag=MPI.ANY_TAG, status=status)
        if message is not None:
            buf = bytearray(status.Get_count(MPI.BYTE))
            message.Recv([buf, MPI.BYTE])
            return Envelope(status.Get_source(), status.Get_tag(), bytes(buf))
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        time.sleep(min(pause, remaining))
        pause = min(pause * 2, 0.005)


def _mpi_send(comm: Any, dest: int, tag: int, data: bytes) -> None:
    from mpi4py import MPI

    comm.Send([data, MPI.BYTE], dest=dest, tag=tag)


class MpiTransport:
    """The master's side of MPI: rank 0 of ``comm`` talks to ranks 1..size-1."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self._ranks = tuple(Rank(r) for r in range(1, comm.Get_size()))

    @property
    def worker_ranks(self) -> tuple[Rank, ...]:
        return self._ranks

    def send(self, rank: Rank, msg: Message) -> None:
        tag, data = encode(msg)
        _mpi_send(self.comm, rank, tag, data)

    def receive(self, timeout: float) -> Envelope | None:
        from mpi4py import MPI

        return _mpi_receive(self.comm, MPI.ANY_SOURCE, timeout)


# -- the pair ----------------------------------------------------------------------------------

OnResult = Callable[[Result, ResultOutcome], None]


def deliver(
    master: Master, env: Envelope, on_result: OnResult | None = None
) -> ResultOutcome | None:
    """Decode one message from a worker and hand it to the master. A malformed, unknown or
    unexpected message is logged, counted and dropped; the master keeps going."""
    try:
        msg = decode(env.tag, env.data, FROM_WORKER)
        if isinstance(msg, Bye):
            raise ProtocolError("BYE before STOP")
    except ProtocolError as exc:
        master.count_malformed(env.source, exc)
        return None
    assert isinstance(msg, Result)
    outcome = master.handle_result(Rank(env.source), msg)
    if on_result is not None:
        on_result(msg, outcome)
    return outcome


#: A dispatch as the restart fault remembers it: (rank, work, generation or None).
Dispatched = tuple[Rank, str, Any]


@dataclass
class RestartFault:
    """``leasefence run --inject restart``: the master restarts inside the running job.

    ``restart_in_job`` closes the master and opens a new one on the same journal, snapshot and
    trace (``Master.restart_master``: a new coordinator epoch, recovery with the TTL, its memory
    of dispatches lost, a ``RestartMaster`` trace event) while the workers keep running, so
    every result in flight reaches the new master. (A SIGKILL of rank 0 cannot show that: the
    whole ``mpiexec`` job dies with it, and the results with their workers.)

    When: armed once ``every`` results have been handled since the last (re)start, it fires
    right after the next round of dispatches that gave a rank its last free slot while that
    rank still held another dispatch (at depth 1: after any dispatch). That is where the model's
    counterexample of rank fencing at depth 2 starts (``leasefence model check --pipeline 2
    --fence rank``): a restart forgets a dispatch whose rank then gets another. No clock and no
    randomness: the points depend only on the order of the results.

    It also counts what crossed: results for a dispatch made before the last restart
    (``crossed``), of which the new master refused as stale or whose state commit it refused
    (``crossed_refused``), and of which committed a state task that a live dispatch of another
    work item on the same rank held (``state_taken``: the damage the model predicts for rank
    fencing; generation fencing keeps it at 0).
    """

    every: int = 10
    handled: int = 0
    restarts: int = 0
    crossed: int = 0
    crossed_refused: int = 0
    state_taken: int = 0
    in_flight: set[Dispatched] = field(default_factory=set, repr=False)

    def due(self, master: Master, sent: Iterable[tuple[Rank, Work]]) -> bool:
        """Whether to restart now, right after ``sent`` went out."""
        if self.handled < self.every:
            return False
        return any(len(master.dispatches(rank)) >= master.pipeline for rank, _ in sent)

    def restart(self, master: Master) -> Master:
        """``restart_in_job``, remembering what was in flight."""
        self.in_flight |= {(r, d.work_id, d.generation) for r, d in master.dispatches()}
        self.handled = 0
        self.restarts += 1
        return restart_in_job(master)

    def observe(self, master: Master, rank: Rank, result: Result, outcome: ResultOutcome) -> None:
        """Count one handled result (called after ``master.handle_result``)."""
        self.handled += 1
        gen = result.generation  # None: rank fencing, or an old-protocol result
        if not any(
            (r, w) == (rank, result.work_id) and (gen is None or g in (None, gen))
            for r, w, g in self.in_flight
        ):
            return
        self.crossed += 1
        if outcome.stale or (outcome.task is not None and not outcome.state_ok):
            self.crossed_refused += 1
        if outcome.state_ok and any(
            d.task_id == outcome.task and d.work_id != result.work_id
            for _, d in master.dispatches(rank)
        ):
            self.state_taken += 1
            log.error(
                "rank %d: a result of work %s from before the restart completed state task %s, "
                "held by its live dispatch of another work item",
                rank,
                result.work_id[:12],
                str(outcome.task)[:12],
            )


def restart_in_job(master: Master) -> Master:
    """RestartMaster inside a running job: ``master.restart_master()``, then the run's counters
    (summed: the new master's own start with what its recovery reclaimed), the failures per work
    ID (toward ``max_failures``) and the run's fault settings carried to the new master. Its memory of dispatches is not carried: that is the
    restart. ``duplicate_completions`` stays exact: the new master counts against every
    completion in the journal."""
    new = master.restart_master()
    for f in fields(new.counters):
        setattr(
            new.counters, f.name, getattr(master.counters, f.name) + getattr(new.counters, f.name)
        )
    new.failures = master.failures.copy()  # the run's count toward max_failures (given up)
    new.duplicate_candidates = master.duplicate_candidates
    new.duplicate_rng = master.duplicate_rng
    return new


def master_dispatch(
    master: Master,
    transport: Transport,
    *,
    poll: float = 0.05,
    reclaim_every: float | None = None,
    on_result: OnResult | None = None,
    progress: Callable[[Master], None] | None = None,
    restart: RestartFault | None = None,
    on_restart: Callable[[Master, Master], None] | None = None,
) -> Master:
    """The master loop (rank 0): dispatch to idle ranks, handle results, reclaim expired leases
    every ``reclaim_every`` seconds (default a quarter of the TTL), until every work item is
    completed; then STOP every worker and keep handling results until each has said BYE.

    With ``restart`` the master restarts inside the job when the fault says so
    (``RestartFault``); ``on_restart(old, new)`` is told, and the new master dispatches at once,
    before it handles any result. Returns the master at the end (the given one, or the last
    one it was restarted into), whose counters are the whole run's."""
    ranks = transport.worker_ranks
    every = reclaim_every if reclaim_every is not None else max(master.ttl / 4, 0.01)
    last = master.clock()

    def pump() -> Master:
        sent = master.dispatch_pending(ranks)
        for rank, work in sent:
            transport.send(rank, work)
        if restart is None or not restart.due(master, sent):
            return master
        new = restart.restart(master)
        if on_restart is not None:
            on_restart(master, new)
        for rank, work in new.dispatch_pending(ranks):
            transport.send(rank, work)
        return new

    def handle(env: Envelope) -> None:
        def seen(result: Result, outcome: ResultOutcome) -> None:
            if restart is not None:
                restart.observe(master, Rank(env.source), result, outcome)
            if on_result is not None:
                on_result(result, outcome)

        deliver(master, env, seen)

    master = pump()
    while not master.finished:
        env = transport.receive(poll)
        if env is not None:
            handle(env)
        now = master.clock()
        if now < last or now - last >= every:
            master.reclaim_expired()
            last = now
        master = pump()
        if progress is not None:
            progress(master)
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
    if progress is not None:
        progress(master)
    return master


def worker_execute(
    comm: Any,
    worker_fn: WorkerFn,
    *,
    inject: Injection | None = None,
    late_s: float = 0.0,
) -> int:
    """The worker loop (ranks 1..N-1): take WORK from rank 0, run it, send RESULT; on STOP send
    any held (late) replies, then BYE, and return the number of RESULT messages sent.

    A late reply (``--inject late``) is held for ``late_s`` seconds while the worker keeps
    taking work, so it reaches the master after its lease was reclaimed.
    """
    inject = inject or Injection()
    rank = comm.Get_rank()
    sent = 0
    attempts: Counter[str] = Counter()
    held: list[tuple[float, Reply]] = []

    def send(reply: Reply) -> None:
        nonlocal sent
        _mpi_send(comm, 0, reply.tag, reply.data)
        sent += reply.tag == Tag.RESULT

    while True:
        due = [r for r in held if r[0] <= time.monotonic()]
        for item in due:
            held.remove(item)
            send(item[1])
        wait = min((t for t, _ in held), default=time.monotonic() + 1.0) - time.monotonic()
        env = _mpi_receive(comm, 0, max(wait, 0.0))
        if env is None:
            continue
        try:
            msg = decode(env.tag, env.data, FROM_MASTER)
        except ProtocolError as exc:
            log.warning("rank %d dropped a malformed message from the master: %s", rank, exc)
            continue
        if isinstance(msg, Stop):
            for _, reply in held:
                send(reply)
            _mpi_send(comm, 0, *encode(Bye(sent)))
            return sent
        assert isinstance(msg, Work)
        attempt = attempts[msg.work_id]
        attempts[msg.work_id] += 1
        for reply in execute(msg, worker_fn, rank, inject, attempt):
            if reply.late:
                held.append((time.monotonic() + late_s, reply))
            else:
                send(reply)
