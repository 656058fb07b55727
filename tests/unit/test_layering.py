"""The import contract: imports only go down the layers of docs/architecture.md, with no cycle.

The modules are read with ``ast`` from their real folders (the ``package-dir`` mapping in
pyproject.toml), never imported, so the test sees every import: at module level, inside functions
and under ``if TYPE_CHECKING:``. Layers from the bottom:

    leaf       leasefence (the package's __init__), leasefence.report, leasefence.paths,
               leasefence.cache
    protocol   leasefence.model (standard library, itself and MODEL_THIRD_PARTY only),
               leasefence.impl
    checking   leasefence.conformance, leasefence.tlc, leasefence.modelcheck
    harness    leasefence.harness
    verify     leasefence.verify
    cli        leasefence.cli, leasefence.__main__
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LEAVES = ("leasefence", "leasefence.report", "leasefence.paths", "leasefence.cache")
#: (module prefix, layer name, rank): a module belongs to the longest prefix it starts with.
LAYERS: tuple[tuple[str, str, int], ...] = (
    ("leasefence.model", "protocol", 1),
    ("leasefence.impl", "protocol", 1),
    ("leasefence.conformance", "checking", 2),
    ("leasefence.tlc", "checking", 2),
    ("leasefence.modelcheck", "checking", 2),
    ("leasefence.harness", "harness", 3),
    ("leasefence.verify", "verify", 4),
    ("leasefence.cli", "cli", 5),
    ("leasefence.__main__", "cli", 5),
)
#: What impl/ may never import, though model/ shares its layer.
IMPL_FORBIDDEN = (
    "leasefence.model",
    "leasefence.conformance",
    "leasefence.harness",
    "leasefence.tlc",
    "leasefence.verify",
    "leasefence.cli",
)

#: ``if TYPE_CHECKING:`` imports that may close a cycle (importer, imported): reason. Any other
#: TYPE_CHECKING import counts as an ordinary edge.
TYPE_CHECKING_ALLOWED: dict[tuple[str, str], str] = {
    ("leasefence.impl.trace", "leasefence.impl.master"): (
        "TraceWriter.result annotates with master's ResultOutcome; master imports trace at run time"
    ),
}

#: Imports that break the contract on this branch, each with the reason it is still there and
#: who removes it. The test fails if one of them is no longer needed, so the list only shrinks.
KNOWN_VIOLATIONS: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Edge:
    """One import statement: ``importer`` imports ``imported`` at ``line`` of ``path``."""

    importer: str
    imported: str
    path: str
    line: int
    type_only: bool = False

    def __str__(self) -> str:
        kind = " (TYPE_CHECKING)" if self.type_only else ""
        return f"{self.importer} -> {self.imported} ({self.path}:{self.line}){kind}"


def package_dirs(root: Path) -> dict[str, Path]:
    """The top-level packages and the real folder each is installed from (pyproject.toml)."""
    config = tomllib.loads((root / "pyproject.toml").read_text())
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return {pkg: root / folder for pkg, folder in mapping.items() if pkg.count(".") <= 1}


def modules(dirs: dict[str, Path]) -> dict[str, Path]:
    """Every module under the mapped folders, by dotted name; symlinked folders are skipped (the
    folder they point at is mapped in its own right)."""
    found: dict[str, Path] = {}
    for pkg, folder in dirs.items():
        for path in sorted(folder.rglob("*.py")):
            rel = path.relative_to(folder)
            if any((folder / part).is_symlink() for part in _prefixes(rel.parts[:-1])):
                continue
            parts = [*pkg.split("."), *rel.with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _prefixes(parts: tuple[str, ...]) -> Iterator[Path]:
    for i in range(1, len(parts) + 1):
        yield Path(*parts[:i])


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, type_only: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every import statement in ``tree``, with whether it sits under ``if TYPE_CHECKING:``."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node, type_only
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), True)
            for child in node.orelse:
                yield from _imports(ast.Module(body=[child], type_ignores=[]), type_only)
        else:
            yield from _imports(node, type_only)


def _target(name: str, known: Iterable[str]) -> str:
    """The longest project module ``name`` starts with (``name`` itself when it is not ours)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return name


