"""The trace validator and the dispatcher compiled: the model's, the checker's and the dispatch
loop's modules built by mypyc, kept out of the source tree, used by ``leasefence trace check``
and ``leasefence run`` when built for the very sources installed.

``leasefence trace compile`` runs mypyc (it comes with mypy) on a copy of the package and keeps
only the built extension modules, in ``cache_root()/compiled/KEY/``: ``KEY`` hashes the Python
version and the source of every compiled module and of the modules they read (``INPUTS``), so
an edited source, a mutant's rewritten copy or another Python never loads a build made from
other code.
Nothing is written beside the sources: an extension module there would shadow its ``.py`` for
every import (tests that plant a bug by patching a module, the mutant gate's copies).

``activate()`` puts a build first on the import path of the three packages before any compiled
module is imported; the modules then import each other natively. The same source runs either
way: ``tests/unit/test_compiled.py`` replays a corpus of traces (correct runs, divergent runs,
malformed files) through both and requires the same report, and runs the trace checker's own
unit tests (the planted violation of every invariant among them) against the build. A build that
does not load (damaged, incomplete, made by another mypyc) is undone and the interpreted modules
run, unless ``--engine compiled`` asked for it. What is compiled is the source of truth compiled,
never a second implementation: the interpreted modules stay the reference
(``LEASEFENCE_ENGINE=interpreted``, or ``trace check --engine interpreted``).

Why mypyc: the whole ``trace check`` of a 2,000-item run counted 1,841 million instructions
interpreted and 1,089 million compiled (callgrind), the same verdicts; the model's pure, typed
functions over named tuples are what mypyc compiles well (docs/performance.md, issue 18).
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterable, MutableSequence
from importlib.machinery import EXTENSION_SUFFIXES
from typing import TYPE_CHECKING

import leasefence
from leasefence.cache import cache_root

if TYPE_CHECKING:
    from pathlib import Path

try:  # CPython's own BLAKE2: hashlib would start OpenSSL first (11 M instructions, every run)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another Python
    from hashlib import blake2b

#: The trace validator's compiled modules: everything ``trace check`` runs per step (the model,
#: the trace reader, the replay). ``model/bounds.py`` stays interpreted: mypyc makes a
#: ``cached_property`` a plain property, computed again at every read; so does
#: ``model/check.py``, imported only to print a divergence's state.
VALIDATOR: tuple[str, ...] = (
    "leasefence.model.state",
    "leasefence.model.rules",
    "leasefence.model.flavours",
    "leasefence.model.journal",
    "leasefence.model.coordinator",
    "leasefence.model.system",
    "leasefence.model.invariants",
    "leasefence.model.incremental",
    "leasefence.impl.generation",
    "leasefence.conformance.generations",
    "leasefence.conformance.traceformat",
    "leasefence.conformance.tracecheck",
)
#: The dispatcher's compiled modules (issue 19): what rank 0 and every worker rank run per
#: message: the wire, the master's decisions, the coordinator and its values
#: (``coordvalues``), both loops, and the workload (its ``WorkItem``, whose fields every
#: dispatch reads: compiled, a slot of a C struct, not a dictionary lookup; 7.2 -> 6.5 us a task
#: in process); the values made per message and decision are native classes there
#: (``impl/frozen.py``). Their inputs from outside are bytes (messages, files), read by
#: code that checks values of any type. The
#: coordinator's public calls take ``object`` and check it themselves (``coordinator._check_token``):
#: a parameter typed ``int`` would take a bool as its integer, one typed ``str`` would refuse an
#: int with ``TypeError`` before the check that names it (``InvalidArgument``) ran. The journal
#: stays interpreted: its record reader fails under mypyc (a ``SystemError`` on bytes).
DISPATCHER: tuple[str, ...] = (
    "leasefence.impl.strictjson",
    "leasefence.impl.wire",
    "leasefence.impl.coordvalues",
    "leasefence.impl.coordinator",
    "leasefence.impl.master",
    "leasefence.impl.transport",
    "leasefence.impl.workload",
)
#: What ``leasefence run`` loads from the build on every rank before it starts: a worker rank
#: needs no more (it never imports the master's modules: tests/unit/test_layering.py); rank 0
#: then imports the compiled master from the build, first on the import path.
EVERY_RANK: tuple[str, ...] = (
    "leasefence.impl.strictjson",
    "leasefence.impl.wire",
    "leasefence.impl.workload",
    "leasefence.impl.transport",
)
#: The dispatch benchmark's in-memory journal (``leasefence bench``, ``harness/bench``): the
#: journal of the in-memory master, whose compiled row compiles the whole master, its journal
#: too (interpreted, its lease and complete were 7,000 of the master's 60,000 instructions a
#: task, issue 19). ``leasefence run`` never loads it.
BENCH: tuple[str, ...] = ("leasefence.harness.bench.memory_journal",)
#: Every module a build holds: one build serves all (``activate`` loads the part asked for).
COMPILED: tuple[str, ...] = VALIDATOR + DISPATCHER + BENCH
#: Interpreted modules the compiled ones import: their source is part of the key too (a
#: compiled module is built against the types it reads from them).
INPUTS: tuple[str, ...] = (
    "leasefence.model.bounds",
    "leasefence.model.check",
    "leasefence.model",
    "leasefence.impl",
    "leasefence.conformance",
    "leasefence.impl.coordfile",
    "leasefence.impl.durable",
    "leasefence.impl.errors",
    "leasefence.impl.frozen",
    "leasefence.impl.journal",
    "leasefence.impl.journalops",
    "leasefence.impl.poll",
    "leasefence.impl.records",
    "leasefence.impl.rules",
    "leasefence.impl.trace",
    "leasefence.impl.wiretypes",
)
#: The packages whose import path a build is put first on.
PACKAGES = (
    "leasefence.model",
    "leasefence.impl",
    "leasefence.conformance",
    "leasefence.harness.bench",
)

#: ``LEASEFENCE_ENGINE``, and ``trace check --engine``: ``auto`` runs the build for these
#: sources when there is one; ``compiled`` requires it; ``interpreted`` never loads it.
ENGINES = ("auto", "compiled", "interpreted")
ENGINE_ENV = "LEASEFENCE_ENGINE"
#: Written last into a build's folder: a folder without it is unfinished and never loaded.
DONE = "BUILD.json"
#: A build's extension modules, a line each: its size in bytes, a space, its path in the build.
MANIFEST = "MANIFEST"

Say = Callable[[str], None]


class CompileError(Exception):
    """The build could not be made: mypyc refused the code or the C compiler failed."""


class NoToolchain(CompileError):
    """Nothing to build with here: no mypyc, no C compiler, or no Python headers."""


class EngineError(Exception):
    """``--engine compiled`` asked for, and no build for these sources can be loaded."""


#: The folder of the ``leasefence`` package, symlinks resolved. Paths here are strings: the
#: activation runs at every ``trace check`` start, and pathlib costs ~18 M instructions to import.
PACKAGE = os.path.dirname(os.path.realpath(leasefence.__file__))


def source_of(module: str) -> str:
    """The source file of ``module`` in the installed package (found without importing it)."""
    base = os.path.join(PACKAGE, *module.split(".")[1:])
    return os.path.join(base, "__init__.py") if os.path.isdir(base) else base + ".py"


def key(modules: Iterable[str] = COMPILED + INPUTS) -> str:
    """What a build is made of: the Python (version and ABI) and the bytes of each source."""
    h = blake2b(digest_size=12)
    h.update(f"{sys.version}\0{sys.implementation.cache_tag}\0".encode())
    for m in modules:
        with open(source_of(m), "rb") as fh:
            h.update(m.encode() + b"\0" + fh.read() + b"\0")
    return h.hexdigest()


def builds_dir() -> str:
    return os.path.join(cache_root(), "compiled")


def built(k: str | None = None) -> str | None:
    """The folder of the finished build for these sources (``key()``), or None."""
    d = os.path.join(builds_dir(), k or key())
    return d if os.path.isfile(os.path.join(d, DONE)) else None


def is_compiled(module: object) -> bool:
    """Whether a module object was loaded from an extension module (a build), not a ``.py``."""
    f = getattr(module, "__file__", None) or ""
    return f.endswith(tuple(EXTENSION_SUFFIXES))


def engine_from_env() -> str:
    """``$LEASEFENCE_ENGINE`` (default ``auto``); an unknown value is an error naming it."""
    e = os.environ.get(ENGINE_ENV, "auto") or "auto"
    if e not in ENGINES:
        raise EngineError(f"{ENGINE_ENV}={e!r}: expected one of {', '.join(ENGINES)}")
    return e


def activate(engine: str = "auto", modules: tuple[str, ...] = COMPILED) -> str | None:
    """Load the compiled ``modules`` (``VALIDATOR``, ``DISPATCHER``, by default both) from the
    build for these sources, per ``engine``: the build's folder, or None when the interpreted
    modules run. Call it before anything imports one of ``modules``; once one is imported
    (interpreted) the build is not loaded. Once loaded, the build comes first on the packages'
    import paths: another module it holds, imported later, is its compiled one too.

    ``compiled`` raises ``EngineError`` when there is no build for these sources or a module of
    it would not load; ``auto`` then runs the interpreted modules."""
    if engine == "interpreted":
        return None
    try:
        k = key()
    except OSError as exc:  # a source unreadable: no build can be matched to it
        _refuse(engine, f"cannot read the sources to match a build: {exc}")
        return None
    d = built(k)
    if d is None:
        if engine == "compiled":
            raise EngineError(
                f"no compiled build (validator and dispatcher) for these sources (key {k}) in "
                f"{builds_dir()}: run `leasefence trace compile` first"
            )
        return None
    loaded = [sys.modules[m] for m in modules if m in sys.modules]
    if loaded:  # activated before in this process, or too late
        if len(loaded) == len(modules) and all(map(is_compiled, loaded)):
            return d
        if engine == "compiled":
            names = ", ".join(m.__name__ for m in loaded if not is_compiled(m))
            raise EngineError(f"already imported interpreted: {names}")
        return None
    # Marked used, so that another checkout's build does not prune it (best effort; not
    # contextlib.suppress, which trace check would import for this alone).
    try:  # noqa: SIM105
        os.utime(os.path.join(d, DONE))
    except OSError:
        pass
    damaged = _damaged(d)
    if damaged:
        _refuse(engine, f"the build in {d} is damaged: {', '.join(damaged)}")
        return None
    before = set(sys.modules)
    sys.path.insert(0, d)
    added: list[tuple[MutableSequence[str], str]] = [(sys.path, d)]
    for name in PACKAGES:
        pkg = importlib.import_module(name)
        entry = os.path.join(d, *name.split("."))
        pkg.__path__.insert(0, entry)
        added.append((pkg.__path__, entry))
    try:
        for m in modules:
            if not is_compiled(importlib.import_module(m)):
                raise ImportError(f"{m} loaded from {sys.modules[m].__file__}, not the build")
    except Exception as exc:  # a damaged build, or one another mypyc left: run interpreted
        _forget(d, added, before)
        _refuse(engine, f"the build in {d} does not load: {exc}")
        return None
    return d


def _damaged(d: str) -> list[str]:
    """The files of the build ``d`` missing, or not of the size its ``MANIFEST`` gives (a
    truncated extension module crashes the process that loads it: SIGBUS, no exception), and
    the modules of ``COMPILED`` it has no file for. Stat calls only: this runs at every start."""
    try:
        with open(os.path.join(d, MANIFEST), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return [MANIFEST]
    bad, listed = [], set()
    for line in lines:
        size, _, rel = line.partition(" ")
        try:
            ok = bool(rel) and os.stat(os.path.join(d, rel)).st_size == int(size)
        except (OSError, ValueError):
            ok = False
        if not ok:
            bad.append(rel or f"{MANIFEST} line {line!r}")
        listed.add(rel.split(".", 1)[0].replace("/", "."))
    return bad + [m for m in COMPILED if m not in listed]


def _refuse(engine: str, why: str) -> None:
    """A build that cannot be loaded: an error for ``--engine compiled`` (else the caller runs
    the interpreted modules)."""
    if engine == "compiled":
        raise EngineError(f"{why} (`leasefence trace compile --force` builds it again)")


def _forget(d: str, added: Iterable[tuple[MutableSequence[str], str]], before: set[str]) -> None:
    """Undo a failed activation: the build off the import paths, and every module imported
    since (the compiled ones, and interpreted ones that imported them, such as
    ``model.bounds``) out of ``sys.modules`` and off their parent packages, so the next import
    of each is the interpreted one."""
    for path, entry in added:
        path.remove(entry)
    for name in set(sys.modules) - before:
        module = sys.modules[name]
        if name.startswith("leasefence.") or (getattr(module, "__file__", "") or "").startswith(d):
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules and getattr(sys.modules[parent], child, None) is module:
                delattr(sys.modules[parent], child)


#: Builds kept for other sources (other checkouts and branches share the cache): the ``KEEP``
#: last used, and any used within ``IDLE`` seconds (``activate`` marks a build used).
KEEP, IDLE = 4, 86_400


def _prune(keep: Path) -> None:
    """Remove the builds neither among the ``KEEP`` last used nor used within ``IDLE``, and
    temporary folders older than ``IDLE`` (a build killed midway). Best effort: a build another
    process removes meanwhile, or a cache it cannot write, is left as it is."""
    import shutil
    from pathlib import Path

    now = time.time()
    try:
        builds = Path(builds_dir())
        used = sorted(
            ((d / DONE).stat().st_mtime, d)
            for d in builds.iterdir()
            if (d / DONE).is_file() and d != keep
        )
        idle = [d for when, d in used[: max(0, len(used) - (KEEP - 1))] if now - when > IDLE]
        stale = [d for d in builds.glob("build-*") if now - d.stat().st_mtime > IDLE]
    except OSError:
        return
    for d in idle + stale:
        shutil.rmtree(d, ignore_errors=True)


def _need_toolchain() -> None:
    import shutil
    import sysconfig
    from pathlib import Path

    try:
        import mypyc  # noqa: F401
    except ImportError as exc:
        raise NoToolchain(
            "leasefence trace compile needs mypyc, which comes with mypy: "
            "pip install 'leasefence[dev]' (or pip install mypy)"
        ) from exc
    cc = sysconfig.get_config_var("CC") or "cc"
    if shutil.which(cc.split()[0]) is None:
        raise NoToolchain(f"leasefence trace compile needs a C compiler: {cc.split()[0]} not found")
    headers = Path(sysconfig.get_paths()["include"]) / "Python.h"
    if not headers.is_file():
        raise NoToolchain(
            f"leasefence trace compile needs Python's C headers: {headers} not found "
            "(Debian: apt install python3-dev)"
        )


def compile_validator(say: Say = print, force: bool = False) -> Path:
    """Build the compiled validator for these sources, unless there is a complete one
    (``force``: again). Returns its folder. Built in a temporary folder beside the builds and
    renamed into place, so a build interrupted, or two at once, never leaves a folder that
    loads half a build. ``CompileError`` names what failed, a cache it cannot write included."""
    try:
        return _compile(say, force)
    except OSError as exc:
        raise CompileError(f"cannot write the build under {builds_dir()}: {exc}") from exc


def _compile(say: Say, force: bool) -> Path:
    import json
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path

    k = key()
    done = built(k)
    if done is not None and not force and not _damaged(done):
        say(f"compiled validator up to date: {done}")
        return Path(done)
    _need_toolchain()
    builds = Path(builds_dir())
    builds.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=builds))
    try:
        src = work / "src"
        # the package, its symlinked folders (model/, impl/, conformance/) read through
        for folder, dirs, names in os.walk(PACKAGE, followlinks=True):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in names:
                if name.endswith(".py"):
                    f = Path(folder, name)
                    dest = src / "leasefence" / f.relative_to(PACKAGE)
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(f, dest)
        files = [os.path.relpath(source_of(m), os.path.dirname(PACKAGE)) for m in COMPILED]
        say(f"compiling {len(files)} modules with mypyc (about a minute on two cores) ...")
        started = time.monotonic()
        env = dict(os.environ, MYPY_CACHE_DIR=str(work / "mypy_cache"))
        proc = subprocess.run(
            [sys.executable, "-m", "mypyc", *files],
            cwd=src,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise CompileError(f"mypyc failed (exit {proc.returncode}):\n{tail}")
        if key() != k:  # a source edited after it was read: the build is of neither version
            raise CompileError("the sources changed during the build: compile again")
        out = work / "out"
        manifest: list[str] = []
        for lib in src.rglob("*"):
            rel = lib.relative_to(src)
            # mypyc's own build/ folder holds copies of what it put beside the sources
            if lib.name.endswith(tuple(EXTENSION_SUFFIXES)) and rel.parts[0] != "build":
                dest = out / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(lib, dest)
                manifest.append(f"{dest.stat().st_size} {rel.as_posix()}")
        (out / MANIFEST).write_text("".join(line + "\n" for line in manifest))
        import mypy.version

        (out / DONE).write_text(
            json.dumps(
                {
                    "key": k,
                    "modules": list(COMPILED),
                    "mypyc": mypy.version.__version__,
                    "python": sys.version,
                    "seconds": round(time.monotonic() - started, 1),
                },
                indent=1,
            )
            + "\n"
        )
        final = builds / k
        if final.exists():  # forced, or incomplete: set aside first, so a rename replaces it
            old = work / "old"
            final.rename(old)
        try:
            out.rename(final)
        except OSError:  # another build finished first: it is the same code
            if built(k) is None:
                raise
        say(f"compiled validator: {final} ({time.monotonic() - started:.0f} s)")
        _prune(keep=final)
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)
