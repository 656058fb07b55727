"""The table of actions (``conformance.actions``) against every layer it names: the spec, the model,
the implementation, the trace writer, the conformance machines and ``tla/README.md``."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import stateful

from leasefence.conformance.actions import ACTIONS, BY_NAME, FIXTURE_RULES, render_markdown, snake
from leasefence.conformance.machines import MACHINES
from leasefence.impl import trace
from leasefence.model.check import reachable
from leasefence.model.system import Bounds

ROOT = Path(__file__).resolve().parents[2]
SPEC = (ROOT / "tla" / "LeaseFence.tla").read_text(encoding="utf-8")


def resolve(package: str, path: str) -> Callable[..., Any]:
    """``module.Class.method`` or ``module.function`` of ``package``, by import and getattr."""
    module, *names = path.split(".")
    found: Any = importlib.import_module(f"{package}.{module}")
    for name in names:
        found = getattr(found, name)
    assert callable(found), f"{package}.{path} is not callable"
    return cast(Callable[..., Any], found)


def parameters(fn: Callable[..., Any]) -> str:
    """The parameters as the table writes them: ``self`` left out, ``*`` before keyword-only."""
    out: list[str] = []
    for p in inspect.signature(fn).parameters.values():
        if p.name == "self":
            continue
        if p.kind is p.KEYWORD_ONLY and "*" not in out:
            out.append("*")
        out.append(p.name)
    return f"({', '.join(out)})"


def next_actions(spec: str) -> set[str]:
    """The action names of the spec's ``Next``, each disjunct's action after its quantifiers."""
    body = spec.split("\nNext ==", 1)[1].split("\n\n", 1)[0]
    names = set()
    for disjunct in body.split("\\/")[1:]:
        call = disjunct.rsplit(":", 1)[-1].strip()
        match = re.fullmatch(r"([A-Z]\w*)(\(.*\))?", call, re.S)
        assert match, f"cannot read the disjunct {disjunct.strip()!r} of Next"
        names.add(match.group(1))
    return names


def mirrors(spec: str) -> dict[str, tuple[str, str | None]]:
    """``X mirrors module.function (Class.method)`` of the spec's comments, by action name."""
    prose = re.sub(r"\s*\*\)[ \t]*\n[ \t]*\(\*\s*", " ", spec)  # one comment: one line
    found = {}
    pattern = r"\(\*\s*(\w+)(?:\([^)]*\))? mirrors (\w+\.\w+)(?: \((\w+\.\w+)\))?"
    for name, model, impl in re.findall(pattern, prose):
        found[name] = (model, impl or None)
    return found


def written_events() -> set[str]:
    """The ``"event"`` values of the dict literals ``impl/trace.py`` writes."""
    tree = ast.parse(Path(trace.__file__).read_text(encoding="utf-8"))
    events = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "event":
                    assert isinstance(value, ast.Constant), ast.unparse(value)
                    events.add(value.value)
    return events


def machine_rules() -> set[str]:
    """Every rule and initialize rule of every conformance machine, by name."""
    markers = (stateful.RULE_MARKER, stateful.INITIALIZE_RULE_MARKER)
    return {
        name
        for machine in MACHINES.values()
        for name, member in inspect.getmembers(machine)
        if any(getattr(member, m, None) is not None for m in markers)
    }


def test_the_mapping_table_in_tla_readme_is_the_one_generated_from_the_table() -> None:
    readme = (ROOT / "tla" / "README.md").read_text(encoding="utf-8")
    assert render_markdown() in readme, (
        "tla/README.md's mapping table is not conformance.actions.render_markdown(); paste the "
        "output of `python -m leasefence.conformance.actions` in its place"
    )


def test_each_action_has_one_row_and_its_arguments_as_the_spec_defines_it() -> None:
    assert len(BY_NAME) == len(ACTIONS)
    for a in ACTIONS:
        head = re.escape(a.spec)
        assert re.search(rf"^{head} ==", SPEC, re.M), f"the spec defines no `{a.spec} ==`"