def edges_of(module: str, path: Path, known: dict[str, Path]) -> Iterator[Edge]:
    """The imports of one module, each resolved to the project module it loads (or, for the
    standard library and third parties, to the dotted name as written)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    where = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)
    for node, type_only in _imports(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            if base == "__future__":
                continue
            # `from pkg import name` loads pkg.name when that is a module, else pkg itself.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                for alias in node.names
            ]
        for name in dict.fromkeys(names):
            yield Edge(module, _target(name, known), where, node.lineno, type_only)


def all_edges(root: Path = ROOT) -> list[Edge]:
    """Every import of every project module, read from the folders pyproject.toml maps."""
    known = modules(package_dirs(root))
    return [edge for module, path in known.items() for edge in edges_of(module, path, known)]


def layer_of(module: str) -> tuple[str, int] | None:
    """The layer name and rank of a project module; None for what is not ours."""
    if module in LEAVES:
        return ("leaf", 0)
    best = max(
        (entry for entry in LAYERS if module == entry[0] or module.startswith(entry[0] + ".")),
        key=lambda entry: len(entry[0]),
        default=None,
    )
    return None if best is None else (best[1], best[2])


def _within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


#: The only third-party packages model/ may import, each with its reason: data structures, no
#: I/O, no clocks, nothing that could make the model other than a pure function of its inputs.
MODEL_THIRD_PARTY: dict[str, str] = {
    "immutables": "state.py's large maps (a hash array mapped trie in C): a trace replay's "
    "edits and reads in time that does not grow with the run (issue 18)",
}


def rule_broken(edge: Edge) -> str | None:
    """Why ``edge`` breaks the layering, or None when it is allowed."""
    src, dst = layer_of(edge.importer), layer_of(edge.imported)
    if _within(edge.importer, "leasefence.model"):
        top = edge.imported.split(".")[0]
        if (
            not _within(edge.imported, "leasefence.model")
            and top not in sys.stdlib_module_names
            and top not in MODEL_THIRD_PARTY
        ):
            return "model/ imports only the standard library, itself and MODEL_THIRD_PARTY"
    if _within(edge.importer, "leasefence.impl") and any(
        _within(edge.imported, banned) for banned in IMPL_FORBIDDEN
    ):
        return "impl/ imports nothing from model/, conformance/, tlc, harness, verify or cli"
    if src is not None and dst is not None and dst[1] > src[1]:
        return f"upward import: {src[0]} layer imports the {dst[0]} layer"
    return None


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """Every strongly connected group of two or more project modules (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if layer_of(e.imported) is None or e.importer == e.imported:
            continue
        if e.type_only and (e.importer, e.imported) in TYPE_CHECKING_ALLOWED:
            continue
        graph.setdefault(e.importer, set()).add(e.imported)
        graph.setdefault(e.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def problems(edges: list[Edge]) -> list[str]:
    """Every broken rule, one line each naming the import; KNOWN_VIOLATIONS are left out."""
    lines = [
        f"{edge}: {why}"
        for edge in edges
        if (why := rule_broken(edge)) and (edge.importer, edge.imported) not in KNOWN_VIOLATIONS
    ]
    for group in cycles(e for e in edges if (e.importer, e.imported) not in KNOWN_VIOLATIONS):
        members = set(group)
        inside = [str(e) for e in edges if e.importer in members and e.imported in members]
        lines.append("import cycle between " + ", ".join(group) + ": " + "; ".join(inside))
    return lines


def test_every_import_goes_down_the_layers_and_no_modules_import_each_other_in_a_circle() -> None:
    found = problems(all_edges())
    assert not found, "the import contract is broken:\n" + "\n".join(found)


def test_the_contract_reads_every_layer_from_its_real_folder() -> None:
    known = modules(package_dirs(ROOT))
    for module in ("leasefence.model.state", "leasefence.impl.journal", "leasefence.verify"):
        assert module in known
    assert any(m.startswith("leasefence.conformance.") for m in known)
    assert any(m.startswith("leasefence.tlc.") for m in known)
    assert any(m.startswith("leasefence.harness.") for m in known)
    assert all(layer_of(m) is not None for m in known), [m for m in known if layer_of(m) is None]
    # Through the real folders, never twice through the symlinks leasefence/{model,impl,...}.
    assert all(path.resolve() == path for path in known.values())


def test_every_known_violation_is_still_present_so_the_list_only_shrinks() -> None:
    present = {(e.importer, e.imported) for e in all_edges()}
    assert not set(KNOWN_VIOLATIONS) - present, set(KNOWN_VIOLATIONS) - present
    allowed = {(e.importer, e.imported) for e in all_edges() if e.type_only}
    assert not set(TYPE_CHECKING_ALLOWED) - allowed, set(TYPE_CHECKING_ALLOWED) - allowed


def test_a_planted_upward_import_is_reported_with_the_offending_line() -> None:
    planted = Edge("leasefence.impl.strictjson", "leasefence.verify", "impl/strictjson.py", 7)
    found = problems([*all_edges(), planted])
    assert found == [f"{planted}: {rule_broken(planted)}"]
    assert found[0].startswith("leasefence.impl.strictjson -> leasefence.verify ")
    assert "impl/strictjson.py:7" in found[0]


def test_a_planted_import_of_the_model_from_impl_is_reported() -> None:
    planted = Edge("leasefence.impl.rules", "leasefence.model.rules", "impl/rules.py", 3)
    assert problems([planted]) == [f"{planted}: {rule_broken(planted)}"]
    assert "impl/ imports nothing from model/" in problems([planted])[0]


def test_a_planted_third_party_import_in_the_model_is_reported() -> None:
    planted = Edge("leasefence.model.state", "hypothesis", "model/state.py", 9)
    assert problems([planted]) == [
        f"{planted}: model/ imports only the standard library, itself and MODEL_THIRD_PARTY"
    ]
    assert problems([Edge("leasefence.model.state", "dataclasses", "model/state.py", 9)]) == []


def test_a_planted_cycle_inside_a_function_is_reported_naming_both_imports() -> None:
    # harness.campaign imports harness.mutants inside a function; plant the way back.
    back = Edge("leasefence.harness.mutants", "leasefence.harness.campaign", "x.py", 5)
    there = Edge("leasefence.harness.campaign", "leasefence.harness.mutants", "y.py", 9)
    found = problems([there, back])
    assert len(found) == 1
    assert found[0].startswith("import cycle between leasefence.harness.campaign, ")
    assert str(back) in found[0]
    assert str(there) in found[0]


def test_a_type_checking_import_closes_a_cycle_unless_the_allow_list_names_it() -> None:
    runtime = Edge("leasefence.impl.master", "leasefence.impl.trace", "impl/master.py", 1)
    typed = Edge("leasefence.impl.trace", "leasefence.impl.master", "impl/trace.py", 2, True)
    assert problems([runtime, typed]) == []
    other = Edge("leasefence.impl.wire", "leasefence.impl.master", "impl/wire.py", 2, True)
    back = Edge("leasefence.impl.master", "leasefence.impl.wire", "impl/master.py", 3)
    assert len(problems([back, other])) == 1


def test_imports_are_read_from_a_real_tree_including_function_and_relative_imports(
    tmp_path: Path,
) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "leasefence" = "pkg", "leasefence.impl" = "impl" }\n'
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "impl").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "verify.py").write_text("")
    (tmp_path / "impl" / "__init__.py").write_text("")
    (tmp_path / "impl" / "a.py").write_text("from . import b\n")
    (tmp_path / "impl" / "b.py").write_text("def f():\n    from leasefence import verify\n")
    edges = all_edges(tmp_path)
    pairs = {(e.importer, e.imported, e.line) for e in edges}
    assert ("leasefence.impl.a", "leasefence.impl.b", 1) in pairs
    assert ("leasefence.impl.b", "leasefence.verify", 2) in pairs
    found = problems(edges)
    assert len(found) == 1
    assert found[0].startswith("leasefence.impl.b -> leasefence.verify (")


def test_a_worker_rank_starts_without_the_journal_coordinator_and_master_modules() -> None:
    # Issue 19: every rank of `leasefence run` imports what its path needs, and a worker's path
    # (the run command, its harness, ``mpirun.run`` then ``worker_execute``) needs none of the
    # master's files: at 4 ranks on 2 cores the workers' imports delayed rank 0's start (a
    # 2,000-task job 0.64 -> 0.59 s). Counted in modules (deterministic), in a fresh interpreter.
    code = (
        "import sys\n"
        "import leasefence.cli.cmd_run, leasefence.harness.faults, leasefence.harness.runjob\n"
        "from leasefence.impl.mpirun import run\n"
        "from leasefence.impl.transport import worker_execute\n"
        "print(sorted(m for m in sys.modules if m.startswith('leasefence.')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert "leasefence.impl.transport" in loaded  # the worker's loop is there
    masters = {
        "master",
        "journal",
        "journalops",
        "coordinator",
        "coordfile",
        "coordvalues",
        "records",
        "trace",
    }
    assert [m for m in loaded if m.split(".")[-1] in masters] == []
