"""Run TLC on a config and read its ``-tool`` output: statistics, violation, counterexample.

TLC always runs on a copy of the spec in a temporary directory (with ``-metadir`` there too), so
nothing is ever written into ``tla/``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from leasefence.model.live import LIVE_PROPERTIES
from leasefence.tlc.configs import TLA_DIR, Expectation, checked_properties, expectation, module_of
from leasefence.tlc.jar import Tools
from leasefence.tlc.values import Value, parse_state, to_json


@dataclass
class TraceStep:
    """One state of a counterexample: its number, the action that led to it, the state."""

    number: int
    action: str
    state: dict[str, Value]

    def to_json(self) -> dict[str, object]:
        return {
            "step": self.number,
            "action": self.action,
            "state": {k: to_json(v) for k, v in self.state.items()},
        }


@dataclass
class TlcResult:
    """What one TLC run reported."""

    config: str
    exit_code: int
    states_generated: int | None = None
    distinct_states: int | None = None
    depth: int | None = None
    seconds: float = 0.0
    tlc_seconds: float | None = None
    violated: str | None = None
    violation_kind: str | None = None  # "invariant", "action property" or "temporal property"
    counterexample: list[TraceStep] = field(default_factory=list)
    #: How a temporal counterexample ends: "stuttering", or the number of the state the loop
    #: goes back to ("back to state N"); None for a finite counterexample.
    lasso: str | None = None
    errors: list[str] = field(default_factory=list)
    version: str | None = None
    output: str = ""

    @property
    def completed(self) -> bool:
        """TLC explored every state and found nothing wrong."""
        return self.exit_code == 0 and not self.errors and self.violated is None

    def to_json(self) -> dict[str, object]:
        return {
            "config": self.config,
            "exit_code": self.exit_code,
            "states_generated": self.states_generated,
            "distinct_states": self.distinct_states,
            "depth": self.depth,
            "seconds": round(self.seconds, 3),
            "tlc_seconds": self.tlc_seconds,
            "violated": self.violated,
            "violation_kind": self.violation_kind,
            "counterexample": [s.to_json() for s in self.counterexample],
            "lasso": self.lasso,
            "errors": self.errors,
            "version": self.version,
        }


_MSG = re.compile(
    r"@!@!@STARTMSG (\d+):(\d+) @!@!@\n(.*?)@!@!@ENDMSG \1 @!@!@", re.DOTALL | re.MULTILINE
)
_ERROR_SEVERITIES = {"1", "2"}  # MP.ERROR, MP.TLCBUG


def parse_tool_output(config: str, exit_code: int, text: str) -> TlcResult:
    """Read TLC's ``-tool`` output: statistics, depth, time, violation and counterexample."""
    r = TlcResult(config=config, exit_code=exit_code, output=text)
    for m in _MSG.finditer(text):
        code, severity, body = int(m.group(1)), m.group(2), m.group(3).strip()
        if code == 2262:  # TLC_VERSION
            r.version = body.splitlines()[0]
        elif code == 2199:  # TLC_STATS
            s = re.search(r"([\d,]+) states generated, ([\d,]+) distinct states found", body)
            if s:
                r.states_generated = int(s.group(1).replace(",", ""))
                r.distinct_states = int(s.group(2).replace(",", ""))
        elif code == 2194:  # TLC_SEARCH_DEPTH
            d = re.search(r"is (\d+)", body)
            r.depth = int(d.group(1)) if d else None
        elif code == 2186:  # TLC_FINISHED
            t = re.search(r"Finished in (\d+)ms", body)
            if t:
                r.tlc_seconds = int(t.group(1)) / 1000
        elif code in (2107, 2110):  # TLC_INVARIANT_VIOLATED_INITIAL / _BEHAVIOR
            v = re.search(r"Invariant (\S+) is violated", body)
            r.violated, r.violation_kind = (v.group(1) if v else body), "invariant"
        elif code == 2112:  # TLC_ACTION_PROPERTY_VIOLATED_BEHAVIOR
            v = re.search(r"Action property (\S+) is violated", body)
            r.violated, r.violation_kind = (v.group(1) if v else body), "action property"
        elif code == 2116:  # TLC_TEMPORAL_PROPERTY_VIOLATED (names no property)
            r.violated, r.violation_kind = "temporal properties", "temporal property"
        elif code == 2217:  # TLC_STATE_PRINT2: one state of the trace
            r.counterexample.append(_trace_step(body))
        elif code == 2218:  # TLC_STATE_PRINT3: the behaviour stutters for ever
            r.lasso = "stuttering"
        elif code == 2122:  # TLC_BACK_TO_STATE: the loop goes back to state N
            n = re.search(r"(\d+)", body)
            r.lasso = f"back to state {n.group(1) if n else body}"
        elif severity in _ERROR_SEVERITIES and code not in (2121, 2264):  # 2264: a lasso follows
            r.errors.append(body)
    if exit_code not in (0, 12, 13) and not r.errors:
        r.errors.append(f"TLC exited with status {exit_code}")
    return r


