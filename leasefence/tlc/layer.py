"""The ``tlc`` layer of ``leasefence verify``: every config under TLC, then the agreement."""

from __future__ import annotations

import time
from pathlib import Path

from leasefence.report import FAIL, PASS, SKIP, Row
from leasefence.tlc.agree import agree, bounds_of_config
from leasefence.tlc.configs import TLA_DIR, all_configs, checked_properties, is_live
from leasefence.tlc.jar import tools_or_reason
from leasefence.tlc.runner import check_config


def verify_rows(deep: bool) -> list[Row]:
    """The TLC layer of ``leasefence verify``: every config judged by its expectation, then the
    spec ⇄ model agreement; one SKIP row with the reason when no TLC can be had."""
    tools = tools_or_reason()
    if isinstance(tools, str):
        return [
            Row(
                "tlc",
                "TLC configs and agreement",
                f"TLC unavailable: {tools}"[:80],
                SKIP,
                0.0,
                tools,
            )
        ]
    jar = "" if tools.jar.verified else " (unverified jar)"
    rows = []
    for cfg in all_configs(deep=deep):
        v = check_config(cfg, tools)
        r = v.result
        what = f"violated {r.violated}" if r.violated else "no violation"
        figures = f"{what}; {r.distinct_states or 0:,} states, depth {r.depth}{jar}"
        detail = "\n".join(r.errors) or v.summary()
        ok = v.ok
        if is_live(cfg):  # the Python checker must give the same verdict (tlc agree)
            mine = live_verdict(cfg)
            ok = ok and mine == r.violated
            figures += f"; model: {mine or 'no violation'}"
        rows.append(Row("tlc", cfg.name, figures, PASS if ok else FAIL, r.seconds, detail))
    # Deep: the agreement for the deep constants and for every must-fail config's constants
    # too (the defect and twin switches are code paths of their own in both the spec and the
    # model), once per distinct set of constants.
    cfgs = [TLA_DIR / "MCLeaseFence.cfg"]
    if deep:
        seen = {bounds_of_config(cfgs[0])}
        for cfg in [TLA_DIR / "MCLeaseFenceDeep.cfg", *sorted(TLA_DIR.glob("Buggy*.cfg"))]:
            if not is_live(cfg) and bounds_of_config(cfg) not in seen:
                seen.add(bounds_of_config(cfg))
                cfgs.append(cfg)
    for cfg in cfgs:
        t = time.perf_counter()
        ag = agree(bounds_of_config(cfg), tools)
        figures = (
            f"{len(ag.tlc.states):,} states, {len(ag.tlc.edges):,} transitions on both sides"
            if ag.ok
            else ag.problems[0][:80]
        )
        rows.append(
            Row(
                "tlc",
                f"spec ⇄ model agreement ({cfg.name})",
                figures,
                PASS if ag.ok else FAIL,
                time.perf_counter() - t,
                "\n".join(ag.report()),
            )
        )
    return rows


def live_verdict(cfg: Path) -> str | None:
    """The property the Python live checker finds violated under a live config, or None."""
    from leasefence.model.livecheck import check_live
    from leasefence.tlc.liveagree import live_bounds_of_config

    r = check_live(live_bounds_of_config(cfg), checked_properties(cfg))
    return r.violated[0] if r.violated else None
