"""The configs in the spec folder: their constants, and what each must do (pass, or fail on which
invariants), from its ``Flavour``, ``Pipeline`` and ``Fence``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from leasefence.model.flavours import Flavour, expected_violations
from leasefence.model.live import live_expectation
from leasefence.paths import spec_dir
from leasefence.tlc.values import TlaParseError, parse_value

#: The folder holding the spec and the configs: ``tla/`` of the checkout, else the copy shipped
#: in the package (``leasefence/spec``).
TLA_DIR = spec_dir()
#: The model-checking module every config runs against unless a module of its own name exists.
MC_MODULE = "MCLeaseFence"
#: The module of the liveness configs (``*Live*.cfg``: tla/LeaseFenceLive.tla, issue 21).
LIVE_MODULE = "MCLeaseFenceLive"


@dataclass(frozen=True)
class Expectation:
    """What a config must do: pass, or fail on one of ``violations``."""

    config: Path
    flavour: Flavour
    violations: frozenset[str]

    @property
    def must_fail(self) -> bool:
        return bool(self.violations)

    def describe(self) -> str:
        if not self.must_fail:
            return "must pass"
        return "must fail on one of " + ", ".join(sorted(self.violations))


_CFG_KEYWORDS = frozenset(
    [
        "CONSTANT",
        "CONSTANTS",
        "INIT",
        "NEXT",
        "SPECIFICATION",
        "INVARIANT",
        "INVARIANTS",
        "PROPERTY",
        "PROPERTIES",
        "CONSTRAINT",
        "CONSTRAINTS",
        "ACTION_CONSTRAINT",
        "ACTION_CONSTRAINTS",
        "SYMMETRY",
        "VIEW",
        "ALIAS",
        "POSTCONDITION",
        "CHECK_DEADLOCK",
    ]
)
_CONST = re.compile(r"^\s*(\w+)\s*(=|<-)\s*(.+?)\s*$")


def _section_lines(cfg: Path) -> list[tuple[str, str]]:
    """Each non-empty line of a config (comments stripped) with the section keyword it is under."""
    out: list[tuple[str, str]] = []
    section = ""
    for raw in cfg.read_text().splitlines():
        line = raw.split("\\*", 1)[0].rstrip()
        if not line.strip():
            continue
        head = line.split()[0]
        if head in _CFG_KEYWORDS:
            section = head
            line = line[len(head) :]
            if not line.strip():
                continue
        out.append((section, line))
    return out


def config_constants(cfg: Path) -> dict[str, str]:
    """The ``Name = value`` and ``Name <- Def`` lines of a config's CONSTANTS, as text."""
    out: dict[str, str] = {}
    for section, line in _section_lines(cfg):
        if section in ("CONSTANT", "CONSTANTS"):
            m = _CONST.match(line)
            if m:
                out[m.group(1)] = m.group(3)
    return out


def checked_properties(cfg: Path) -> frozenset[str]:
    """The names a config checks: its INVARIANTS and PROPERTIES."""
    sections = ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES")
    return frozenset(
        name
        for section, line in _section_lines(cfg)
        if section in sections
        for name in line.split()
    )


def constant_text(cfg: Path, name: str, default: str) -> str:
    """The value text of constant ``name`` in a config: ``Name = v`` gives ``v``; ``Name <- Def``
    gives the body of ``Def`` in the config's own module or ``MCLeaseFence.tla`` (the spec's
    ``Pipeline`` and ``Fence`` are definitions a config overrides this way)."""
    text = config_constants(cfg).get(name)
    if text is None:
        return default
    mc = module_path(cfg)
    found = re.search(rf"^{re.escape(text)}\s*==\s*(.+?)$", mc.read_text(), re.MULTILINE)
    return found.group(1) if found else text


def is_live(cfg: Path) -> bool:
    """Liveness configs (``*Live*.cfg``) run against ``MCLeaseFenceLive``."""
    return "Live" in cfg.stem


def module_of(cfg: Path) -> str:
    """The module a config runs against: its own name's if one exists, else the live or the
    safety model-checking module."""
    if cfg.with_suffix(".tla").is_file():
        return cfg.stem
    return LIVE_MODULE if is_live(cfg) else MC_MODULE


def module_path(cfg: Path) -> Path:
    """The file of ``module_of(cfg)``: beside the config, else in ``tla/``."""
    name = f"{module_of(cfg)}.tla"
    return cfg.parent / name if (cfg.parent / name).is_file() else TLA_DIR / name


def specification(cfg: Path) -> str:
    """The config's SPECIFICATION (``Spec`` when it names none)."""
    names = [line.split()[0] for sec, line in _section_lines(cfg) if sec == "SPECIFICATION"]
    return names[0] if names else "Spec"


def expectation(cfg: Path) -> Expectation:
    """A config's expectation, from its ``Flavour``, ``Pipeline`` and ``Fence``: the fixed
    protocol must pass; a defect must fail on one of the invariants F314's table names
    (``EXPECTED_VIOLATIONS``); rank fencing with ``Pipeline > 1`` must fail on
    ``PIPELINE_RANK_VIOLATIONS`` (``model.flavours.expected_violations``)."""
    flavour = Flavour(str(parse_value(constant_text(cfg, "Flavour", '"fixed"'))))
    if is_live(cfg):
        return Expectation(cfg, flavour, live_expectation_of(cfg, flavour))
    pipeline = parse_value(constant_text(cfg, "Pipeline", "1"))
    fence = parse_value(constant_text(cfg, "Fence", '"rank"'))
    if not isinstance(pipeline, int) or isinstance(pipeline, bool) or not isinstance(fence, str):
        raise TlaParseError(f"Pipeline must be an integer and Fence a string in {cfg}")
    return Expectation(cfg, flavour, expected_violations(flavour, pipeline, fence))


def live_expectation_of(cfg: Path, flavour: Flavour) -> frozenset[str]:
    """A live config's expectation (``model.live.live_expectation``): from its SPECIFICATION
    (``LiveSpecUnfair``: no fairness) and its ``Starve`` and ``RecoveryHaltsAfterRollback``."""
    starve = parse_value(constant_text(cfg, "Starve", "{}"))
    halt = parse_value(constant_text(cfg, "RecoveryHaltsAfterRollback", "FALSE"))
    if not isinstance(starve, frozenset) or not isinstance(halt, bool):
        raise TlaParseError(
            f"Starve must be a set and RecoveryHaltsAfterRollback a Boolean in {cfg}"
        )
    fair = specification(cfg) != "LiveSpecUnfair"
    return live_expectation(flavour, fair, bool(starve), halt)


def is_deep(cfg: Path) -> bool:
    """Deep configs (``*Deep*.cfg``) run only when asked for (``--deep`` or by name)."""
    return "Deep" in cfg.stem


def all_configs(deep: bool = False, tla_dir: Path = TLA_DIR) -> list[Path]:
    """Every config in ``tla/``, CI first, then the must-fail ones; deep ones with ``deep``."""
    cfgs = [c for c in sorted(tla_dir.glob("*.cfg")) if deep or not is_deep(c)]
    return sorted(cfgs, key=lambda c: (not c.stem.startswith("MC"), is_deep(c), c.name))


def resolve(name: str) -> Path:
    """A config given as a path or as a name in ``tla/`` (``.cfg`` optional)."""
    for cand in (Path(name), TLA_DIR / name, TLA_DIR / f"{name}.cfg"):
        if cand.is_file() and cand.suffix == ".cfg":
            return cand.resolve()
    raise SystemExit(f"leasefence tlc: no config {name!r} (looked in . and {TLA_DIR})")
