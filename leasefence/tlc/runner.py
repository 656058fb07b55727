"""Find, run and read TLC: the pinned tla2tools.jar, the configs in ``tla/``, TLA+ values.

Which jar: ``$TLA2TOOLS_JAR``, else the user's cache (``$XDG_CACHE_HOME/leasefence/`` or
``~/.cache/leasefence/``), else the official v1.7.4 release jar downloaded into that cache and
checked against its published SHA-256. A jar whose checksum differs from the pin (a local build)
is used, and every report says it is unverified. No jar or no java: :class:`TlcUnavailable`, which
the command turns into exit status 3 and the tests into a skip with the same reason.

TLC always runs on a copy of the spec in a temporary directory (with ``-metadir`` there too), so
nothing is ever written into ``tla/``.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeAlias

from leasefence.model.flavours import Flavour, expected_violations
from leasefence.paths import ROOT

#: The pinned TLC release: the last immutable one (TLC2 Version 2.19 of 08 August 2024).
TLC_VERSION = "1.7.4"
TLA2TOOLS_SHA256 = "936a262061c914694dfd669a543be24573c45d5aa0ff20a8b96b23d01e050e88"
TLA2TOOLS_URL = f"https://github.com/tlaplus/tlaplus/releases/download/v{TLC_VERSION}/tla2tools.jar"
#: Seconds allowed for the download to start answering: fail fast where there is no network.
DOWNLOAD_TIMEOUT = 5.0

#: Exit status of ``leasefence tlc`` when no TLC (jar or java) can be had.
EXIT_NO_TLC = 3

#: The folder holding the spec and the configs.
TLA_DIR = ROOT / "tla"
#: The model-checking module every config runs against unless a module of its own name exists.
MC_MODULE = "MCLeaseFence"


class TlcUnavailable(Exception):
    """No TLC can be had here: no jar (none given, none cached, no download) or no java."""


# --------------------------------------------------------------------------------------------
# Finding the jar and java


@dataclass(frozen=True)
class Jar:
    """A tla2tools.jar, where it came from, and whether its checksum matches the pin."""

    path: Path
    sha256: str
    source: str  # "TLA2TOOLS_JAR", "cache" or "download"

    @property
    def verified(self) -> bool:
        return self.sha256 == TLA2TOOLS_SHA256

    def describe(self) -> str:
        """One line for reports: path, source and whether it is the pinned release."""
        if self.verified:
            return f"{self.path} ({self.source}; official v{TLC_VERSION}, SHA-256 verified)"
        return (
            f"{self.path} ({self.source}; UNVERIFIED: SHA-256 {self.sha256[:16]}... is not the "
            f"pinned v{TLC_VERSION} release's {TLA2TOOLS_SHA256[:16]}..., e.g. a local build)"
        )


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, in hex."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CACHE_HOME/leasefence``, else ``~/.cache/leasefence``."""
    env = os.environ if env is None else env
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME") or Path.home()) / ".cache")
    return Path(base) / "leasefence"


def download_jar(dest: Path, url: str = TLA2TOOLS_URL, timeout: float = DOWNLOAD_TIMEOUT) -> Jar:
    """Download the pinned jar to ``dest``, checking its SHA-256 before it is kept."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_suffix(".part")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp, part.open("wb") as out:
            shutil.copyfileobj(resp, out)
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        part.unlink(missing_ok=True)
        raise TlcUnavailable(f"could not download {url}: {exc}") from None
    digest = sha256_of(part)
    if digest != TLA2TOOLS_SHA256:
        part.unlink(missing_ok=True)
        raise TlcUnavailable(
            f"downloaded {url} but its SHA-256 is {digest}, not the pinned {TLA2TOOLS_SHA256}; "
            "discarded"
        )
    part.replace(dest)
    return Jar(dest, digest, "download")


def find_jar(env: Mapping[str, str] | None = None, download: bool | None = None) -> Jar:
    """The tla2tools.jar to use: ``$TLA2TOOLS_JAR``, the cache, or a verified download.

    ``download=None`` downloads unless ``LEASEFENCE_NO_DOWNLOAD`` is set.
    """
    env = os.environ if env is None else env
    given = env.get("TLA2TOOLS_JAR")
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise TlcUnavailable(f"TLA2TOOLS_JAR={given} is not a file")
        return Jar(path, sha256_of(path), "TLA2TOOLS_JAR")
    cached = cache_dir(env) / "tla2tools.jar"
    if cached.is_file():
        return Jar(cached, sha256_of(cached), "cache")
    if download is None:
        download = not env.get("LEASEFENCE_NO_DOWNLOAD")
    if not download:
        raise TlcUnavailable(
            f"no tla2tools.jar: TLA2TOOLS_JAR is unset, {cached} does not exist, and downloading "
            "is disabled (LEASEFENCE_NO_DOWNLOAD)"
        )
    try:
        return download_jar(cached)
    except TlcUnavailable as exc:
        raise TlcUnavailable(
            f"no tla2tools.jar: TLA2TOOLS_JAR is unset, {cached} does not exist, and {exc}"
        ) from None


def find_java(env: Mapping[str, str] | None = None) -> str:
    """The java executable: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    env = os.environ if env is None else env
    home = env.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").is_file():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java", path=env.get("PATH"))
    if not found:
        raise TlcUnavailable("no java: JAVA_HOME is unset or has no bin/java, and none on PATH")
    return found


