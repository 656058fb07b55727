"""How often each rule and each interesting case fired, per machine, across a run.

A machine calls ``COVERAGE.hit(machine, name)`` for every rule it executes (``rule:<name>``) and
for every case worth seeing (``case:<name>``). ``REQUIRED`` lists, per machine, the cases that
must fire at least once in a run of the ``ci`` profile; ``missing`` names those that did not.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

#: The master machine's required cases (the pipelined master requires them too, but one).
_MASTER = (
    "refused duplicate work lease",
    "refused duplicate state lease",
    "refused reservation",
    "late result after reclaim and re-lease",
    "duplicated result",
    "wrong-ID result",
    "old-protocol result",
    "stale result",
    "rollback followed by recover",
)

#: Cases each machine must exercise; a run where one never fires fails (F314's open questions:
#: late and duplicated messages, duplicate candidates, clock faults, crashes, wrong IDs).
REQUIRED: dict[str, tuple[str, ...]] = {
    "journal": (
        "refused duplicate lease",
        "wrong-owner complete or abandon refused",
        "late complete after reclaim and re-lease",
        "rollback followed by recover",
        "future-dated lease reclaimed",
        "torn tail",
        "compaction with active leases",
        "legacy lease reclaimed",
        "reopen",
    ),
    "coordinator": (
        "refused duplicate state lease",
        "wrong-owner state call refused",
        "late complete after reclaim and re-lease",
        "restart into a new epoch",
        "stale lease voided",
        "stale lease replaced",
        "rollback followed by recover",
    ),
    "master": _MASTER,
    "system": (
        "legacy record at start",
        "master restart with active dispatches",
        "late result across a restart",
        "torn tail",
        "compaction",
        "refused duplicate work lease",
        "late result after reclaim and re-lease",
        "wrong-ID result",
        "rollback followed by recover",
        "reboot",
    ),
    # Issue 12: depth 2 with generation fencing. A rank holds two dispatches at once; results
    # present their generation or none (an old-protocol worker); one of an older generation,
    # delivered after its work went to the same rank again or duplicated after a re-dispatch,
    # is refused; a rank's two results arrive out of order; a restart ends two dispatches of
    # one rank and a result from before it arrives late.
    "master-pipelined": (
        "two dispatches on one rank",
        "older-generation result after re-dispatch to the same rank refused",
        "duplicated result across generations refused",
        "result reordered on one rank",
        "result without a generation",
        # and the master machine's, except a stale result: at depth 2 that needs both of a
        # rank's slots held by other work, which the pipelined rules do not steer towards.
        *(case for case in _MASTER if case != "stale result"),
    ),
    "system-pipelined": (
        "two dispatches on one rank",
        "master restart with two dispatches on one rank",
        "late result across a restart with two dispatches on its rank",
        "late result across a restart",
        "result without a generation",
        "legacy record at start",
        "torn tail",
        "compaction",
        "rollback followed by recover",
        "reboot",
    ),
}


class Coverage:
    """Counters of rules and cases, per machine."""

    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}
        self.runs: Counter[str] = Counter()

    def reset(self, machine: str) -> None:
        self.counts[machine] = Counter()
        self.runs[machine] = 0

    def hit(self, machine: str, name: str) -> None:
        self.counts.setdefault(machine, Counter())[name] += 1

    def rule(self, machine: str, name: str) -> None:
        self.hit(machine, f"rule:{name}")

    def case(self, machine: str, name: str) -> None:
        self.hit(machine, f"case:{name}")

    def steps(self, machine: str) -> int:
        """Rules executed by ``machine`` (each step of each example, shrinking included)."""
        return sum(
            n for k, n in self.counts.get(machine, Counter()).items() if k.startswith("rule:")
        )

    def missing(self, machine: str) -> list[str]:
        """The required cases of ``machine`` that never fired."""
        got = self.counts.get(machine, Counter())
        return [c for c in REQUIRED.get(machine, ()) if not got[f"case:{c}"]]

    def covered(self, machine: str) -> tuple[int, int]:
        """(required cases that fired, required cases)."""
        required = REQUIRED.get(machine, ())
        return len(required) - len(self.missing(machine)), len(required)

    def report(self, machine: str) -> str:
        """The counts of one machine as text: rules first, then cases, required ones marked."""
        got = self.counts.get(machine, Counter())
        done, total = self.covered(machine)
        lines = [
            f"{machine} machine: {self.runs[machine]} examples, {self.steps(machine)} steps, "
            f"{done}/{total} required cases covered"
        ]
        for key in sorted(got, key=lambda k: (not k.startswith("rule:"), k)):
            kind, name = key.split(":", 1)
            mark = " (required)" if kind == "case" and name in REQUIRED.get(machine, ()) else ""
            lines.append(f"  {kind:4} {name:45} {got[key]:7}{mark}")
        for name in self.missing(machine):
            lines.append(f"  case {name:45} {0:7} (required) NEVER FIRED")
        return "\n".join(lines)

    def as_json(self) -> dict[str, object]:
        return {
            m: {
                "examples": self.runs[m],
                "steps": self.steps(m),
                "covered": list(self.covered(m)),
                "missing": self.missing(m),
                "counts": dict(sorted(c.items())),
            }
            for m, c in self.counts.items()
        }

    def write(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.as_json(), indent=1) + "\n")


#: The one registry of a process (pytest's conftest prints and saves it at the end).
COVERAGE = Coverage()
