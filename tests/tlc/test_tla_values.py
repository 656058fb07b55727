"""The TLA+ value parser reads values exactly as TLC prints them (states, dot labels)."""

from __future__ import annotations

import pytest

from leasefence.model.state import Dispatch, Lease, State, StateLease
from leasefence.tlc.agree import _undot, parse_dot, to_model_state
from leasefence.tlc.values import (
    Fcn,
    ModelValue,
    TlaParseError,
    as_mapping,
    parse_state,
    parse_value,
    to_json,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0),
        ("-3", -3),
        ("TRUE", True),
        ("FALSE", False),
        ('"w1"', "w1"),
        (r'"a \"quoted\" \\ back"', 'a "quoted" \\ back'),
        ("NoTask", ModelValue("NoTask")),
        ("{}", frozenset()),
        ("{1, 2, 2}", frozenset({1, 2})),
        ("<< >>", ()),
        ('<<1, "w1">>', (1, "w1")),
        ('{<<1, "w1">>, <<2, "w3">>}', frozenset({(1, "w1"), (2, "w3")})),
    ],
)
def test_scalars_sets_and_tuples_parse(text: str, value: object) -> None:
    assert parse_value(text) == value


def test_a_record_and_the_same_function_written_with_colon_greater_are_equal() -> None:
    rec = parse_value('[owner |-> 1, clock |-> "unix"]')
    fcn = parse_value('("clock" :> "unix" @@ "owner" :> 1)')
    assert rec == fcn
    assert isinstance(rec, Fcn)
    assert as_mapping(rec) == {"clock": "unix", "owner": 1}


def test_a_function_on_1_to_n_is_a_tuple_and_other_integer_domains_are_functions() -> None:
    assert parse_value("(1 :> 10 @@ 2 :> 20)") == (10, 20)
    two = parse_value('(2 :> [work |-> "w1", task |-> "s1"])')
    assert isinstance(two, Fcn)
    assert as_mapping(two) == {2: parse_value('[work |-> "w1", task |-> "s1"]')}
    assert as_mapping(parse_value("<<7>>")) == {1: 7}


def test_nested_multiline_values_parse() -> None:
    text = """[ leases |-> [w1 |-> [owner |-> 1, updated |-> 0, clock |-> "unix"]],
  completed |-> {},
  attempts |-> [w1 |-> 1] ]"""
    j = as_mapping(parse_value(text))
    assert j["completed"] == frozenset()
    assert as_mapping(j["attempts"]) == {"w1": 1}


@pytest.mark.parametrize("bad", ["", "[a |-> ]", "{1, 2", "<<1 2>>", "1 2", "(1 :> 2", "@"])
def test_malformed_values_are_refused(bad: str) -> None:
    with pytest.raises(TlaParseError):
        parse_value(bad)


def test_a_function_mapping_one_key_twice_differently_is_refused() -> None:
    with pytest.raises(TlaParseError, match="both"):
        parse_value("(1 :> 2 @@ 1 :> 3)")


def test_values_become_json() -> None:
    v = parse_value('[net |-> {<<2, "w1">>, <<1, "w2">>}, m |-> NoTask, f |-> (3 :> TRUE)]')
    assert to_json(v) == {"f": {"3": True}, "m": "NoTask", "net": [[1, "w2"], [2, "w1"]]}


_DOT_LINE = (
    '-5069712375315592216 [label="/\\\\ active = <<[work |-> \\"w1\\", task |-> \\"s1\\"]>>\\n'
    "/\\\\ rollbacks = 0\\n/\\\\ mono = 0\\n"
    '/\\\\ journal = [ leases |-> [w1 |-> [owner |-> 1, updated |-> 0, clock |-> \\"unix\\"]],\\n'
    "  completed |-> {},\\n  attempts |-> [w1 |-> 1] ]\\n/\\\\ dups = 0\\n/\\\\ reboots = 0\\n"
    "/\\\\ coordinator = [ leases |-> [s1 |-> [owner |-> 1, updated |-> 0, epoch |-> 1]],\\n"
    "  epoch |-> 1,\\n  stats |-> << >> ]\\n"
    '/\\\\ net = {<<1, \\"w1\\">>}\\n/\\\\ wall = 0"];'
)


def test_a_dot_node_of_tlc_maps_to_the_models_state() -> None:
    nodes, edges = parse_dot(
        iter(
            [
                "strict digraph DiskGraph {",
                _DOT_LINE,
                '-1 -> -5069712375315592216 [label="DispatchWork",color="black",fontcolor="black"];',
            ]
        )
    )
    assert edges == [("-1", "-5069712375315592216", "DispatchWork")]
    state = to_model_state(parse_state(nodes["-5069712375315592216"]))
    assert state == State(
        journal=State().journal._replace(
            leases=(("w1", Lease(1, 0, "unix")),), attempts=(("w1", 1),)
        ),
        coordinator=State().coordinator._replace(leases=(("s1", StateLease(1, 0, 1)),)),
        active=((1, Dispatch("w1", "s1")),),
        net=frozenset({(1, "w1")}),
    )


def test_undot_reverses_tlcs_label_escaping() -> None:
    assert _undot(r"/\\ x = \"a\"\n/\\ y = 1") == '/\\ x = "a"\n/\\ y = 1'