@dataclass(frozen=True)
class Tools:
    """Everything needed to run TLC."""

    java: str
    jar: Jar


def find_tools(env: Mapping[str, str] | None = None, download: bool | None = None) -> Tools:
    """Java and the jar, or :class:`TlcUnavailable` saying what is missing."""
    java = find_java(env)
    return Tools(java, find_jar(env, download))


# --------------------------------------------------------------------------------------------
# TLA+ values as TLC prints them


@dataclass(frozen=True, order=True)
class ModelValue:
    """A TLC model value (an uninterpreted constant such as ``NoTask``)."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Fcn:
    """A TLA+ function or record, as sorted ``(key, value)`` pairs.

    Records are functions from strings; a function whose domain is ``1..n`` is a tuple and is
    parsed as a Python tuple instead, so every value has one representation.
    """

    items: tuple[tuple[Value, Value], ...]

    def get(self, key: Value) -> Value:
        for k, v in self.items:
            if k == key:
                return v
        raise KeyError(key)

    def keys(self) -> list[Value]:
        return [k for k, _ in self.items]


Value: TypeAlias = bool | int | str | ModelValue | frozenset["Value"] | tuple["Value", ...] | Fcn


def _order(v: Value) -> tuple[int, str]:
    """A total order over mixed values, for canonical sorting."""
    rank = {bool: 0, int: 1, str: 2, ModelValue: 3, tuple: 4, frozenset: 5, Fcn: 6}
    return (rank.get(type(v), 9), repr(v) if not isinstance(v, int) else f"{v:+020d}")


def make_fcn(pairs: Sequence[tuple[Value, Value]]) -> Value:
    """The canonical value of a function given by pairs: a tuple when its domain is 1..n."""
    d: dict[Value, Value] = {}
    for k, v in pairs:
        if k in d and d[k] != v:
            raise TlaParseError(f"function maps {k!r} to both {d[k]!r} and {v!r}")
        d.setdefault(k, v)  # `@@` is left-biased
    keys = list(d)
    n = len(keys)
    if all(type(k) is int for k in keys) and sorted(keys) == list(range(1, n + 1)):  # type: ignore[type-var]
        return tuple(d[i] for i in range(1, n + 1))
    return Fcn(tuple(sorted(d.items(), key=lambda kv: _order(kv[0]))))


def as_mapping(v: Value) -> dict[Value, Value]:
    """A function value (record, ``:>``/``@@`` function or tuple) as a dict."""
    if isinstance(v, Fcn):
        return dict(v.items)
    if isinstance(v, tuple):
        return {i + 1: x for i, x in enumerate(v)}
    raise TlaParseError(f"expected a function, got {v!r}")


class TlaParseError(ValueError):
    """A TLA+ value as TLC prints it could not be read."""


_TOKEN = re.compile(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*")
    | (?P<int>-?\d+)
    | (?P<op><<|>>|\|->|:>|@@|\.\.|[\[\]{}(),])
    | (?P<id>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE | re.DOTALL,
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", '"': '"', "\\": "\\"}


def _tokens(text: str) -> Iterator[tuple[str, str]]:
    pos, end = 0, len(text.rstrip())
    while pos < end:
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise TlaParseError(f"unexpected text at {pos}: {text[pos : pos + 30]!r}")
        kind = m.lastgroup or ""
        yield kind, m.group(kind)
        pos = m.end()


class _Parser:
    def __init__(self, text: str) -> None:
        self.toks = list(_tokens(text))
        self.i = 0

    def peek(self) -> str | None:
        return self.toks[self.i][1] if self.i < len(self.toks) else None

    def take(self, expected: str | None = None) -> tuple[str, str]:
        if self.i >= len(self.toks):
            raise TlaParseError(f"unexpected end of value, expected {expected or 'more'}")
        tok = self.toks[self.i]
        if expected is not None and tok[1] != expected:
            raise TlaParseError(f"expected {expected!r}, got {tok[1]!r}")
        self.i += 1
        return tok

    def items(self, close: str) -> list[Value]:
        out: list[Value] = []
        if self.peek() == close:
            self.take(close)
            return out
        while True:
            out.append(self.expr())
            if self.take()[1] == close:
                return out
            if self.toks[self.i - 1][1] != ",":
                raise TlaParseError(f"expected ',' or {close!r}")

    def expr(self) -> Value:
        first = self.primary()
        if self.peek() != ":>":
            return first
        pairs: list[tuple[Value, Value]] = []
        key = first
        while True:
            self.take(":>")
            pairs.append((key, self.primary()))
            if self.peek() != "@@":
                return make_fcn(pairs)
            self.take("@@")
            key = self.primary()

    def primary(self) -> Value:
        kind, tok = self.take()
        if kind == "int":
            return int(tok)
        if kind == "str":
            return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), tok[1:-1])
        if kind == "id":
            if tok in ("TRUE", "FALSE"):
                return tok == "TRUE"
            return ModelValue(tok)
        if tok == "{":
            return frozenset(self.items("}"))
        if tok == "<<":
            return tuple(self.items(">>"))
        if tok == "(":
            inner = self.expr()
            self.take(")")
            return inner
        if tok == "[":
            pairs: list[tuple[Value, Value]] = []
            while True:
                k, name = self.take()
                if k != "id":
                    raise TlaParseError(f"expected a record field name, got {name!r}")
                self.take("|->")
                pairs.append((name, self.expr()))
                if self.take()[1] == "]":
                    return make_fcn(pairs)
                if self.toks[self.i - 1][1] != ",":
                    raise TlaParseError("expected ',' or ']' in a record")
        raise TlaParseError(f"unexpected {tok!r}")


def parse_value(text: str) -> Value:
    """Read one TLA+ value as TLC prints it: integers, strings, booleans, model values, sets
    ``{..}``, tuples ``<<..>>``, records ``[a |-> ..]`` and functions ``(k :> v @@ ..)``."""
    p = _Parser(text)
    v = p.expr()
    if p.i != len(p.toks):
        raise TlaParseError(f"trailing text after the value: {p.toks[p.i][1]!r}")
    return v


_VAR = re.compile(r"^/\\ (\w+) = ", re.MULTILINE)


def parse_state(text: str) -> dict[str, Value]:
    """A state as TLC prints it (``/\\ x = 1`` per variable) as a dict of values."""
    marks = list(_VAR.finditer(text))
    if not marks:
        raise TlaParseError(f"no variable in state text {text[:60]!r}")
    out: dict[str, Value] = {}
    for m, nxt in zip(marks, [*marks[1:], None], strict=True):
        chunk = text[m.end() : nxt.start() if nxt else len(text)]
        out[m.group(1)] = parse_value(chunk)
    return out


def to_json(v: Value) -> object:
    """A TLA+ value as JSON: sets and tuples as lists, functions and records as objects."""
    if isinstance(v, bool | int | str):
        return v
    if isinstance(v, ModelValue):
        return v.name
    if isinstance(v, frozenset):
        return [to_json(x) for x in sorted(v, key=_order)]
    if isinstance(v, tuple):
        return [to_json(x) for x in v]
    return {str(to_json(k)): to_json(x) for k, x in v.items}


# --------------------------------------------------------------------------------------------
# Configs and their expectations


@dataclass(frozen=True)
class Expectation:
    """What a config must do: pass, or fail on one of ``violations``."""

    config: Path
    flavour: Flavour
    violations: frozenset[str]

    @property
    def must_fail(self) -> bool:
        return bool(self.violations)

    def describe(self) -> str:
        if not self.must_fail:
            return "must pass"
        return "must fail on one of " + ", ".join(sorted(self.violations))


_CFG_KEYWORDS = frozenset(
    [
        "CONSTANT",
        "CONSTANTS",
        "INIT",
        "NEXT",
        "SPECIFICATION",
        "INVARIANT",
        "INVARIANTS",
        "PROPERTY",
        "PROPERTIES",
        "CONSTRAINT",
        "CONSTRAINTS",
        "ACTION_CONSTRAINT",
        "ACTION_CONSTRAINTS",
        "SYMMETRY",
        "VIEW",
        "ALIAS",
        "POSTCONDITION",
        "CHECK_DEADLOCK",
    ]
)
_CONST = re.compile(r"^\s*(\w+)\s*(=|<-)\s*(.+?)\s*$")


def config_constants(cfg: Path) -> dict[str, str]:
    """The ``Name = value`` and ``Name <- Def`` lines of a config's CONSTANTS, as text."""
    out: dict[str, str] = {}
    section = ""
    for raw in cfg.read_text().splitlines():
        line = raw.split("\\*", 1)[0].rstrip()
        if not line.strip():
            continue
        head = line.split()[0]
        if head in _CFG_KEYWORDS:
            section = head
            line = line[len(head) :]
            if not line.strip():
                continue
        if section in ("CONSTANT", "CONSTANTS"):
            m = _CONST.match(line)
            if m:
                out[m.group(1)] = m.group(3)
    return out


