"""Process control for the campaign's MPI jobs: the tree a build runs from, the ranks' PIDs,
signals, faults fired on processes and the clock file, torn tails, and reading logs as they grow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from leasefence.conformance.traceformat import json_objects
from leasefence.harness.campaign.schedule import Fault


def executable(name: str) -> str:
    return str(Path(sys.executable).parent / name)


def descendants(root: int) -> list[int]:
    """PIDs of every process below ``root`` (Linux ``/proc``)."""
    parent: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parent.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        for child in parent.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def rank_pids(mpiexec_pid: int) -> dict[int, int]:
    """MPI rank -> PID of the job started by ``mpiexec_pid`` (from each process's PMI_RANK)."""
    ranks = {}
    for pid in descendants(mpiexec_pid):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        for item in env:
            if item.startswith(b"PMI_RANK="):
                ranks[int(item[9:])] = pid
    return ranks


def signal_pid(pid: int, sig: int) -> None:
    with suppress(ProcessLookupError):
        os.kill(pid, sig)


def tear(path: Path, share: float) -> int:
    """Append the first ``share`` of ``path``'s last line, without its newline: the torn tail a
    crash in the middle of an append leaves. Returns the bytes appended."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    lines = data.splitlines(keepends=True)
    if not lines or not lines[-1].endswith(b"\n"):
        return 0
    piece = lines[-1][: max(1, min(len(lines[-1]) - 2, int(len(lines[-1]) * share)))]
    with path.open("ab") as fh:
        fh.write(piece)
    return len(piece)


@contextmanager
def build_tree(build: str) -> Iterator[dict[str, str]]:
    """The environment that runs ``build``: the F314 sources as installed (``f314`` and
    ``rank-fence``, which differ only in their flags), or for ``pre-fix`` a temporary copy with
    F314's four defects applied (``leasefence.harness.mutants.catalogue.F314_MUTANTS``) first on PYTHONPATH."""
    env = dict(os.environ)
    if build != "pre-fix":
        yield env
        return
    from leasefence.harness.mutants.catalogue import F314_MUTANTS
    from leasefence.harness.mutants.gate import apply, copy_tree

    with tempfile.TemporaryDirectory(prefix="leasefence-prefix-") as tmp:
        copy_tree(Path(tmp))
        for mutant in F314_MUTANTS:
            apply_intended(mutant, Path(tmp), apply)
        env["PYTHONPATH"] = tmp + os.pathsep + env.get("PYTHONPATH", "")
        yield env


def apply_intended(mutant: Any, tree: Path, apply: Callable[[Any, Path], None]) -> None:
    """Apply a catalogue mutant so that its file still compiles.

    A patch that deletes whole lines but starts after their indentation (as
    ``f314-2-state-lease-overwrite`` does) leaves that indentation in front of the next line:
    an ``IndentationError``, which would make the pre-fix build crash at import instead of
    running the defect. Such a patch is applied again with the indentation of its first line
    included in the text replaced, which is the edit the catalogue means.
    """
    target = tree / mutant.path
    original = target.read_text()
    apply(mutant, tree)
    try:
        compile(target.read_text(), str(target), "exec")
        return
    except SyntaxError:
        target.write_text(original)
    patches = []
    for old, new in mutant.patches:
        at = original.index(old)
        indent = original[original.rfind("\n", 0, at) + 1 : at]
        if indent.strip() or (new and not new.endswith("\n")):
            patches.append((old, new))
        else:
            patches.append((indent + old, indent + new if new else ""))
    fixed = type(mutant)(mutant.name, mutant.path, tuple(patches), mutant.breaks)
    apply(fixed, tree)
    compile(target.read_text(), str(target), "exec")


def fire(
    fault: Fault, pids: Mapping[int, int], clock: Path, clock_doc: dict[str, float]
) -> str | None:
    """Fire ``fault`` on the job's processes (``pids``: rank -> PID) or its clock file; what
    was done, or None when the process it needs is not there yet."""
    if fault.kind in ("kill", "reboot"):
        if 0 not in pids:
            return None
        if fault.kind == "reboot":
            clock_doc["mono_origin"] = time.monotonic()
            clock.write_text(json.dumps(clock_doc))
        signal_pid(pids[0], signal.SIGKILL)
        return f"SIGKILL master (pid {pids[0]}), torn tail {fault.torn:.0%} of a line"
    if fault.kind == "pause":
        rank = fault.rank or 1
        if rank not in pids:
            return None
        signal_pid(pids[rank], signal.SIGSTOP)
        return f"SIGSTOP rank {rank} for {fault.seconds:.2f} s, then SIGCONT"
    sign = 1.0 if fault.kind == "clock-forward" else -1.0
    clock_doc["wall_offset"] = clock_doc.get("wall_offset", 0.0) + sign * fault.seconds
    tmp = clock.with_suffix(".tmp")
    tmp.write_text(json.dumps(clock_doc))
    tmp.replace(clock)
    return f"wall clock {sign * fault.seconds:+.2f} s (offset {clock_doc['wall_offset']:+.2f} s)"


def wait_or_kill(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Wait for the job; past ``timeout`` SIGKILL its processes one by one, by PID."""
    try:
        proc.wait(timeout)
        return
    except subprocess.TimeoutExpired:
        pass
    for pid in reversed(descendants(proc.pid)):
        signal_pid(pid, signal.SIGKILL)
    signal_pid(proc.pid, signal.SIGKILL)
    proc.wait()


def read_ndjson(path: Path) -> list[dict[str, Any]]:
    """Every whole JSON object line of ``path`` (torn lines are skipped)."""
    if not path.exists():
        return []
    text = path.read_text(encoding="utf-8", errors="replace")
    return list(json_objects(text.splitlines()))


def tail(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The whole lines added to ``path`` since byte ``offset``, and the new offset."""
    try:
        with path.open("rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return [], offset
    end = data.rfind(b"\n") + 1
    return list(json_objects(data[:end].splitlines())), offset + end
