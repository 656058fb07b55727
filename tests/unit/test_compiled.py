"""The compiled trace validator (``leasefence trace compile``) is the interpreted one compiled: it
is loaded only for the sources it was built from, gives the same report as the interpreted one on
a corpus of traces (correct runs, divergent runs, malformed files), and passes the trace
checker's own tests, the planted violation of every invariant among them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from leasefence.cli import main
from leasefence.harness import compiled
from leasefence.harness.bench.trace import synthesize
from leasefence.paths import ROOT

SEED = "20261130"
#: A test that uses the build may be the one that makes it (about a minute on two idle cores,
#: several on a loaded machine), and one runs the trace checker's tests again: beyond the
#: suite's 600 s.
BUILD_TIMEOUT = pytest.mark.timeout(1_800)


@pytest.fixture(scope="module")
def build() -> Path:
    """A build for these sources in the user's cache (made once, about a minute on two cores;
    kept for later runs), or a skip saying why none can be made here: no mypyc, C compiler or
    Python headers. Code that mypyc refuses fails the tests (``CompileError``), never skips."""
    try:
        return compiled.compile_validator(say=lambda _line: None)
    except compiled.NoToolchain as exc:
        pytest.skip(f"no compiled trace validator can be built here: {exc}")


def _check(path: Path, engine: str) -> tuple[int, str, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "leasefence", "trace", "check", "--engine", engine, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ, LEASEFENCE_ENGINE="interpreted"),  # --engine decides, not the env
    )
    return proc.returncode, proc.stdout, proc.stderr


def _corpus(where: Path) -> dict[str, int]:
    """Trace files and the exit status each must give: correct, divergent and malformed."""
    good = where / "good.ndjson"
    synthesize(good, 300)
    lines = good.read_text().splitlines()
    first_dispatch = next(i for i, line in enumerate(lines) if '"DispatchWork"' in line)
    first_result = next(i for i, line in enumerate(lines) if '"DeliverResult"' in line)
    files = {"good.ndjson": 0}

    def variant(name: str, edited: list[str], status: int) -> None:
        (where / name).write_text("\n".join(edited) + "\n")
        files[name] = status

    # a result for a dispatch that never happened: no lease of that rank holds the work
    variant("no-dispatch.ndjson", lines[:first_dispatch] + lines[first_dispatch + 1 :], 1)
    # the same result delivered twice in a row: the second completes nothing the model allows
    variant("twice.ndjson", lines[: first_result + 1] + lines[first_result:], 1)
    rec = json.loads(lines[first_result])
    for field, value, name in (
        ("now", "soon", "now-text"),
        ("now", float("nan"), "now-nan"),
        ("r", "1", "rank-text"),
        ("ok", 1, "ok-int"),
    ):
        bad = dict(rec, **{field: value})
        edited = [*lines[:first_result], json.dumps(bad), *lines[first_result + 1 :]]
        variant(f"{name}.ndjson", edited, 2)
    header = json.loads(lines[0])
    variant("version-99.ndjson", [json.dumps(dict(header, version=99)), *lines[1:]], 2)
    return files


def _tests_against(build: Path, *files: str) -> subprocess.CompletedProcess[str]:
    """``files`` run in a pytest whose modules are the build's (conftest activates it under
    ``LEASEFENCE_ENGINE=compiled``); passed only when every one of them did."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--hypothesis-seed={SEED}",
         *files],
        cwd=ROOT, capture_output=True, text=True, check=False,
        env=dict(os.environ, LEASEFENCE_ENGINE="compiled"),
    )  # fmt: skip
    assert f"trace validator and dispatcher: compiled ({build})" in proc.stdout, proc.stdout[-2000:]
    assert proc.returncode == 0, proc.stdout[-4000:]
    return proc


@BUILD_TIMEOUT
def test_compiled_and_interpreted_validators_give_the_same_report_on_a_corpus(
    build: Path, tmp_path: Path
) -> None:
    for name, status in _corpus(tmp_path).items():
        compiled_run = _check(tmp_path / name, "compiled")
        interpreted_run = _check(tmp_path / name, "interpreted")
        assert interpreted_run[0] == status, (name, interpreted_run)
        assert compiled_run == interpreted_run, name


@BUILD_TIMEOUT
def test_the_trace_checkers_tests_pass_against_the_compiled_validator(build: Path) -> None:
    """Its unit tests, run in a pytest whose modules are the build's: every step rule, the
    incremental checks against the full ones on every CI-graph transition, and the planted
    violation of each invariant that the incremental checks must report."""
    proc = _tests_against(build, "tests/unit/test_tracecheck.py", "tests/unit/test_incremental.py")
    assert " passed" in proc.stdout
    assert " failed" not in proc.stdout


