"""The TLC runner without TLC: finding the jar, its checksum, config expectations, exit status."""

from __future__ import annotations

import hashlib
import io
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from leasefence.cli import main
from leasefence.model.flavours import EXPECTED_VIOLATIONS, Flavour
from leasefence.model.system import Bounds
from leasefence.tlc import jar as tlc
from leasefence.tlc.agree import bounds_of_config
from leasefence.tlc.commands import EXIT_NO_TLC
from leasefence.tlc.configs import TLA_DIR, all_configs, expectation
from leasefence.tlc.jar import TLA2TOOLS_SHA256, TlcUnavailable, find_jar
from leasefence.tlc.runner import parse_tool_output


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"HOME": str(tmp_path / "home"), "PATH": "", **extra}


def test_jar_from_tla2tools_jar_with_a_foreign_checksum_is_used_but_marked_unverified(
    tmp_path: Path,
) -> None:
    jar = tmp_path / "tla2tools.jar"
    jar.write_bytes(b"not the release")
    found = find_jar(_env(tmp_path, TLA2TOOLS_JAR=str(jar)), download=False)
    assert found.path == jar
    assert found.source == "TLA2TOOLS_JAR"
    assert found.sha256 == hashlib.sha256(b"not the release").hexdigest()
    assert not found.verified
    assert "UNVERIFIED" in found.describe()


def test_tla2tools_jar_naming_a_missing_file_is_refused_with_its_path(tmp_path: Path) -> None:
    with pytest.raises(TlcUnavailable, match=r"nope\.jar is not a file"):
        find_jar(_env(tmp_path, TLA2TOOLS_JAR=str(tmp_path / "nope.jar")), download=False)


def test_jar_is_found_in_xdg_cache_home_before_home_cache(tmp_path: Path) -> None:
    xdg = tmp_path / "xdg" / "leasefence"
    home = tmp_path / "home" / ".cache" / "leasefence"
    for d in (xdg, home):
        d.mkdir(parents=True)
        (d / "tla2tools.jar").write_bytes(b"jar in " + str(d).encode())
    found = find_jar(_env(tmp_path, XDG_CACHE_HOME=str(tmp_path / "xdg")), download=False)
    assert found.path == xdg / "tla2tools.jar"
    assert found.source == "cache"
    assert find_jar(_env(tmp_path), download=False).path == home / "tla2tools.jar"


def test_no_jar_and_downloads_disabled_says_where_it_looked(tmp_path: Path) -> None:
    env = _env(tmp_path, LEASEFENCE_NO_DOWNLOAD="1")
    with pytest.raises(TlcUnavailable, match="downloading is disabled"):
        find_jar(env)


class _FakeResponse(io.BytesIO):
    def __enter__(self) -> _FakeResponse:
        return self

    def __exit__(self, *args: object) -> None:
        self.close()


def test_download_with_the_wrong_checksum_is_discarded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: _FakeResponse(b"evil"))
    with pytest.raises(TlcUnavailable, match="not the pinned"):
        find_jar(_env(tmp_path), download=True)
    assert not (tmp_path / "home" / ".cache" / "leasefence" / "tla2tools.jar").exists()
    assert not (tmp_path / "home" / ".cache" / "leasefence" / "tla2tools.part").exists()


def test_download_with_the_pinned_checksum_is_kept_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tlc, "TLA2TOOLS_SHA256", hashlib.sha256(b"release").hexdigest())
    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout: _FakeResponse(b"release"))
    found = find_jar(_env(tmp_path), download=True)
    assert found.source == "download"
    assert found.path.read_bytes() == b"release"
    assert found.verified


