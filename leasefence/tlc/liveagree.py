"""Liveness verdicts agree: TLC and the Python checker on every live config (issue 21 point 3).

For a live config (``tla/*Live*.cfg``), TLC checks it and ``model.livecheck.check_live`` checks
the same constants and the same properties; both must say the same thing: the same property
violated, or no violation and the same number of distinct states. Each verdict is also judged
against the config's expectation (``model.live.live_expectation``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from leasefence.model.live import LiveBounds
from leasefence.model.livecheck import LiveResult, check_live
from leasefence.tlc.agree import bounds_of_config
from leasefence.tlc.configs import (
    all_configs,
    checked_properties,
    constant_text,
    expectation,
    is_live,
    specification,
)
from leasefence.tlc.jar import Tools
from leasefence.tlc.runner import TlcResult, run_tlc
from leasefence.tlc.values import TlaParseError, parse_value


def live_configs(deep: bool = False) -> list[Path]:
    """Every liveness config in ``tla/``: the must-pass one first."""
    return [c for c in all_configs(deep) if is_live(c)]


def live_bounds_of_config(cfg: Path) -> LiveBounds:
    """The ``LiveBounds`` with the constants of a live config."""
    starve = parse_value(constant_text(cfg, "Starve", "{}"))
    halt = parse_value(constant_text(cfg, "RecoveryHaltsAfterRollback", "FALSE"))
    if not isinstance(starve, frozenset) or not isinstance(halt, bool):
        raise TlaParseError(
            f"Starve must be a set and RecoveryHaltsAfterRollback a Boolean in {cfg}"
        )
    return LiveBounds(
        bounds_of_config(cfg),
        fair=specification(cfg) != "LiveSpecUnfair",
        starve=frozenset(str(w) for w in starve),
        halt_after_rollback=halt,
    )


@dataclass
class LiveAgreement:
    """Both checkers' verdicts on one live config, and what is wrong with them."""

    config: Path
    tlc: TlcResult
    model: LiveResult
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def report(self) -> str:
        t = self.tlc.violated or "no violation"
        m = self.model.violated[0] if self.model.violated else "no violation"
        figures = (
            f"TLC {t} ({self.tlc.distinct_states} states, {self.tlc.seconds:.1f} s"
            + (f", {self.tlc.lasso}" if self.tlc.lasso else "")
            + f"); model {m} ({self.model.states} states"
            + (f", {self.model.instance}" if self.model.instance else "")
            + ")"
        )
        verdict = "AGREE" if self.ok else "DISAGREE: " + "; ".join(self.problems)
        return f"{self.config.name}: {verdict}: {figures}"


def live_agree(cfg: Path, tools: Tools, workers: int | str = 1) -> LiveAgreement:
    """Run TLC and the Python checker on one live config and compare their verdicts."""
    only = checked_properties(cfg)
    tlc = run_tlc(cfg, tools, workers)
    model = check_live(live_bounds_of_config(cfg), only)
    ag = LiveAgreement(cfg, tlc, model)
    if tlc.errors:
        ag.problems.append("TLC failed: " + tlc.errors[0][:300])
        return ag
    mine = model.violated[0] if model.violated else None
    if tlc.violated != mine:
        ag.problems.append(f"TLC says {tlc.violated or 'pass'}, the model {mine or 'pass'}")
    elif mine is None and tlc.distinct_states != model.states:
        ag.problems.append(f"state counts differ: TLC {tlc.distinct_states}, model {model.states}")
    want = expectation(cfg).violations
    if want and mine not in want:
        ag.problems.append(f"expected one of {sorted(want)}, got {mine or 'pass'}")
    if not want and mine is not None:
        ag.problems.append(f"must pass, but {mine} is violated")
    return ag
