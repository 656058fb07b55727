"""Planted bugs aimed at what the transition replay and the checker tests are for (issue 20
point 5), as data in the catalogue's ``Mutant`` format, for the lead to add to
``leasefence/harness/mutants``: persistence, token checks on every API, torn-tail handling, wire
validation, and the two checkers. ``TRANSITIONS_LAYER`` is the gate layer that runs the
generated transition tests alone; ``EXPRESSIBLE`` names the mutants the model at the quick
bounds can express (the others need generation fencing, invalid input or a checker)."""

from __future__ import annotations

from leasefence.harness.mutants import GateLayer, Mutant

TRANSITION_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "coordinator-abandon-not-saved",
        "impl/coordinator.py",
        (
            (
                '        delta = Stats(failures=1, cost=_check_amount("cost", cost))\n'
                "        return self._release(task_id, worker, delta, generation)",
                '        delta = Stats(failures=1, cost=_check_amount("cost", cost))\n'
                "        self._autosave, saved = False, self._autosave\n"
                "        try:\n"
                "            return self._release(task_id, worker, delta, generation)\n"
                "        finally:\n"
                "            self._autosave = saved",
            ),
        ),
        "persistence: a booked failure is not saved (lost on restart: L6 statistics)",
    ),
    Mutant(
        "coordinator-restart-drops-zero-stats",
        "impl/coordinator.py",
        (
            (
                "                self._stats = dict(loaded.stats)\n",
                "                self._stats = {t: s for t, s in loaded.stats.items() if s.completions}\n",
            ),
        ),
        "persistence: a restart forgets the statistics of tasks that only failed (L6)",
    ),
    Mutant(
        "coordinator-discard-ignores-generation",
        "impl/coordinator.py",
        (
            (
                "        return self._release(task_id, worker, None, generation)",
                "        held = self._leases.get(task_id)\n"
                "        return self._release(task_id, worker, None, held.generation if held else generation)",
            ),
        ),
        "token check: discard accepts any generation of the owner rank (L2, issue 12)",
    ),
    Mutant(
        "coordinator-abandon-ignores-generation",
        "impl/coordinator.py",
        (
            (
                '        delta = Stats(failures=1, cost=_check_amount("cost", cost))\n'
                "        return self._release(task_id, worker, delta, generation)",
                '        delta = Stats(failures=1, cost=_check_amount("cost", cost))\n'
                "        held = self._leases.get(task_id)\n"
                "        return self._release(task_id, worker, delta, held.generation if held else generation)",
            ),
        ),
        "token check: abandon accepts any generation of the owner rank (L2, issue 12)",
    ),
    Mutant(
        "journal-torn-tail-glued",
        "impl/journal.py",
        (('            if self._scan.unterminated:\n                data = b"\\n" + data\n', ""),),
        "torn tail: the next record is glued to an unterminated last line (a record lost)",
    ),
    Mutant(
        "journal-replay-forgets-attempts-of-ended-leases",
        "impl/journal.py",
        (
            (
                "                attempt = self._attempts.get(work_id, 0)\n",
                "                attempt = 0\n",
            ),
        ),
        "persistence: a legacy end record zeroes the attempts of its work ID on reopen",
    ),
    Mutant(
        "wire-accepts-any-work-id",
        "impl/wire.py",
        (("    if not valid_work_id(work_id):\n", "    if not isinstance(work_id, str):\n"),),
        "wire validation: a RESULT or WORK with a malformed work ID is accepted",
    ),
    Mutant(
        "tracecheck-skips-empty-reclaims",
        "conformance/tracecheck.py",
        (
            (
                "        if got_list != works:\n",
                "        if got_list and got_list != works:\n",
            ),
        ),
        "trace validation: a ReclaimExpired that reclaimed nothing is not compared",
    ),
    Mutant(
        "modelcheck-no-step-properties-on-seen-states",
        "model/check.py",
        (
            (
                "    return [name for name, step in STEP_PROPERTIES.items() if not step(s, t, b)]\n",
                "    return []\n",
            ),
        ),
        "model checker: L3/L6/L7 not checked on a transition into an already-seen state",
    ),
)

#: The generated transition tests alone (``make test``'s part of them).
TRANSITIONS_LAYER = GateLayer(
    "transitions", ("tests/conformance/test_transitions.py", "-m", "not slow")
)
#: The checkers' own tests.
CHECKERS_LAYER = GateLayer("checkers", ("tests/unit/test_checkers_bite.py",))

#: The mutants the model at the quick bounds can express (rank fencing, valid input).
EXPRESSIBLE = frozenset({"coordinator-abandon-not-saved", "coordinator-restart-drops-zero-stats"})
