"""The one table of the protocol's actions across layers, as data: spec, model, implementation,
trace event and conformance rules.

Every other place that names these correspondences points here: ``tla/README.md``'s mapping
table is ``render_markdown()`` verbatim (print it with ``python -m
leasefence.conformance.actions``), and ``tests/unit/test_actions.py`` checks each column against
its layer: the spec's definitions and its ``mirrors`` comments (``tla/LeaseFence.tla``), the
model's functions and the implementation's methods with their parameters (by import), the events
``impl/trace.py`` writes, and the rules of the conformance machines. Arguments are written as each
layer writes them, so where the layers differ (``DeliverResult``) the table shows all three.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    """One action (or operator) of the protocol in every layer.

    ``kind``: ``"init"`` (the initial predicate), ``"system"`` (a disjunct of the spec's
    ``Next``), ``"journal"`` / ``"coordinator"`` (an operator on that component's value, a step
    of a system action), ``"operator"`` (a rule the actions use). ``model`` is a function of
    ``leasefence.model`` as ``"module.function"`` and ``impl`` a function or method of
    ``leasefence.impl`` as ``"module.Class.method"`` or ``"module.function"``; each is followed
    by its parameters as its ``def`` writes them (``self`` left out, ``*`` before keyword-only
    ones). Where a layer has no function of its own, ``model`` or ``impl`` is None and
    ``model_text`` / ``impl_text`` says what stands for it. ``trace`` is the event the master's
    trace writes for it, None when it is not traced. ``rules`` are the conformance machines'
    rules that drive it (the first is the action's name in snake_case, others are
    ``<when>_<action>``).
    """

    name: str
    spec_args: str
    kind: str
    model: str | None
    model_args: str
    impl: str | None
    impl_args: str
    trace: str | None
    rules: tuple[str, ...]
    model_text: str = ""
    impl_text: str = ""
    note: str = ""

    @property
    def spec(self) -> str:
        """The action as the spec writes its definition's head: ``LeaseWork(j, w, r, g)``."""
        return f"{self.name}{self.spec_args}"


