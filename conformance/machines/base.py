"""What every conformance machine shares: the step protocol, the clock rules and the invariants."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from leasefence.conformance import strategies as gen
from leasefence.conformance.actions import ACTIONS, snake
from leasefence.conformance.coverage import COVERAGE
from leasefence.conformance.refinement import Environment, TickClock
from leasefence.model import invariants as inv
from leasefence.model import system as sy
from leasefence.model.check import changes
from leasefence.model.rules import CLOCK_UNIX
from leasefence.model.state import State
from leasefence.model.system import Bounds

#: Where a failing step saves the steps that led to it as a scenario file (unset: nowhere).
SAVE_ENV = "LEASEFENCE_SAVE_SCENARIOS"

#: The scenario action (the TLA+ name, ``conformance.scenarios``) of each step a machine logs
#: under its snake_case name: the system actions of the table, and the fault ``TornTail``.
SCENARIO_ACTIONS = {snake(a.name): a.name for a in ACTIONS if a.kind == "system"} | {
    "torn_tail": "TornTail"
}


class ConformanceFailure(AssertionError):
    """The implementation and the model disagree, or one of them breaks an invariant."""


class ConformanceMachine(RuleBasedStateMachine):
    """What every machine shares: the clock rules, the step protocol and the invariants."""

    NAME: ClassVar[str] = "base"
    BOUNDS: ClassVar[Bounds] = gen.JOURNAL_BOUNDS
    #: The invariants that say something about this machine's part of the state. L1, L2 and L6
    #: are stated over the master's active dispatches, so only the master and system machines
    #: check them; the container machines check L1/L2/L3 through return values and file bytes.
    CHECKED: ClassVar[frozenset[str]] = frozenset(inv.STATE_INVARIANTS)
    #: Where each example's files go (None: the system's temporary directory).
    WORKDIR: ClassVar[str | None] = None

    def __init__(self, start: int = gen.START) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix=f"leasefence-{self.NAME}-", dir=self.WORKDIR))
        self.start = start
        self.clock = TickClock(start)
        self.env = Environment(wall=start, mono=start)
        self.m: State = sy.initial_state()._replace(wall=start, mono=start)
        self.opened = False
        self.rolled_back = False
        self.log: list[dict[str, Any]] = []
        self.last: object = None
        #: The implementation's mapped state as the last ``compare`` found it equal to the
        #: model's (nothing changes the implementation between steps): the next step's "before"
        #: and the invariants reuse it instead of mapping the same objects again.
        self.mapped: State | None = None
        COVERAGE.runs[self.NAME] += 1

    # -- to be provided by each machine ---------------------------------------------------

    def impl_state(self) -> State:
        """The implementation's state through the refinement mapping."""
        raise NotImplementedError

    def close_impl(self) -> None:
        """Release files and locks (end of an example)."""

    # -- the step protocol ----------------------------------------------------------------

    def environment(self) -> Environment:
        """The impl side's environment: its own clock reading and the machine's network."""
        return Environment(
            wall=self.clock.now,
            mono=self.env.mono,
            net=self.env.net,
            gnet=self.env.gnet,
            dups=self.env.dups,
            reboots=self.env.reboots,
            rollbacks=self.env.rollbacks,
        )

    def case(self, name: str) -> None:
        COVERAGE.case(self.NAME, name)

    def step(
        self,
        action: str,
        args: tuple[object, ...],
        model: Callable[[], object],
        impl: Callable[[], object],
    ) -> object:
        """Apply one action to both sides and compare everything (see the module doc)."""
        COVERAGE.rule(self.NAME, action)
        self.log.append({"action": action, "args": list(args)})
        try:
            before_m, before_i = self.m, self.mapped_now()
            self.mapped = None
            want = model()
            got = impl()
            if got != want:
                raise ConformanceFailure(
                    f"{action}{args}: the implementation returned {got!r}, the model {want!r}"
                )
            self.compare(action, args)
            after_i = self.mapped_now()
            for name, prop in inv.STEP_PROPERTIES.items():
                if name in inv.SYSTEM_STEP_PROPERTIES:
                    continue  # stated over whole system steps, not one container's call
                if not prop(before_m, self.m, self.BOUNDS):
                    raise ConformanceFailure(f"{action}{args}: the model breaks {name}")
                if not prop(before_i, after_i, self.BOUNDS):
                    raise ConformanceFailure(f"{action}{args}: the implementation breaks {name}")
        except AssertionError:
            self.save_scenario()
            raise
        self.last = got
        return got

    def mapped_now(self) -> State:
        """The implementation's state through the refinement mapping (the last comparison's
        when no step has begun since)."""
        return self.mapped if self.mapped is not None else self.impl_state()

    def compare(self, action: str, args: tuple[object, ...]) -> None:
        """The refinement check: the mapped implementation state equals the model's."""
        self.mapped = None
        got = self.impl_state()
        if got != self.m:
            diff = "\n  ".join(changes(self.m, got)) or "(no leaf differs)"
            raise ConformanceFailure(
                f"after {action}{args} the implementation's state differs from the model's "
                f"(model -> implementation):\n  {diff}\nmodel: {self.m!r}"
            )
        self.mapped = got

    def save_scenario(self) -> None:
        """Save the steps so far, the failing one last, as a scenario file (``SAVE_ENV``); one of
        a system machine replays with ``conformance.scenarios.replay``."""
        directory = os.environ.get(SAVE_ENV)
        if not directory:
            return
        opened = [e["args"][0] if e["args"] else None for e in self.log if e["action"] == "open"]
        doc = {
            "machine": self.NAME,
            "origin": "a failing Hypothesis example",
            "start": self.start,
            "legacy": opened[0] if opened else None,
            "steps": [
                {"action": SCENARIO_ACTIONS.get(e["action"], e["action"]), "args": e["args"]}
                for e in self.log
                if e["action"] != "open"
            ],
        }
        path = Path(directory) / f"{self.NAME}-failure.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc, indent=1) + "\n")

    def teardown(self) -> None:
        try:
            self.close_impl()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- clock faults (model only: the implementation reads the clock, nothing else) ---------

    def do_tick(self, seconds: int) -> None:
        """Tick, ``seconds`` times: the wall and the monotonic clock move forward together."""

        def model() -> None:
            self.m = self.m._replace(wall=self.m.wall + seconds, mono=self.m.mono + seconds)

        def impl() -> None:
            self.clock.now += seconds
            self.env.mono += seconds

        self.step("tick", (seconds,), model, impl)

    def do_rollback_clock(self, to: int) -> None:
        """RollbackClock(to): the wall clock is stepped back; monotonic time is not."""
        assert 0 <= to < self.m.wall, "RollbackClock needs a target before the current wall time"
        self.rolled_back = True
        self.case("rollback")

        def model() -> None:
            self.m = self.m._replace(wall=to, rollbacks=self.m.rollbacks + 1)

        def impl() -> None:
            self.clock.now = to
            self.env.rollbacks += 1

        self.step("rollback_clock", (to,), model, impl)

    def do_reboot(self) -> None:
        """Reboot: the monotonic clock restarts from 0; Unix time and the files are unaffected."""
        self.case("reboot")

        def model() -> None:
            self.m = self.m._replace(mono=0, reboots=self.m.reboots + 1)

        def impl() -> None:
            self.env.mono = 0
            self.env.reboots += 1

        self.step("reboot", (), model, impl)

    @rule(seconds=gen.advances)
    def tick(self, seconds: int) -> None:
        self.do_tick(seconds)

    @precondition(lambda self: self.m.wall > 0)
    @rule(back=gen.rollbacks)
    def rollback_clock(self, back: int) -> None:
        self.do_rollback_clock(max(0, self.m.wall - back))

    @rule()
    def reboot(self) -> None:
        self.do_reboot()

    def recovering(self) -> None:
        """Book a recovery: after a rollback it is the case F314's clock rule is about."""
        if self.rolled_back:
            self.case("rollback followed by recover")
            self.rolled_back = False

    def future_dated(self, leases: Iterable[tuple[str, Any]], gone: tuple[str, ...]) -> None:
        ttl = self.BOUNDS.ttl
        for w, x in leases:
            unix = getattr(x, "clock", CLOCK_UNIX) == CLOCK_UNIX
            current = getattr(x, "epoch", 0) in (0, self.m.coordinator.epoch)
            if w in gone and unix and current and x.updated - self.m.wall > ttl:
                self.case("future-dated lease reclaimed")

    # -- the invariants, on both sides ----------------------------------------------------

    def holds(self, name: str, check: Callable[[State, Bounds], bool]) -> None:
        if not self.opened or name not in self.CHECKED:
            return
        if not check(self.m, self.BOUNDS):
            raise ConformanceFailure(f"the model breaks {name} in {self.m!r}")
        mapped = self.impl_state()
        if not check(mapped, self.BOUNDS):
            raise ConformanceFailure(f"the implementation breaks {name} in {mapped!r}")

    # Every variable holds a value of its type and range.
    @invariant()
    def type_ok(self) -> None:
        self.holds("TypeOK", inv.type_ok)

    # L1: A local work/state ID has at most one active worker at any moment.
    @invariant()
    def l1_single_owner(self) -> None:
        self.holds("L1_SingleOwner", inv.l1_single_owner)

    # L2: complete, abandon and discard change state only when the worker is the current owner.
    @invariant()
    def l2_owner_fenced(self) -> None:
        self.holds("L2_OwnerFenced", inv.l2_owner_fenced)

    # L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
    @invariant()
    def l5_legacy_migratable(self) -> None:
        self.holds("L5_LegacyMigratable", inv.l5_legacy_migratable)

    # L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
    @invariant()
    def l6_no_inherited_ownership(self) -> None:
        self.holds("L6_NoInheritedOwnership", inv.l6_no_inherited_ownership)

    # Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
    @invariant()
    def no_stuck_lease(self) -> None:
        self.holds("NoStuckLease", inv.no_stuck_lease)

    # Beyond F314: per task, the coordinator never books more completions than the journal holds completed work IDs of it.
    @invariant()
    def completions_accounted(self) -> None:
        self.holds("CompletionsAccounted", inv.completions_accounted)

    def check_invariants_now(self) -> None:
        """Every invariant once (scenario and transition replay, which run without Hypothesis),
        on the model and on the implementation mapped once: the same checks as the
        ``@invariant()``s above."""
        if not self.opened:
            return
        checks = [(n, c) for n, c in inv.STATE_INVARIANTS.items() if n in self.CHECKED]
        mapped = self.mapped_now()
        for side, state in (("model", self.m), ("implementation", mapped)):
            for name, check in checks:
                if not check(state, self.BOUNDS):
                    raise ConformanceFailure(f"the {side} breaks {name} in {state!r}")


def file_bytes(path: Path) -> bytes:
    """The bytes of ``path``; nothing if it does not exist."""
    return path.read_bytes() if path.exists() else b""