def constant_text(cfg: Path, name: str, default: str) -> str:
    """The value text of constant ``name`` in a config: ``Name = v`` gives ``v``; ``Name <- Def``
    gives the body of ``Def`` in the config's own module or ``MCLeaseFence.tla`` (the spec's
    ``Pipeline`` and ``Fence`` are definitions a config overrides this way)."""
    text = config_constants(cfg).get(name)
    if text is None:
        return default
    own = cfg.with_suffix(".tla")
    mc = own if own.is_file() else TLA_DIR / f"{MC_MODULE}.tla"
    found = re.search(rf"^{re.escape(text)}\s*==\s*(.+?)$", mc.read_text(), re.MULTILINE)
    return found.group(1) if found else text


def expectation(cfg: Path) -> Expectation:
    """A config's expectation, from its ``Flavour``, ``Pipeline`` and ``Fence``: the fixed
    protocol must pass; a defect must fail on one of the invariants F314's table names
    (``EXPECTED_VIOLATIONS``); rank fencing with ``Pipeline > 1`` must fail on
    ``PIPELINE_RANK_VIOLATIONS`` (``model.flavours.expected_violations``)."""
    flavour = Flavour(str(parse_value(constant_text(cfg, "Flavour", '"fixed"'))))
    pipeline = parse_value(constant_text(cfg, "Pipeline", "1"))
    fence = parse_value(constant_text(cfg, "Fence", '"rank"'))
    if not isinstance(pipeline, int) or isinstance(pipeline, bool) or not isinstance(fence, str):
        raise TlaParseError(f"Pipeline must be an integer and Fence a string in {cfg}")
    return Expectation(cfg, flavour, expected_violations(flavour, pipeline, fence))