def test_the_system_actions_of_the_table_are_exactly_the_disjuncts_of_the_specs_next() -> None:
    system = {a.name for a in ACTIONS if a.kind == "system"}
    assert system == next_actions(SPEC)
    assert {a.kind for a in ACTIONS} <= {"init", "system", "journal", "coordinator", "operator"}


def test_every_mirrors_comment_of_the_spec_names_the_tables_model_function_and_method() -> None:
    said = mirrors(SPEC)
    assert {"LeaseWork", "DeliverResult", "RestartMaster", "CompactJournal"} <= set(said)
    for a in ACTIONS:
        if a.model is None or a.kind == "operator":
            continue
        assert a.name in said, f"no comment of the spec says which function {a.name} mirrors"
    for name, (model, impl) in said.items():
        if name not in BY_NAME:
            continue  # Next, WithinConstraint: no action
        a = BY_NAME[name]
        assert model == a.model, f"the spec says {name} mirrors {model}, the table {a.model}"
        if impl is not None:
            assert a.impl is not None, f"the spec says {name} mirrors {impl}, the table nothing"
            assert a.impl.endswith(impl), f"the spec says {name} mirrors {impl}, the table {a.impl}"


def test_every_model_function_of_the_table_exists_with_the_parameters_it_lists() -> None:
    for a in ACTIONS:
        if a.model is None:
            assert a.model_text, f"{a.name} names neither a model function nor a stand-in"
            continue
        fn = resolve("leasefence.model", a.model)
        assert parameters(fn) == a.model_args, f"{a.name}: {a.model}{parameters(fn)}"


def test_every_implementation_method_of_the_table_exists_with_the_parameters_it_lists() -> None:
    for a in ACTIONS:
        if a.impl is None:
            assert a.impl_text, f"{a.name} names neither a method nor a stand-in"
            continue
        fn = resolve("leasefence.impl", a.impl)
        assert parameters(fn) == a.impl_args, f"{a.name}: {a.impl}{parameters(fn)}"


def test_model_functions_and_methods_begin_their_docstrings_with_their_action() -> None:
    for a in ACTIONS:
        if a.kind in ("init", "operator"):
            continue
        names = [(a.model, "leasefence.model")]
        if a.impl is not None and a.impl.split(".")[1][:1].isupper() and "__" not in a.impl:
            names.append((a.impl, "leasefence.impl"))
        for path, package in names:
            if path is None:
                continue
            doc = inspect.getdoc(resolve(package, path)) or ""
            first = re.match(r"\w*", doc)
            word = first.group(0) if first else ""
            assert word in BY_NAME, f"{package}.{path}'s docstring does not begin with an action"
            assert path in (BY_NAME[word].model, BY_NAME[word].impl), (a.name, path, word)


def test_the_trace_events_of_the_table_are_exactly_the_ones_impl_trace_writes() -> None:
    traced = {a.trace for a in ACTIONS if a.trace is not None}
    assert traced == written_events()
    for a in ACTIONS:
        assert a.trace in (None, a.name, "Header"), f"{a.name}'s trace event has another name"


def test_the_rules_of_the_conformance_machines_are_the_tables_and_the_fixtures() -> None:
    listed = {r for a in ACTIONS for r in a.rules}
    assert machine_rules() == listed | set(FIXTURE_RULES)
    assert not listed & set(FIXTURE_RULES)
    for a in ACTIONS:
        if a.rules and a.rules[0] != "open":
            assert a.rules[0] == snake(a.name), f"{a.name}'s first rule is {a.rules[0]}"


#: Small bounds under which every system action occurs: rank fencing, and depth 2 with generations.
SMALL = Bounds(max_wall=1, max_dups=0, max_attempts=1, max_leases=1)


@pytest.mark.parametrize("bounds", [SMALL, replace(SMALL, pipeline=2, fence="generation")])
def test_the_models_successors_label_every_step_with_a_system_action_of_the_table(
    bounds: Bounds,
) -> None:
    system = {a.name for a in ACTIONS if a.kind == "system"}
    assert {label[0] for _, label, _ in reachable(bounds)} == system
