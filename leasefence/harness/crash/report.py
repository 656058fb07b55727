"""The crash harness's findings: each violation with its replay, and the figures of a run."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

#: A workload's family stops at this many violations (a broken implementation would otherwise
#: report every one of thousands of crash points); the report says it stopped early.
MAX_KEPT = 20


@dataclass
class Violation:
    """One broken promise, with what to replay: ``leasefence crashcheck --replay <replay>``."""

    family: str
    workload: str
    step: int  # the step in flight (the first one not acknowledged)
    call: str
    point: str
    what: str

    @property
    def replay(self) -> str:
        return f"{self.family}:{self.workload}:{self.point}"

    def __str__(self) -> str:
        return (
            f"[{self.family}] workload {self.workload}, step {self.step} {self.call}, crash point "
            f"{self.point}: {self.what}\n    replay: leasefence crashcheck --replay {self.replay}"
        )


@dataclass
class ModelFigures:
    """The power-loss figures of one model of the first lost write (``disk.MODELS``)."""

    points: int = 0
    states: int = 0  # distinct (files, acknowledgement window) under this model
    violations: int = 0  # of those states, how many broke a promise


@dataclass
class Report:
    """Figures of a crashcheck run and every violation found."""

    seed: int
    kill_points: int = 0
    power_points: int = 0
    power_states: int = 0  # distinct (files, acknowledgement window) reopened
    acked_checked: int = 0
    lost: int = 0
    workloads: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    stopped_early: list[str] = field(default_factory=list)  # families cut short at MAX_KEPT
    seconds: float = 0.0
    models: dict[str, ModelFigures] = field(default_factory=dict)  # power loss, per model

    def model(self, name: str) -> ModelFigures:
        """The figures of model ``name``, created at first use."""
        return self.models.setdefault(name, ModelFigures())

    def power_state(
        self,
        model: str,
        key: bytes,
        seen: dict[str, set[bytes]],
        checked: dict[bytes, bool],
        check: Callable[[], bool],
    ) -> None:
        """Count one power-loss point of ``model`` whose disk (and acknowledgement window) hash
        to ``key``: a state new to the model counts as a distinct state, and ``check()`` (which
        reopens the files and returns whether a promise broke) runs once per distinct key across
        models; a broken state counts as a violation of every model that reaches it."""
        figures = self.model(model)
        figures.points += 1
        self.power_points += 1
        if key in seen[model]:
            return
        seen[model].add(key)
        figures.states += 1
        if key not in checked:
            self.power_states += 1
            checked[key] = check()
        figures.violations += checked[key]

    @property
    def points(self) -> int:
        return self.kill_points + self.power_points

    @property
    def invariant_violations(self) -> int:
        return sum("invariant" in v.what or "L1_" in v.what for v in self.violations)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["crash_points"] = self.points
        doc["invariant_violations"] = self.invariant_violations
        doc["violations"] = [{**asdict(v), "replay": v.replay} for v in self.violations]
        return doc

    def summary(self) -> str:
        per_model = "".join(
            f"  power loss, model {name}: {m.points:,} points, {m.states:,} distinct states, "
            f"{m.violations} violating\n"
            for name, m in self.models.items()
        )
        stopped = (
            f" (stopped after {MAX_KEPT} in: {', '.join(self.stopped_early)})"
            if self.stopped_early
            else ""
        )
        return (
            f"crash points tried: {self.points:,} ({self.kill_points:,} SIGKILL, "
            f"{self.power_points:,} power loss; {self.power_states:,} distinct power-loss states "
            f"reopened)\n{per_model}"
            f"acknowledged operations checked: {self.acked_checked:,}\n"
            f"acknowledged operations lost: {self.lost}\n"
            f"invariant violations: {self.invariant_violations}\n"
            f"violations: {len(self.violations)}{stopped}\n"
            f"workloads: {len(self.workloads)}; time: {self.seconds:.1f} s"
        )