#: The dispatcher's tests run against the build: the wire (fast paths against the general
#: encoder and decoder, fuzzed frames), the coordinator (its checks of every argument among
#: them), the master (dispatch, results, pipelining, hostile
#: workers, starvation, the scenarios) and the conformance machines that drive it step by step
#: against the model. A test that patches inside a compiled module is marked ``interpreted``
#: and skipped there, saying why.
DISPATCHER_TESTS = (
    "tests/unit/test_wire.py",
    "tests/unit/test_fast_paths.py",
    "tests/unit/test_frames.py",
    "tests/unit/test_fuzz_wire.py",
    "tests/unit/test_coordinator.py",
    "tests/unit/test_frozen.py",
    "tests/unit/test_master.py",
    "tests/unit/test_pipeline.py",
    "tests/unit/test_hostile_workers.py",
    "tests/unit/test_starvation.py",
    "tests/unit/test_scenarios.py",
    "tests/unit/test_edges.py",
    "tests/conformance/test_machines.py",
    "tests/conformance/test_depth2_scenarios.py",
)


@BUILD_TIMEOUT
def test_the_dispatchers_tests_pass_against_the_compiled_dispatcher(build: Path) -> None:
    proc = _tests_against(build, *DISPATCHER_TESTS)
    passed = int(proc.stdout.rsplit(" passed", 1)[0].rsplit(" ", 1)[-1])
    skipped = proc.stdout.count("interpreted modules only: ")
    assert passed > 1000, proc.stdout[-2000:]  # the files ran, not only their collection
    # the marked few (each names why), not a module's worth, and the marker is honoured there
    assert 0 < skipped <= 13, proc.stdout[-4000:]


