"""The catalogue of planted bugs (mutants) of ``impl/``, as data: each names the file, the exact
text it replaces and what it breaks; ``gate`` applies them to a copy of the sources.

A catalogue entry whose text no longer occurs exactly once in its file is an error, not a silent
pass (``gate.StaleMutant``): the catalogue must follow the code.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mutant:
    """One planted bug: in ``path``, each ``(old, new)`` of ``patches``; it breaks ``breaks``."""

    name: str
    path: str
    patches: tuple[tuple[str, str], ...]
    breaks: str
    f314_defect: int | None = None


J, C, M, R = "impl/journal.py", "impl/coordinator.py", "impl/master.py", "impl/rules.py"
REC = "impl/records.py"  # the journal's record format

#: The catalogue. F314's four defects first; each entry names what it breaks.
CATALOGUE: tuple[Mutant, ...] = (
    Mutant(
        "f314-1-duplicate-owner",
        J,
        (
            (
                "if work_id in self._completed or work_id in self._leases:\n            return False",
                "if work_id in self._completed:\n            return False",
            ),
        ),
        "L1/L3: a second worker's lease of active work is granted and overwrites the owner",
        f314_defect=1,
    ),
    Mutant(
        "f314-2-state-lease-overwrite",
        C,
        (
            (
                "        if held is not None and held.epoch == self._epoch:\n            return False\n",
                "",
            ),
        ),
        "L1: a second worker takes an active state task",
        f314_defect=2,
    ),
    Mutant(
        "f314-3-monotonic-time-persisted",
        J,
        (
            (
                "now = self._now()\n        attempt = self._attempts.get(work_id, 0) + 1",
                "now = time.monotonic()\n        attempt = self._attempts.get(work_id, 0) + 1",
            ),
            (
                '            "clock": UNIX,\n            "attempt": attempt,\n',
                '            "attempt": attempt,\n',
            ),
            (
                "self._leases[work_id] = LeaseRecord(worker, now, UNIX, generation)",
                "self._leases[work_id] = LeaseRecord(worker, now, None, generation)",
            ),
        ),
        "L4: leases stamped with monotonic time and no clock tag",
        f314_defect=3,
    ),
    Mutant(
        "f314-4-reported-id-wins",
        R,
        (
            (
                "return active if active is not None else reported",
                "return reported if reported is not None else active",
            ),
        ),
        "L7: the worker-reported state ID overrides the master's stored one",
        f314_defect=4,
    ),
    Mutant(
        "journal-complete-unfenced",
        J,
        (
            (
                "if worker is not None and (held is None or not _owns(held, worker, generation)):\n            return False",
                "if False:\n            return False",
            ),
        ),
        "L2: a late completion by a former owner completes the current owner's lease",
    ),
    Mutant(
        "rollback-deletes-other-owner",
        J,
        (
            (
                "if held is None or (worker is not None and not _owns(held, worker, generation)):",
                "if held is None:",
            ),
        ),
        "L2: abandon by another worker deletes the current owner's record",
    ),
    Mutant(
        "state-release-unfenced",
        C,
        (
            (
                "            or lease.owner != worker\n            or lease.generation != generation\n",
                "",
            ),
        ),
        "L2: complete/abandon/discard of a state task by a worker that does not own it",
    ),
    Mutant(
        "compaction-relabels-clock",
        J,
        (
            (
                'if held.clock is not None:\n                    body["clock"] = held.clock',
                'body["clock"] = UNIX',
            ),
        ),
        "L5: compaction relabels a legacy monotonic value as Unix time",
    ),
    Mutant(
        "recovery-ignores-legacy",
        R,
        (("    if clock != UNIX:\n        return True\n", ""),),
        "L5: a legacy record is reclaimed only by the Unix rule, so a future one stays stuck",
    ),
    Mutant(
        "no-future-dated-rule",
        R,
        (("    if updated - now > ttl:\n        return True\n", ""),),
        "NoStuckLease: a lease dated in the future after a rollback is never reclaimed",
    ),
    Mutant(
        "reject-dispatch-wrong-order",
        M,
        (("undone = tuple(reversed(taken))", "undone = tuple(taken)"),),
        "F313: RejectDispatch undoes the steps taken in reverse order",
    ),
    Mutant(
        "reject-dispatch-forgets-work-lease",
        M,
        (
            (
                '            if step == "lease_work":\n                self.journal.abandon(item.work_id, worker=rank, **_kw(generation))',
                '            if step == "lease_work":\n                pass',
            ),
        ),
        "L3/L1: a rejected dispatch leaves its work lease held",
    ),
    Mutant(
        "completion-without-source-rank",
        M,
        (
            (
                "self.journal.complete(work_id, rank, gen)",
                "self.journal.complete(work_id, None, gen)",
            ),
        ),
        "L2: completion is not fenced by the MPI source rank",
    ),
    Mutant(
        "stale-result-accepted",
        M,
        (("disp is None and len(mine) >= self.pipeline", "False"),),
        "L7/L2: a result for another work than the rank's dispatch is settled, not refused",
    ),
    Mutant(
        "snapshot-keeps-ownership",
        C,
        (
            (
                "owner=x.owner, updated=0.0, epoch=x.epoch, generation=x.generation",
                "owner=x.owner, updated=x.updated, epoch=loaded.epoch + 1, generation=x.generation",
            ),
        ),
        "L6: after a restart old ranks keep ownership of state tasks",
    ),
    Mutant(
        "torn-tail-read-as-corruption",
        REC,
        (
            (
                "    scan.good_end = scan.bad[0].offset if scan.bad else len(data)",
                "    scan.corrupt = bool(scan.bad)\n    scan.good_end = scan.bad[0].offset if scan.bad else len(data)",
            ),
        ),
        "durability: a crash mid-append makes the journal unopenable",
    ),
    Mutant(
        "corruption-read-as-torn-tail",
        REC,
        (
            (
                "            if scan.bad:\n                scan.corrupt = True",
                "            if scan.bad:\n                scan.corrupt = False",
            ),
        ),
        "durability: a corrupt middle record silently drops every record after it",
    ),
    Mutant(
        "ack-before-fsync",
        J,
        (
            (
                "            _write_all(self._fd, data)\n            os.fsync(self._fd)",
                "            _write_all(self._fd, data)",
            ),
        ),
        "durability: a call is acknowledged before its record is fsynced",
    ),
    # Issue 12: pipelined dispatch is safe only with the whole owner token (rank, generation).
    Mutant(
        "journal-fence-ignores-generation",
        REC,
        (
            (
                "return held.owner == worker and held.generation == generation",
                "return held.owner == worker",
            ),
        ),
        "L2 at depth 2: a result of an older generation completes the rank's newer work lease",
    ),
    Mutant(
        "state-fence-ignores-generation",
        C,
        (
            (
                "            or lease.owner != worker\n            or lease.generation != generation\n",
                "            or lease.owner != worker\n",
            ),
        ),
        "L2 at depth 2: a forgotten dispatch's result commits the state task of a newer one",
    ),
    Mutant(
        "result-found-by-work-id",
        M,
        (("        if presented is not None:", "        if False:"),),
        "L2 at depth 2: a late result is matched to the rank's newer dispatch of the same work",
    ),
    Mutant(
        "generation-without-epoch",
        M,
        (
            (
                "return (self._epoch(), self._generations.get(rank, 0) + 1)",
                "return (1, self._generations.get(rank, 0) + 1)",
            ),
        ),
        "L2 at depth 2: after a restart a token repeats, so a result from before it matches",
    ),
    Mutant(
        "dispatch-starves-last-item",
        M,
        (
            (
                "pending = [w for w in self.unfinished() if w not in busy]",
                "pending = [w for w in self.unfinished() if w not in busy][:-1]",
            ),
            (
                "        while i:\n            i -= 1\n            w = queue[i]",
                "        while i > 1:\n            i -= 1\n            w = queue[i]",
            ),
        ),
        "EveryItemSettled: the master never offers the last pending item (an off-by-one, in the"
        " candidate-policy path and in the default path's lazy queue)",
    ),
    # Issue 19 point 5: the bulk reader's checksums, built once for records and their batches.
    Mutant(
        "bulk-batch-records-unchecked",
        REC,
        (
            (
                "    if not _checksums_match(computed, crcs):\n        return False",
                "    if batches is None and not _checksums_match(computed, crcs):\n"
                "        return False",
            ),
        ),
        "replay: a batch line whose own checksum is right is taken with a record's wrong",
    ),
    Mutant(
        "bulk-crc-opening-misspelled",
        REC,
        ((""""attempt":%s,"clock":"unix",' % a""", """"attempt":%s,"clock":"unix"' % a"""),),
        "replay: no record's checksum matches, so the bulk reader takes nothing (not wrong, slow)",
    ),
    Mutant(
        "bulk-generation-not-checksummed",
        REC,
        (
            (
                "        generations,\n        ',\"updated\":',",
                '        "",\n        \',"updated":\',',
            ),
        ),
        "replay: a generation its record's checksum leaves out is taken",
    ),
    Mutant(
        "bulk-generation-swapped",
        REC,
        (("    return int(epoch), int(counter)", "    return int(counter), int(epoch)"),),
        "replay: a lease read in bulk gets its generation's counter as its epoch",
    ),
    Mutant(
        "journal-stamps-unrounded",
        J,
        (("        return unix_stamp(reading)\n", "        return reading\n"),),
        "replay: new records carry time.time()'s 17 digits, read back with float and repr",
    ),
    # Planted by hand (2026-12-03) in the code changed on 2026-12-02/03: the suite missed them.
    Mutant(
        "coordinator-undo-keeps-record",
        C,
        (("        del coordinator._pending[self._logged :]\n", ""),),
        "persistence: a change undone after an interrupted save leaves its record pending, and"
        " the next commit writes a lease memory never held",
    ),
    Mutant(
        "coordinator-save-keeps-pending",
        C,
        (
            (
                "        self._pending.clear()\n        self._good_end = len(data)",
                "        self._good_end = len(data)",
            ),
        ),
        "durability: the commit after a checkpoint appends the folded records again; a free of a"
        " task the checkpoint already freed makes that batch bad, and its acknowledged changes"
        " are lost on reopen",
    ),
    Mutant(
        "master-reward-and-cost-swapped",
        M,
        (
            (
                "task, rank, reward=1.0, cost=result.cpu_s, generation=gen\n",
                "task, rank, reward=result.cpu_s, cost=1.0, generation=gen\n",
            ),
            (
                "task, rank, reward=1.0, cost=result.cpu_s, **_kw(gen)\n",
                "task, rank, reward=result.cpu_s, cost=1.0, **_kw(gen)\n",
            ),
        ),
        "statistics: a completion books its CPU time as reward and 1.0 as cost",
    ),
    Mutant(
        "master-requeue-unreversed",
        M,
        (
            (
                "self._queue, self._dirty = list(reversed(self.catalogue)), True",
                "self._queue, self._dirty = list(self.catalogue), True",
            ),
        ),
        "scheduling: after a stale completion cache the queue is rebuilt head first, so work is"
        " offered in reverse catalogue order",
    ),
)


#: Issue 20: mutants aimed at persistence, the token checks of every coordinator API, torn-tail
#: handling, wire validation and the two checkers (model checker, trace validation).
TRANSITION_MUTANTS: tuple[Mutant, ...] = (
    Mutant(
        "coordinator-abandon-not-saved",
        "impl/coordinator.py",
        (
            (
                '        booked = (0, 1, 0.0, _check_amount("cost", cost))\n'
                "        return self._release(task_id, worker, booked, generation)",
                '        booked = (0, 1, 0.0, _check_amount("cost", cost))\n'
                "        self._autosave, saved = False, self._autosave\n"
                "        try:\n"
                "            return self._release(task_id, worker, booked, generation)\n"
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
                '        booked = (0, 1, 0.0, _check_amount("cost", cost))\n'
                "        return self._release(task_id, worker, booked, generation)",
                '        booked = (0, 1, 0.0, _check_amount("cost", cost))\n'
                "        held = self._leases.get(task_id)\n"
                "        return self._release(task_id, worker, booked, held.generation if held else generation)",
            ),
        ),
        "token check: abandon accepts any generation of the owner rank (L2, issue 12)",
    ),
    Mutant(
        "journal-torn-tail-glued",
        "impl/journal.py",
        (
            (
                "            if self._scan.unterminated:\n"
                '                _write_all(self._fd, b"\\n")\n'
                "                os.fsync(self._fd)\n"
                "                self._scan.unterminated = False\n",
                "",
            ),
        ),
        "torn tail: the next record is glued to an unterminated last line (a record lost)",
    ),
    Mutant(
        "journal-replay-forgets-attempts-of-ended-leases",
        "impl/journal.py",
        (
            (
                "                    attempt = attempts.get(work_id, 0)\n",
                "                    attempt = 0\n",
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
                "    if got != works:\n",
                "    if got and got != works:\n",
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

#: The mutants the model at the quick bounds can express (rank fencing, valid input).
EXPRESSIBLE = frozenset({"coordinator-abandon-not-saved", "coordinator-restart-drops-zero-stats"})

#: Every mutant ``verify --mutants`` runs.
CATALOGUE = (*CATALOGUE, *TRANSITION_MUTANTS)

#: The mutants of impl/ the generated transition tests cannot catch, each with why: the model
#: has no step that tells them from the correct implementation (every other mutant of impl/ is
#: caught by the transitions layer alone, ``tests/quality/test_transition_mutants.py``).
BEYOND_THE_MODEL = {
    "ack-before-fsync": "the model has no power loss: a crash kills the master, and the "
    "operating system keeps what was written, synced or not; the crash layer's simulated "
    "power cuts (tests/unit/test_crashcheck.py) catch it",
    "coordinator-undo-keeps-record": "the model has no save that fails and leaves the process "
    "running: a change is saved or the run dies with it; the unit layer interrupts an append "
    "(tests/unit/test_coordinator.py)",
    "master-reward-and-cost-swapped": "the transitions' results take 1.0 s of CPU, so reward and "
    "cost are both 1.0 and the swap changes no statistic there; the unit layer books another CPU "
    "time (tests/unit/test_master.py)",
    "master-requeue-unreversed": "the model has no completion cache: the queue is rebuilt only "
    "from a stale cache, which no model step makes; the unit layer plants one "
    "(tests/unit/test_master.py)",
}

#: The F314 defects, which ``make test`` gates on (tests/quality).
F314_MUTANTS = tuple(m for m in CATALOGUE if m.f314_defect is not None)