# One row per line group, as the README table reads (ruff format would split every field).
# fmt: off
ACTIONS: tuple[Action, ...] = (
    Action(
        "Init", "", "init",
        "system.initial_state", "()",
        "master.Master.open",
        "(journal_path, snapshot_path, catalogue, *, ttl, clock, trace, reservation_limits, "
        "max_failures, max_invalid, pipeline, fence, candidates, group_commit, depth_by_ttl)",
        "Header", ("open",),
        note="the trace's `Header` line (written when the trace is opened) holds the bounds the "
        "validator starts the model from; a restarted master writes another `Header` before "
        "its `RestartMaster`",
    ),
    Action(
        "DispatchWork", "(w, r)", "system",
        "system.dispatch_work", "(s, work, rank, b, refuse)",
        "master.Master.dispatch", "(work_id, rank)",
        "DispatchWork",
        (
            "dispatch_work",
            "same_rank_dispatch_work",
            "second_slot_dispatch_work",
            "full_target_dispatch_work",
            "moved_on_dispatch_work",
        ),
        note="includes `RejectDispatch`: when `LeaseState` refuses, `AbandonWork` undoes "
        "`LeaseWork` and nothing is sent; the model's `refuse` is the environment's reservation "
        "refusal (reservations are not part of the spec's state)",
    ),
    Action(
        "DeliverResult", "(r, w, reported, ok, keep, withgen)", "system",
        "system.deliver_result", "(s, rank, work, reported, ok, b, keep, gen, presented)",
        "master.Master.handle_result", "(rank, result)",
        "DeliverResult",
        (
            "deliver_result",
            "late_deliver_result",
            "reordered_deliver_result",
            "duplicated_deliver_result",
            "across_restart_deliver_result",
            "stale_deliver_result",
        ),
        note="three signatures: the spec draws the message's generation `g` from "
        "`InFlight(r, w)` and presents `p = IF withgen THEN g ELSE 0`; the model takes both "
        "(`gen`, `presented`; `presented=None`: its own) and its `successors` labels the step "
        "`(r, w, reported, ok, keep)` or, from `gnet`, `(r, w, reported, ok, keep, g, p)`; the "
        "implementation takes the source rank and the decoded RESULT (`work_id`, "
        "`state_task_id` = reported, `ok`, `generation` = the presented one or None); `keep` "
        "(a duplicated message) is the network's doing, not the master's",
    ),
    Action(
        "NextGen", "(r)", "operator",
        "system.next_generation", "(s, rank, b)",
        "master.Master.next_generation", "(rank)",
        None, (),
        note="the implementation's generation `(epoch, counter + 1)`, the counter being rank "
        "`r`'s; the spec and the model write the pair as the number `epoch * GenBase + counter` "
        "(`GenBase` = `GEN_BASE` = 100; 0: none). Under `Fence = \"counter\"` (spec and model "
        "only, must-fail) the epoch is always 1, as `Master._epoch()` falls back to for a "
        "coordinator without one",
    ),
    Action(
        "Bump", "(r)", "operator",
        "system.bump", "(s, rank, b)",
        None, "",
        None, (),
        impl_text="`Master.dispatch` sets `_generations[rank]` when `WorkLeaseJournal.lease` "
        "grants",
        note="rank `r`'s counter (the spec's and model's `gens`, `Master.generation_counters()`) "
        "advances when the journal grants a lease with `NextGen(r)`, the dispatch refused by "
        "the coordinator after it included",
    ),
    Action(
        "Resume", "(j, e)", "operator",
        "system.resume_generations", "(j, epoch, base)",
        "master.Master._resume_generations", "()",
        None, (),
        note="a restarted master's counters: each rank's largest counter of epoch `e` among its "
        "journal leases as read from disk (before recovery), every other rank's 0; with the "
        "epoch a restart advances, all 0",
    ),
    Action(
        "ReclaimExpired", "", "system",
        "system.reclaim_expired", "(s, b)",
        "master.Master.reclaim_expired", "()",
        "ReclaimExpired", ("reclaim_expired",),
    ),
    Action(
        "RestartMaster", "", "system",
        "system.restart_master", "(s, b)",
        "master.Master.restart_master", "()",
        "RestartMaster", ("restart_master", "pipelined_restart_master"),
        note="in a real run a new process calls `Master.open` on the existing files; the system "
        "machines' `torn_tail` fault is also this step",
    ),
    Action(
        "CrashDispatchWork", "(w, r)", "system",
        "system.crash_dispatch_work", "(s, work, rank, b)",
        None, "",
        None, (),
        impl_text="a master killed after `WorkLeaseJournal.lease` in `Master.dispatch`, then "
        "`Master.open` on its files",
        note="one of the three Crash actions (issue 21): the journal's part of a step reached "
        "disk, the coordinator's did not, and the master restarts at the same instant; not "
        "traced as such: trace validation names it when a `RestartMaster` reads that prefix "
        "from disk (`TraceReport.crashes`); `conformance.transitions` drives each crash edge "
        "through the system machine's `do_crash_*`",
    ),
    Action(
        "CrashDeliverResult", "(r, w, reported, ok, withgen)", "system",
        "system.crash_deliver_result", "(s, rank, work, reported, ok, b, gen, presented)",
        None, "",
        None, (),
        impl_text="a master killed after `WorkLeaseJournal.complete` (or `abandon`) in "
        "`Master.handle_result`, then `Master.open`",
    ),
    Action(
        "CrashReclaimExpired", "", "system",
        "system.crash_reclaim_expired", "(s, b)",
        None, "",
        None, (),
        impl_text="a master killed after `WorkLeaseJournal.recover` in "
        "`Master.reclaim_expired`, then `Master.open`",
    ),
    Action(
        "Tick", "", "system",
        None, "", None, "",
        None, ("tick",),
        model_text="`successors` (`Tick`)",
        impl_text="the clocks advancing (no method)",
    ),
    Action(
        "RollbackClock", "(to)", "system",
        None, "", None, "",
        None, ("rollback_clock", "leased_rollback_clock"),
        model_text="`successors` (`RollbackClock`)",
        impl_text="the wall clock stepped back (fault injection)",
    ),
    Action(
        "Reboot", "", "system",
        None, "", None, "",
        None, ("reboot",),
        model_text="`successors` (`Reboot`)",
        impl_text="host reboot: the monotonic origin reset (fault injection)",
    ),
    Action(
        "CompactJournal", "", "system",
        "journal.compact_journal", "(j)",
        "journal.WorkLeaseJournal.compact", "()",
        None, ("compact_journal",),
    ),
    Action(
        "LegacyRecord", "(w, r)", "system",
        "journal.legacy_record", "(j, work, worker, stamp)",
        "journal.legacy_lease_line", "(work_id, worker, updated)",
        None, ("open",),
        note="a journal line in F314's original format, read on open; the journal and system "
        "machines' `open` draws one at start",
    ),
    Action(
        "LeaseWork", "(j, w, r, g)", "journal",
        "journal.lease_work", "(j, work, worker, wall, mono, flavour, gen)",
        "journal.WorkLeaseJournal.lease", "(work_id, worker, generation)",
        None, ("lease_work",),
    ),
    Action(
        "CompleteWork", "(j, w, r, g)", "journal",
        "journal.complete_work", "(j, work, worker, flavour, gen)",
        "journal.WorkLeaseJournal.complete", "(work_id, worker, generation)",
        None, ("complete_work", "late_complete_work"),
    ),
    Action(
        "AbandonWork", "(j, w, r, g)", "journal",
        "journal.abandon_work", "(j, work, worker, flavour, gen)",
        "journal.WorkLeaseJournal.abandon", "(work_id, worker, generation)",
        None, ("abandon_work", "late_complete_work"),
    ),
    Action(
        "RecoverWork", "(j)", "journal",
        "journal.recover_work", "(j, ttl, wall, mono, flavour)",
        "journal.WorkLeaseJournal.recover", "(lease_ttl)",
        None, ("recover_work", "future_recover_work", "legacy_recover_work"),
    ),
    Action(
        "CompactJournalOp", "(j)", "journal",
        "journal.compact_journal", "(j)",
        "journal.WorkLeaseJournal.compact", "()",
        None, (),
        note="the journal operator `CompactJournal` applies; the journal machine's "
        "`compact_journal` rule drives it",
    ),
    Action(
        "LeaseState", "(c, t, r, g)", "coordinator",
        "coordinator.lease_state", "(c, task, worker, wall, mono, flavour, gen)",
        "coordinator.StateShardCoordinator.lease", "(task_id, worker, generation)",
        None, ("lease_state", "stale_lease_state", "idle_lease_state"),
    ),
    Action(
        "CompleteState", "(c, t, r, g)", "coordinator",
        "coordinator.complete_state", "(c, task, worker, reward, cost, flavour, gen)",
        "coordinator.StateShardCoordinator.complete",
        "(task_id, worker, *, reward, cost, generation)",
        None, ("complete_state", "late_complete_state"),
    ),
    Action(
        "AbandonState", "(c, t, r, g)", "coordinator",
        "coordinator.abandon_state", "(c, task, worker, cost, gen)",
        "coordinator.StateShardCoordinator.abandon", "(task_id, worker, *, cost, generation)",
        None, ("abandon_state",),
    ),
    Action(
        "DiscardState", "(c, t, r, g)", "coordinator",
        "coordinator.discard_state", "(c, task, worker, gen)",
        "coordinator.StateShardCoordinator.discard", "(task_id, worker, generation)",
        None, ("discard_state",),
        note="no system action uses it (the model's `successors` does not)",
    ),
    Action(
        "RecoverStates", "(c)", "coordinator",
        "coordinator.recover_states", "(c, ttl, wall, mono, flavour)",
        "coordinator.StateShardCoordinator.recover_expired", "(lease_ttl)",
        None, ("recover_states", "stale_recover_states"),
    ),
    Action(
        "RestartCoordinator", "(c)", "coordinator",
        "coordinator.restart_coordinator", "(c, flavour)",
        "coordinator.StateShardCoordinator.__init__", "(snapshot_path, *, clock, autosave)",
        None, ("restart_coordinator", "leased_restart_coordinator"),
        note="a new `StateShardCoordinator` loads the snapshot into the next epoch",
    ),
    Action(
        "Reclaimable", "(updated, clock, now, monoNow)", "operator",
        "rules.reclaimable", "(updated, clock, wall, mono, ttl, flavour)",
        "rules.reclaimable", "(updated, clock, now, ttl)",
        None, (),
    ),
    Action(
        "AuthoritativeStateTask", "(stored, reported)", "operator",
        "rules.authoritative_state_task", "(active, reported, flavour)",
        "rules.authoritative_state_task", "(active, reported)",
        None, (),
    ),
)
# fmt: on

