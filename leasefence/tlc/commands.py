"""What ``leasefence tlc`` does: run configs and print their verdicts, or the spec ⇄ model
agreement, with the command's exit statuses."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from leasefence.tlc.configs import all_configs, is_live, resolve
from leasefence.tlc.jar import tools_or_reason
from leasefence.tlc.runner import Verdict, check_config

EXIT_OK, EXIT_UNEXPECTED, EXIT_USAGE = 0, 1, 2
#: Exit status of ``leasefence tlc`` when no TLC (jar or java) can be had.
EXIT_NO_TLC = 3


def run(names: list[str], deep: bool, workers: int | str, json_path: Path | None) -> int:
    """``leasefence tlc [CONFIG...]`` or ``leasefence tlc agree [CONFIG]``."""
    if names[:1] == ["agree"]:
        if len(names) > 2:
            print("leasefence tlc agree takes at most one CONFIG", file=sys.stderr)
            return EXIT_USAGE
        if len(names) == 2:
            cfg = resolve(names[1])
            if is_live(cfg):
                return run_live_agree([cfg], workers, json_path)
            return run_agree(cfg, workers, json_path)
        # Everything: the state graphs of the CI constants, and every live config's verdict.
        status = run_agree(resolve("MCLeaseFence.cfg"), workers, json_path)
        if status == EXIT_NO_TLC:
            return status
        from leasefence.tlc.liveagree import live_configs

        live = run_live_agree(live_configs(), workers, None)
        return max(status, live)
    try:
        cfgs = [resolve(c) for c in names] or all_configs(deep=deep)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    return run_configs(cfgs, workers, json_path)


def run_configs(cfgs: list[Path], workers: int | str, json_path: Path | None) -> int:
    """Run each config, print its verdict (and counterexample), and a one-line tally."""
    tools = tools_or_reason()
    if isinstance(tools, str):
        print(f"leasefence tlc: TLC unavailable: {tools}")
        return EXIT_NO_TLC
    print(f"TLC: {tools.jar.describe()}")
    verdicts: list[Verdict] = []
    for cfg in cfgs:
        print(f"{cfg.name}: running ...", flush=True)
        v = check_config(cfg, tools, workers)
        verdicts.append(v)
        print(f"  {v.summary()}")
        for step in v.result.counterexample:
            print(f"    {step.number}. {step.action}")
        if v.result.lasso:
            print(f"    then {v.result.lasso}, for ever")
        if not v.ok and v.result.errors:
            for line in v.result.errors[:3]:
                print("    " + line.replace("\n", "\n    "))
    bad = [v for v in verdicts if not v.ok]
    print(
        f"{len(verdicts) - len(bad)} of {len(verdicts)} configs as expected"
        + (f"; UNEXPECTED: {', '.join(v.result.config for v in bad)}" if bad else "")
    )
    if json_path:
        doc = {
            "jar": str(tools.jar.path),
            "jar_sha256": tools.jar.sha256,
            "jar_verified": tools.jar.verified,
            "results": [
                {
                    "expected": sorted(v.expectation.violations) or "pass",
                    "as_expected": v.ok,
                    **v.result.to_json(),
                }
                for v in verdicts
            ],
        }
        _write_json(json_path, doc)
    return EXIT_UNEXPECTED if bad else EXIT_OK


def run_agree(cfg: Path, workers: int | str, json_path: Path | None) -> int:
    """Compare TLC's state graph with the model's for the constants of ``cfg``; print the report."""
    from leasefence.tlc.agree import agree, bounds_of_config

    tools = tools_or_reason()
    if isinstance(tools, str):
        print(f"leasefence tlc agree: TLC unavailable: {tools}")
        return EXIT_NO_TLC
    bounds = bounds_of_config(cfg)
    print(f"TLC: {tools.jar.describe()}")
    print(f"spec ⇄ model agreement for the constants of {cfg.name}: {bounds}")
    ag = agree(bounds, tools, workers)
    for line in ag.report():
        print(f"  {line}")
    if json_path:
        doc = {
            "config": cfg.name,
            "ok": ag.ok,
            "tlc_states": len(ag.tlc.states),
            "model_states": len(ag.model.states),
            "tlc_transitions": len(ag.tlc.edges),
            "model_transitions": len(ag.model.edges),
            "problems": ag.problems,
        }
        _write_json(json_path, doc)
    return EXIT_OK if ag.ok else EXIT_UNEXPECTED


def run_live_agree(cfgs: list[Path], workers: int | str, json_path: Path | None) -> int:
    """TLC and the Python checker must give the same verdict on each live config."""
    from leasefence.tlc.liveagree import live_agree

    tools = tools_or_reason()
    if isinstance(tools, str):
        print(f"leasefence tlc agree: TLC unavailable: {tools}")
        return EXIT_NO_TLC
    print(f"liveness verdicts, TLC and the Python checker, on {len(cfgs)} live config(s):")
    results = []
    for cfg in cfgs:
        ag = live_agree(cfg, tools, workers)
        results.append(ag)
        print(f"  {ag.report()}", flush=True)
    if json_path:
        doc = [
            {
                "config": ag.config.name,
                "ok": ag.ok,
                "tlc": ag.tlc.violated,
                "model": ag.model.violated[0] if ag.model.violated else None,
                "tlc_states": ag.tlc.distinct_states,
                "model_states": ag.model.states,
                "problems": ag.problems,
            }
            for ag in results
        ]
        _write_json(json_path, doc)
    return EXIT_OK if all(ag.ok for ag in results) else EXIT_UNEXPECTED


def _write_json(path: Path, doc: object) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
