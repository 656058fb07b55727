"""The master's NDJSON trace: one line per step, named by the model's (and TLA+'s) action.
``docs/trace-format.md`` documents it for readers of the files, with a replayed example.

Format (version 2), one JSON object per line, each written whole and flushed::

    {"event":"Header","version":2,"ttl":S,"ranks":[1,2,3],"task_of":{"<work id>":"<task id>",...},
     "pipeline":N,"fence":"rank"|"generation"}
    {"event":"DispatchWork","w":W,"r":R,"now":T,"ok":B,"refused":STEP|null,"gen":G|null}
    {"event":"DeliverResult","r":R,"w":W,"reported":TASK|null,"ok":B,"now":T,"stale":B,
     "task":TASK|null,"work_ok":B,"state_ok":B,"gen":G|null}
    {"event":"ReclaimExpired","now":T,"reclaimed":[W,...]}
    {"event":"RestartMaster","now":T,"recovered":{"journal":{...},"coordinator":{...}},
     "reclaimed":[W,...]}

``G`` is a dispatch generation ``[epoch, counter]`` (issue 12): in ``DispatchWork`` the one the
dispatch was given, in ``DeliverResult`` the one the result presented (null under rank fencing,
and for a result from an old-protocol worker). Version 1 (before pipelining) lacks ``pipeline``,
``fence`` and ``gen``; it reads as depth 1, rank fencing.

``now`` is the master's clock (Unix seconds) for that step, the same reading the journal and the
coordinator stamped. A restarted master appends to the same file: a new ``Header`` (the
validator keeps the first one's bounds) and then ``RestartMaster``. ``conformance.tracecheck``
replays a trace through the model.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from leasefence.impl.durable import open_nofollow
from leasefence.impl.errors import LeaseError

if TYPE_CHECKING:
    from leasefence.impl.generation import Generation
    from leasefence.impl.master import ResultOutcome

TRACE_VERSION = 2


class TraceWriter:
    """Appends trace events to ``path``; a torn last line left by a killed master is cut off
    first, so every line in the file stays whole.

    Nothing touches the file before the first event: the run takes the journal's lock first, so
    a master refused by it never writes into the trace of the master that holds it. The file is
    created 0600. A failed write raises ``OSError`` naming the trace's path.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float,
        ranks: Iterable[int],
        task_of: Mapping[str, str],
        pipeline: int = 1,
        fence: str = "rank",
    ) -> None:
        self.path = Path(path)
        self._fh: IO[str] | None = None
        self._header = {
            "event": "Header",
            "version": TRACE_VERSION,
            "ttl": ttl,
            "ranks": sorted(ranks),
            "task_of": dict(task_of),
            "pipeline": pipeline,
            "fence": fence,
        }

    def _write(self, event: Mapping[str, Any]) -> None:
        try:
            if self._fh is None:
                _cut_torn_tail(self.path)
                fd = open_nofollow(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
                self._fh = os.fdopen(fd, "a", encoding="utf-8")
                self._put(self._header)
            self._put(event)
        except OSError as exc:
            if exc.filename is not None or isinstance(exc, LeaseError):
                raise  # it names the file already
            raise OSError(exc.errno, f"writing the trace: {exc.strerror}", str(self.path)) from exc

    def _put(self, event: Mapping[str, Any]) -> None:
        assert self._fh is not None
        self._fh.write(json.dumps(event, separators=(",", ":"), allow_nan=False) + "\n")
        self._fh.flush()

    def dispatch_work(
        self,
        w: str,
        r: int,
        now: float,
        ok: bool,
        refused: str | None,
        gen: Generation | None = None,
    ) -> None:
        self._write(
            {
                "event": "DispatchWork",
                "w": w,
                "r": r,
                "now": now,
                "ok": ok,
                "refused": refused,
                "gen": None if gen is None else list(gen),
            }
        )

    def deliver_result(
        self,
        r: int,
        w: str,
        reported: str | None,
        ok: bool,
        now: float,
        outcome: ResultOutcome,
        gen: Generation | None = None,
    ) -> None:
        self._write(
            {
                "event": "DeliverResult",
                "r": r,
                "w": w,
                "reported": reported,
                "ok": ok,
                "now": now,
                "stale": outcome.stale,
                "task": outcome.task,
                "work_ok": outcome.work_ok,
                "state_ok": outcome.state_ok,
                "gen": None if gen is None else list(gen),
            }
        )

    def reclaim_expired(self, now: float, reclaimed: Iterable[str]) -> None:
        self._write({"event": "ReclaimExpired", "now": now, "reclaimed": sorted(reclaimed)})

    def restart_master(
        self,
        now: float,
        recovered: Mapping[str, Any] | None = None,
        reclaimed: Iterable[str] | None = None,
    ) -> None:
        """RestartMaster. ``recovered`` is what the new master read from disk before recovering
        (see ``Master.recovered_state``): a killed master may have made a step durable without
        tracing it, and the validator checks that such a lost step is one the model allows.
        ``reclaimed``: the work IDs its recovery reclaimed."""
        event: dict[str, Any] = {"event": "RestartMaster", "now": now}
        if recovered is not None:
            event["recovered"] = dict(recovered)
        if reclaimed is not None:
            event["reclaimed"] = sorted(reclaimed)
        self._write(event)

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    """Truncate ``path`` after its last newline (a line without one was torn by a crash)."""
    try:
        fh = os.fdopen(open_nofollow(path, os.O_RDWR), "rb+")
    except FileNotFoundError:
        return
    with fh:
        data = fh.read()
        if data and not data.endswith(b"\n"):
            fh.truncate(data.rfind(b"\n") + 1)


def read_trace(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The events of a trace file. A torn last line (not JSON) is ignored; a bad
    line followed by more lines raises ``ValueError`` naming its line number."""
    lines = Path(path).read_text(encoding="utf-8").splitlines(keepends=True)
    events: list[dict[str, Any]] = []
    for number, line in enumerate(lines, start=1):
        last = number == len(lines)
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            if last:
                break
            raise ValueError(f"{path}: line {number} is not JSON and more lines follow") from None
        if not isinstance(event, dict) or "event" not in event:
            raise ValueError(f"{path}: line {number} is not a trace event")
        events.append(event)
    return events