def test_download_failure_fails_fast_with_the_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(url: str, timeout: float) -> _FakeResponse:
        assert timeout <= 10
        raise urllib.error.URLError("network unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    with pytest.raises(TlcUnavailable, match="network unreachable"):
        find_jar(_env(tmp_path), download=True)


def test_pinned_checksum_is_the_v1_7_4_release() -> None:
    assert TLA2TOOLS_SHA256 == "936a262061c914694dfd669a543be24573c45d5aa0ff20a8b96b23d01e050e88"
    assert "/v1.7.4/tla2tools.jar" in tlc.TLA2TOOLS_URL


def test_tlc_command_exits_3_with_the_reason_when_no_tlc_can_be_had(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TLA2TOOLS_JAR", str(tmp_path / "missing.jar"))
    assert main(["tlc", "MCLeaseFence"]) == EXIT_NO_TLC
    assert "TLC unavailable" in capsys.readouterr().out


def test_every_config_expects_what_f314s_table_says_of_its_flavour() -> None:
    cfgs = {c.name: expectation(c) for c in all_configs(deep=True)}
    assert not cfgs["MCLeaseFence.cfg"].must_fail
    assert not cfgs["MCLeaseFenceDeep.cfg"].must_fail
    assert not cfgs["MCLeaseFenceDeepBig.cfg"].must_fail
    assert not cfgs["MCPipelineGenerationDeepBig.cfg"].must_fail
    for n in range(1, 5):
        e = cfgs[f"BuggyDefect{n}.cfg"]
        assert e.flavour is Flavour(f"defect{n}")
        assert e.violations == EXPECTED_VIOLATIONS[e.flavour]
        checked = (TLA_DIR / f"BuggyDefect{n}.cfg").read_text()
        assert any(name in checked for name in e.violations)


def test_deep_configs_run_only_when_asked_for() -> None:
    names = [c.name for c in all_configs()]
    assert names[0] == "MCLeaseFence.cfg"
    assert "MCLeaseFenceDeep.cfg" not in names
    assert not any("DeepBig" in n for n in names)  # issue 21's bigger bounds: slow tier only
    assert "MCLeaseFenceDeep.cfg" in [c.name for c in all_configs(deep=True)]


def test_config_constants_read_back_as_the_models_bounds() -> None:
    assert bounds_of_config(TLA_DIR / "MCLeaseFence.cfg") == Bounds(max_wall=1, max_dups=0)
    assert bounds_of_config(TLA_DIR / "MCLeaseFenceDeep.cfg") == Bounds()
    assert bounds_of_config(TLA_DIR / "MCLeaseFenceDeepBig.cfg") == Bounds(
        ttl=2, max_wall=2, max_leases=3, max_dups=0
    )
    assert bounds_of_config(TLA_DIR / "MCPipelineGenerationDeepBig.cfg") == Bounds(
        max_wall=1, max_dups=1, pipeline=2, fence="generation"
    )
    assert bounds_of_config(TLA_DIR / "BuggyDefect2.cfg").flavour is Flavour.UNFENCED_STATE


_SAMPLE = """@!@!@STARTMSG 2262:0 @!@!@
TLC2 Version 2.19 of 08 August 2024 (rev: 5a47802)
@!@!@ENDMSG 2262 @!@!@
@!@!@STARTMSG 2112:1 @!@!@
Action property L7_AuthoritativeStateId is violated.
@!@!@ENDMSG 2112 @!@!@
@!@!@STARTMSG 2121:1 @!@!@
The behavior up to this point is:
@!@!@ENDMSG 2121 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
1: <Initial predicate>
/\\ wall = 0
/\\ net = {}
@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2217:4 @!@!@
2: <DispatchWork line 290, col 5 to line 304, col 55 of module LeaseFence>
/\\ wall = 0
/\\ net = {<<1, "w1">>}
@!@!@ENDMSG 2217 @!@!@
@!@!@STARTMSG 2199:0 @!@!@
40 states generated, 20 distinct states found, 9 states left on queue.
@!@!@ENDMSG 2199 @!@!@
@!@!@STARTMSG 2194:0 @!@!@
The depth of the complete state graph search is 3.
@!@!@ENDMSG 2194 @!@!@
@!@!@STARTMSG 2186:0 @!@!@
Finished in 1724ms at (2026-11-30 08:40:00)
@!@!@ENDMSG 2186 @!@!@
"""


def test_tool_output_is_read_into_figures_violation_and_counterexample() -> None:
    r = parse_tool_output("BuggyDefect4.cfg", 13, _SAMPLE)
    assert (r.distinct_states, r.states_generated, r.depth, r.tlc_seconds) == (20, 40, 3, 1.724)
    assert (r.violated, r.violation_kind) == ("L7_AuthoritativeStateId", "action property")
    assert [s.action for s in r.counterexample] == ["Init", "DispatchWork"]
    assert r.counterexample[1].to_json()["state"] == {"wall": 0, "net": [[1, "w1"]]}
    assert r.errors == []
    assert r.version is not None
    assert "2.19" in r.version


def test_tool_output_with_an_error_message_is_an_error() -> None:
    text = (
        "@!@!@STARTMSG 1000:1 @!@!@\nTLC threw an unexpected exception.\n@!@!@ENDMSG 1000 @!@!@\n"
    )
    r = parse_tool_output("X.cfg", 255, text)
    assert r.errors == ["TLC threw an unexpected exception."]
    assert not r.completed