def _trace_step(body: str) -> TraceStep:
    head, _, rest = body.partition("\n")
    m = re.match(r"(\d+): <([\w!]+)", head)
    number = int(m.group(1)) if m else 0
    # An action of an instantiated module reads "LF!DispatchWork": the action's own name.
    action = m.group(2).rsplit("!", 1)[-1] if m else head.split(": ", 1)[-1]
    if action == "Initial":
        action = "Init"
    return TraceStep(number, action, parse_state(rest))


def tlc_command(
    tools: Tools,
    module: str,
    cfg_name: str,
    metadir: Path,
    workers: int | str = 1,
    dump_dot: Path | None = None,
) -> list[str]:
    """The TLC command line (run in the directory holding the spec copy)."""
    cmd = [
        tools.java,
        "-XX:+UseParallelGC",
        # TLC unpacks its standard modules (Naturals.tla, ...) into java.io.tmpdir and deletes
        # them on exit: two TLCs sharing /tmp break each other's parse ("Module-Table lookup
        # failure"), so each run gets the private directory beside its metadir.
        f"-Djava.io.tmpdir={metadir.parent}",
        "-cp",
        str(tools.jar.path),
        "tlc2.TLC",
        "-tool",
        "-workers",
        str(workers),
        "-deadlock",
        "-cleanup",
        "-metadir",
        str(metadir),
        "-config",
        cfg_name,
    ]
    if dump_dot is not None:
        cmd += ["-dump", "dot,actionlabels", str(dump_dot)]
    return [*cmd, module]


def run_tlc(
    cfg: Path,
    tools: Tools,
    workers: int | str = 1,
    dump_dot: Path | None = None,
    timeout: float | None = 1800.0,
    extra_files: Mapping[str, str] | None = None,
) -> TlcResult:
    """Run TLC on ``cfg`` over a temporary copy of the spec; parse its result.

    ``extra_files`` (name -> text) are written beside the copy (generated modules or configs).
    """
    with tempfile.TemporaryDirectory(prefix="leasefence-tlc-") as tmp:
        work = Path(tmp)
        for src in cfg.parent.glob("*.tla"):
            shutil.copy2(src, work / src.name)
        if cfg.parent != TLA_DIR:
            for src in TLA_DIR.glob("*.tla"):
                if not (work / src.name).exists():
                    shutil.copy2(src, work / src.name)
        shutil.copy2(cfg, work / cfg.name)
        for name, text in (extra_files or {}).items():
            (work / name).write_text(text)
        module = module_of(cfg)
        cmd = tlc_command(tools, module, cfg.name, work / "meta", workers, dump_dot)
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd, cwd=work, capture_output=True, text=True, timeout=timeout, check=False
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout if isinstance(exc.stdout, str) else ""
            r = parse_tool_output(cfg.name, -1, out)
            r.errors.append(f"TLC did not finish within {timeout:.0f} s")
            r.seconds = time.perf_counter() - start
            return r
        r = parse_tool_output(cfg.name, proc.returncode, proc.stdout + proc.stderr)
        r.seconds = time.perf_counter() - start
        if r.violation_kind == "temporal property":
            # TLC does not say which temporal property failed: a config checking one says it.
            live = sorted(n for n in checked_properties(cfg) if n in LIVE_PROPERTIES)
            if len(live) == 1:
                r.violated = live[0]
        return r


@dataclass
class Verdict:
    """A config's result judged against its expectation."""

    expectation: Expectation
    result: TlcResult

    @property
    def ok(self) -> bool:
        r, e = self.result, self.expectation
        if r.errors:
            return False
        if not e.must_fail:
            return r.completed
        return r.violated in e.violations

    def summary(self) -> str:
        r, e = self.result, self.expectation
        if r.errors:
            what = "ERROR: " + r.errors[0].splitlines()[0][:160]
        elif r.violated:
            what = f"violated {r.violated} ({r.violation_kind}) in {len(r.counterexample)} states"
        else:
            what = "no violation"
        figures = (
            f"{r.distinct_states:,} distinct states, depth {r.depth}"
            if r.distinct_states is not None
            else "no statistics"
        )
        mark = "ok" if self.ok else "UNEXPECTED"
        return f"{mark}: {e.describe()}; {what}; {figures}; {r.seconds:.1f} s"


def check_config(cfg: Path, tools: Tools, workers: int | str = 1) -> Verdict:
    """Run one config and judge it against its expectation."""
    return Verdict(expectation(cfg), run_tlc(cfg, tools, workers))