@pytest.mark.mpi
@BUILD_TIMEOUT
def test_a_run_with_faults_on_the_compiled_dispatcher_completes_every_item_exactly_once(
    build: Path, tmp_path: Path
) -> None:
    """``leasefence run --engine compiled`` on every rank (workers faulty: duplicates, wrong and
    missing IDs, malformed messages): each item done once in the journal and its trace replays
    through the model, as the interpreted dispatcher's run must (tests/mpi/test_mpi_run.py)."""
    from leasefence.conformance.tracecheck import validate
    from leasefence.impl.workload import generate

    bin_ = Path(sys.executable).parent
    proc = subprocess.run(
        [str(bin_ / "mpiexec"), "-n", "3", str(bin_ / "leasefence"), "run", "--engine", "compiled",
         "--work", "60", "--worker", "trivial", "--inject", "dup,wrong-id,missing-id,malformed",
         "--journal", str(tmp_path / "j.jsonl"), "--snapshot", str(tmp_path / "s.json"),
         "--trace", str(tmp_path / "t.ndjson")],
        capture_output=True, text=True, timeout=240, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "dispatcher               compiled" in proc.stdout
    assert "duplicate completions    0" in proc.stdout
    done = [
        json.loads(line)["work_id"]
        for line in (tmp_path / "j.jsonl").read_text().splitlines()
        if json.loads(line)["event"] == "done"
    ]
    assert sorted(done) == sorted(i.work_id for i in generate(60, seed=0))  # each once
    with (tmp_path / "t.ndjson").open() as fh:
        report = validate(fh)
    assert report.ok, report.divergence


@pytest.mark.mpi
@BUILD_TIMEOUT
def test_the_dispatch_benchmark_times_the_master_as_run_compiled(
    build: Path, tmp_path: Path
) -> None:
    """``master-run-compiled`` is ``master-run`` with ``--engine compiled`` on every rank: a job
    that could not load the build fails (``activate`` raises), it never runs interpreted; and
    its rank 0 runs every module of its master from the build, the in-memory journal too."""
    from leasefence.harness.bench.dispatch import COMPILED_TWINS, _dispatch_job
    from leasefence.harness.bench.mpi_job import RANK0_MODULES

    assert COMPILED_TWINS == {"master-run-compiled": "master-run"}
    doc = _dispatch_job("master-run-compiled", 300, tmp_path)
    assert doc["contender"] == "master-run"
    assert doc["rate"] > 0
    assert doc["max_in_flight_per_rank"] > 2  # pipelined as the run's defaults say
    assert doc["compiled"] == list(RANK0_MODULES)  # the master whole, its journal too
    assert _dispatch_job("master-run", 50, tmp_path)["compiled"] == []


def test_a_build_is_keyed_by_every_byte_of_the_sources_it_was_made_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = compiled.key()
    real = compiled.source_of
    for module in (*compiled.COMPILED, *compiled.INPUTS):
        copy = tmp_path / "edited.py"
        copy.write_bytes(Path(real(module)).read_bytes() + b"\n# edited\n")
        monkeypatch.setattr(
            compiled, "source_of", lambda m, mod=module, c=str(copy): c if m == mod else real(m)
        )
        assert compiled.key() != before, module
    monkeypatch.setattr(compiled, "source_of", real)
    assert compiled.key() == before


def test_without_a_finished_build_trace_check_runs_interpreted_or_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    (Path(compiled.builds_dir()) / compiled.key()).mkdir(parents=True)  # unfinished: no BUILD.json
    assert compiled.built() is None
    assert compiled.activate("auto") is None
    assert compiled.activate("interpreted") is None
    with pytest.raises(compiled.EngineError, match="run `leasefence trace compile` first"):
        compiled.activate("compiled")
    trace = tmp_path / "t.ndjson"
    synthesize(trace, 20)
    assert main(["trace", "check", "--engine", "compiled", str(trace)]) == 2
    assert "leasefence trace compile" in capsys.readouterr().err
    assert main(["trace", "check", "--engine", "auto", str(trace)]) == 0
    assert main(["trace", "compile", "--status"]) == 1
    assert "no compiled validator for these sources" in capsys.readouterr().out
    # the dispatcher the same: `run --engine compiled` refuses before MPI starts, naming the fix
    assert main(["run", "--engine", "compiled", "--work", "1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("leasefence run: no compiled build (validator and dispatcher)")
    assert "run `leasefence trace compile` first" in err


@BUILD_TIMEOUT
def test_a_damaged_or_incomplete_build_is_undone_and_the_interpreted_validator_runs(
    build: Path, tmp_path: Path
) -> None:
    """A build that does not load (a truncated module: a build killed while copied, another
    mypyc) is taken off the import paths with every module it brought, so ``auto`` validates
    interpreted; ``--engine compiled`` says what is wrong (exit 2), never a traceback."""
    trace = tmp_path / "t.ndjson"
    synthesize(trace, 50)
    cache = tmp_path / "cache"
    copy = cache / "leasefence" / "compiled" / build.name
    shutil.copytree(build, copy)
    env = dict(os.environ, XDG_CACHE_HOME=str(cache), LEASEFENCE_ENGINE="auto")

    def check(engine: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "leasefence", "trace", "check", "--engine", engine, str(trace)],
            capture_output=True,
            text=True,
            check=False,
            env=env,
        )

    assert check("compiled").returncode == 0  # the copy loads as it is
    (lib,) = copy.glob("leasefence/model/incremental.*")
    rel = lib.relative_to(copy).as_posix()
    intact = lib.read_bytes()
    for damage, says in (
        (b"\0" * len(intact), "does not load"),  # the right size, not a library: dlopen refuses
        (intact[:4096], f"is damaged: {rel}"),  # truncated: refused before it is loaded
        (None, f"is damaged: {rel}"),  # missing
    ):
        if damage is None:
            lib.unlink()
        else:
            lib.write_bytes(damage)
        refused = check("compiled")
        assert refused.returncode == 2, refused.stderr[-2000:]
        assert says in refused.stderr
        assert "trace compile --force" in refused.stderr
        fallback = check("auto")
        assert (fallback.returncode, fallback.stderr) == (0, ""), fallback.stderr[-2000:]
        assert ": OK, 100 steps replayed" in fallback.stdout


def test_a_manifest_names_each_missing_resized_or_unlisted_module_and_its_own_junk(
    tmp_path: Path,
) -> None:
    assert compiled._damaged(str(tmp_path)) == [compiled.MANIFEST]  # none: nothing is trusted
    (tmp_path / "leasefence").mkdir()
    (tmp_path / "leasefence" / "a.so").write_bytes(b"12345")
    (tmp_path / "leasefence" / "b.so").write_bytes(b"123")
    (tmp_path / compiled.MANIFEST).write_text(
        "5 leasefence/a.so\n4 leasefence/b.so\n9 leasefence/gone.so\njunk\nx leasefence/a.so\n"
    )
    damaged = compiled._damaged(str(tmp_path))
    assert damaged[:4] == [
        "leasefence/b.so",  # 3 bytes, not 4: truncated
        "leasefence/gone.so",
        f"{compiled.MANIFEST} line 'junk'",
        "leasefence/a.so",  # a size that is not a number
    ]
    assert damaged[4:] == list(compiled.COMPILED)  # none of them listed


def test_a_cache_that_cannot_be_written_is_named_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(not_a_folder))
    try:
        compiled._need_toolchain()
    except compiled.NoToolchain as exc:
        pytest.skip(f"no toolchain, so no build is tried: {exc}")
    assert main(["trace", "compile"]) == 2
    err = capsys.readouterr().err
    assert "cannot write the build under" in err
    assert str(not_a_folder) in err


def test_an_unknown_engine_in_the_environment_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setenv(compiled.ENGINE_ENV, "fast")
    trace = tmp_path / "t.ndjson"
    synthesize(trace, 20)
    assert main(["trace", "check", str(trace)]) == 2
    assert "LEASEFENCE_ENGINE='fast'" in capsys.readouterr().err


def test_trace_check_and_run_offer_exactly_the_engines_the_activation_knows() -> None:
    """``--engine``'s choices are spelled out in ``cli/argtypes.py`` (a command's help imports
    no harness): they must be ``compiled.ENGINES``, for ``trace check`` and for ``run``."""
    import argparse

    from leasefence.cli import build_parser
    from leasefence.cli.argtypes import ENGINES

    assert compiled.ENGINES == ENGINES
    for path in (("trace", "check"), ("run",)):
        parser: argparse.ArgumentParser = build_parser(path[0], alone=True)
        for name in path:
            (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            parser = sub.choices[name]
        (engine,) = [a for a in parser._actions if a.dest == "engine"]
        assert engine.default is None  # the environment decides by default
        assert tuple(engine.choices or ()) == compiled.ENGINES, path