def is_deep(cfg: Path) -> bool:
    """Deep configs (``*Deep*.cfg``) run only when asked for (``--deep`` or by name)."""
    return "Deep" in cfg.stem


def all_configs(deep: bool = False, tla_dir: Path = TLA_DIR) -> list[Path]:
    """Every config in ``tla/``, CI first, then the must-fail ones; deep ones with ``deep``."""
    cfgs = [c for c in sorted(tla_dir.glob("*.cfg")) if deep or not is_deep(c)]
    return sorted(cfgs, key=lambda c: (not c.stem.startswith("MC"), is_deep(c), c.name))


# --------------------------------------------------------------------------------------------
# Running TLC and reading its -tool output


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
    violation_kind: str | None = None  # "invariant" or "action property"
    counterexample: list[TraceStep] = field(default_factory=list)
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
        elif code == 2217:  # TLC_STATE_PRINT2: one state of the trace
            r.counterexample.append(_trace_step(body))
        elif severity in _ERROR_SEVERITIES and code not in (2121,):
            r.errors.append(body)
    if exit_code not in (0, 12, 13) and not r.errors:
        r.errors.append(f"TLC exited with status {exit_code}")
    return r


def _trace_step(body: str) -> TraceStep:
    head, _, rest = body.partition("\n")
    m = re.match(r"(\d+): <(\w+)", head)
    number = int(m.group(1)) if m else 0
    action = m.group(2) if m else head.split(": ", 1)[-1]
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
        module = cfg.stem if (work / f"{cfg.stem}.tla").is_file() else MC_MODULE
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