#: Conformance rules that are no action of the protocol, and what they do.
FIXTURE_RULES = {
    "reopen": "the journal machine closes and reopens its file: a stuttering step",
    "torn_tail": "a crash in the middle of an unacknowledged append, then a reopen (the journal "
    "machine: a stuttering step) or RestartMaster (the system machines)",
}

#: The actions by TLA+ name.
BY_NAME = {a.name: a for a in ACTIONS}


def snake(name: str) -> str:
    """A TLA+ action name in snake_case, as the model and the rules spell it (``LeaseWork`` is
    ``lease_work``)."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


def _code(path: str | None, args: str, text: str, layer: str) -> str:
    """A function of the table as the README shows it: ``Class.method(args)`` for a method,
    ``module.function(args)`` for a model function, ``impl.module.function(args)`` for one of
    the implementation."""
    if path is None:
        return text
    module, _, rest = path.partition(".")
    if rest[:1].isupper():
        return f"`{rest}{args}`"
    return f"`{layer}{module}.{rest}{args}`"


def render_markdown() -> str:
    """The mapping table of ``tla/README.md``, with a note per action where one is needed."""
    lines = [
        "| TLA+ | model function | implementation | trace event | conformance rules |",
        "| --- | --- | --- | --- | --- |",
    ]
    for a in ACTIONS:
        cells = (
            f"`{a.spec}`",
            _code(a.model, a.model_args, a.model_text, ""),
            _code(a.impl, a.impl_args, a.impl_text, "impl."),
            f"`{a.trace}`" if a.trace else "not traced",
            ", ".join(f"`{r}`" for r in a.rules) or "—",
        )
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines += [f"- `{a.name}`: {a.note}." for a in ACTIONS if a.note]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
