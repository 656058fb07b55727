"""``leasefence tlc``: run TLC on the spec's configs, and check that spec and model agree."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from leasefence.tlc.layer import tools_or_reason
from leasefence.tlc.runner import EXIT_NO_TLC, TLA_DIR, Verdict, all_configs, check_config

EXIT_OK, EXIT_UNEXPECTED, EXIT_USAGE = 0, 1, 2


def configure(p: argparse.ArgumentParser) -> None:
    """Arguments of `leasefence tlc` (the parser is made by ``leasefence.cli``)."""
    p.description = (
        "leasefence tlc [CONFIG...]: run TLC on each config (a path, or a name in tla/ with "
        "or without .cfg; no argument: every config but the deep ones) and judge it by its "
        "Flavour constant: the fixed protocol must pass, a defect must fail on one of the "
        "invariants F314's table names. "
        "leasefence tlc agree [CONFIG]: for the constants of CONFIG (default "
        "MCLeaseFence.cfg), compare the state graph TLC explores with the model's. "
        "The jar comes from $TLA2TOOLS_JAR, the user's cache (~/.cache/leasefence or "
        f"$XDG_CACHE_HOME/leasefence), or the pinned release (downloaded, SHA-256 checked). "
        f"Exit status: 0 as expected, 1 on any unexpected result, 2 on bad usage, "
        f"{EXIT_NO_TLC} when no TLC (jar or java) can be had."
    )
    p.add_argument(
        "configs",
        nargs="*",
        metavar="CONFIG",
        help="configs to run, or `agree [CONFIG]` (default: every non-deep config in tla/)",
    )
    p.add_argument("--deep", action="store_true", help="include the deep configs (*Deep*.cfg)")
    p.add_argument(
        "--workers", default="1", help="TLC worker threads, a number or `auto` (default 1)"
    )
    p.add_argument("--json", type=Path, metavar="PATH", help="write every result as JSON")
    p.set_defaults(func=run)


def resolve(name: str) -> Path:
    """A config given as a path or as a name in ``tla/`` (``.cfg`` optional)."""
    for cand in (Path(name), TLA_DIR / name, TLA_DIR / f"{name}.cfg"):
        if cand.is_file() and cand.suffix == ".cfg":
            return cand.resolve()
    raise SystemExit(f"leasefence tlc: no config {name!r} (looked in . and {TLA_DIR})")


def run(args: argparse.Namespace) -> int:
    if args.configs[:1] == ["agree"]:
        if len(args.configs) > 2:
            print("leasefence tlc agree takes at most one CONFIG", file=sys.stderr)
            return EXIT_USAGE
        cfg = resolve(args.configs[1] if len(args.configs) == 2 else "MCLeaseFence.cfg")
        return run_agree(cfg, args)
    try:
        cfgs = [resolve(c) for c in args.configs] or all_configs(deep=args.deep)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    tools = tools_or_reason()
    if isinstance(tools, str):
        print(f"leasefence tlc: TLC unavailable: {tools}")
        return EXIT_NO_TLC
    print(f"TLC: {tools.jar.describe()}")
    verdicts: list[Verdict] = []
    for cfg in cfgs:
        print(f"{cfg.name}: running ...", flush=True)
        v = check_config(cfg, tools, args.workers)
        verdicts.append(v)
        print(f"  {v.summary()}")
        for step in v.result.counterexample:
            print(f"    {step.number}. {step.action}")
        if not v.ok and v.result.errors:
            for line in v.result.errors[:3]:
                print("    " + line.replace("\n", "\n    "))
    bad = [v for v in verdicts if not v.ok]
    print(
        f"{len(verdicts) - len(bad)} of {len(verdicts)} configs as expected"
        + (f"; UNEXPECTED: {', '.join(v.result.config for v in bad)}" if bad else "")
    )
    if args.json:
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
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return EXIT_UNEXPECTED if bad else EXIT_OK


def run_agree(cfg: Path, args: argparse.Namespace) -> int:
    from leasefence.tlc.agree import agree, bounds_of_config

    tools = tools_or_reason()
    if isinstance(tools, str):
        print(f"leasefence tlc agree: TLC unavailable: {tools}")
        return EXIT_NO_TLC
    bounds = bounds_of_config(cfg)
    print(f"TLC: {tools.jar.describe()}")
    print(f"spec ⇄ model agreement for the constants of {cfg.name}: {bounds}")
    ag = agree(bounds, tools, args.workers)
    for line in ag.report():
        print(f"  {line}")
    if args.json:
        doc = {
            "config": cfg.name,
            "ok": ag.ok,
            "tlc_states": len(ag.tlc.states),
            "model_states": len(ag.model.states),
            "tlc_transitions": len(ag.tlc.edges),
            "model_transitions": len(ag.model.edges),
            "problems": ag.problems,
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return EXIT_OK if ag.ok else EXIT_UNEXPECTED
