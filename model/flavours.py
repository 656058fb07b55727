"""The protocol as F314 fixed it, each of the four pre-fix defects switched back on alone, and the
planted bugs that make each remaining property fail (its must-fail twin)."""

from __future__ import annotations

from enum import StrEnum


class Flavour(StrEnum):
    """Which protocol the model runs: ``FIXED`` (F314), one pre-fix defect, or one must-fail
    twin (a planted bug for a property no defect breaks), one at a time.

    The defects exist so that every layer (model checker, TLC, conformance, mutants) can show that
    it catches each one; they never leak into ``impl/``.
    """

    FIXED = "fixed"
    # Defect 1: WorkLeaseJournal.lease refused only completed IDs, and complete/abandon ignored
    # the worker fence (a late completion or rollback deleted the current record).
    DUPLICATE_OWNER = "defect1"
    # Defect 2: StateShardCoordinator.lease overwrote the active worker; complete had no owner check.
    UNFENCED_STATE = "defect2"
    # Defect 3: time.monotonic() persisted with no clock tag, and recovery compared it as is.
    MONOTONIC_PERSISTED = "defect3"
    # Defect 4: the state ID reported by the worker was preferred over the master's stored one.
    REPORTED_ID_WINS = "defect4"
    # Must-fail twins (issue 21): one planted bug per property that no defect of F314 breaks.
    # A dispatch refused by the coordinator keeps its work lease (no compensating undo).
    KEEP_REFUSED_LEASE = "keep-refused-lease"
    # Journal recovery reclaims a Unix lease one tick before its TTL (off by one).
    RECLAIM_EARLY = "reclaim-early"
    # A coordinator restart keeps the old epoch's leases active (ownership is inherited).
    RESTART_KEEPS_OWNERS = "restart-keeps-owners"
    # A coordinator restart loads the snapshot without its statistics.
    RESTART_DROPS_STATS = "restart-drops-stats"
    # A step writes the coordinator before the journal: a crash inside it leaves the
    # coordinator's part on disk instead of the journal's.
    COORDINATOR_FIRST = "coordinator-first"
    # Recovery reads a record without the Unix tag as a Unix one (F314's migration of legacy
    # records left out: the clock tag is ignored).
    LEGACY_NOT_MIGRATED = "legacy-not-migrated"
    # Recovery keeps a Unix lease dated more than TTL in the future (after a rollback).
    KEEP_FUTURE_LEASES = "keep-future-leases"
    # Issue 21 "Why" 3: the master never calls a result stale because the dispatch its
    # generation finds is for another work ID (the first part of IsStale removed). Harmless while
    # generations never repeat (fence "generation"); breaks once they do (fence "counter").
    NO_STALE_GUARD = "no-stale-guard"
    # Twins of L3's failures and network (issue 21 "Why" 5): RejectDispatch books the refused
    # dispatch as a failure of its task (a refusal counted as a failed attempt), or the WORK
    # message leaves although the coordinator refused the state lease (sent before its answer
    # is read). L3's clauses on attempts and leases alone see neither.
    REFUSAL_BOOKS_FAILURE = "refusal-books-failure"
    REFUSAL_SENDS_WORK = "refusal-sends-work"


#: One line per flavour, for ``--help`` and reports.
DESCRIPTIONS: dict[Flavour, str] = {
    Flavour.FIXED: "the protocol as F314 fixes it",
    Flavour.DUPLICATE_OWNER: "defect 1: journal lease without the active check, unfenced complete/abandon",
    Flavour.UNFENCED_STATE: "defect 2: state lease overwrites the owner, complete without owner check",
    Flavour.MONOTONIC_PERSISTED: "defect 3: monotonic time persisted without a clock tag",
    Flavour.REPORTED_ID_WINS: "defect 4: the worker-reported state ID is preferred",
    Flavour.KEEP_REFUSED_LEASE: "twin: a dispatch refused by the coordinator keeps its work lease",
    Flavour.RECLAIM_EARLY: "twin: journal recovery reclaims a lease one tick before its TTL",
    Flavour.RESTART_KEEPS_OWNERS: "twin: a coordinator restart keeps the old ranks' ownership",
    Flavour.RESTART_DROPS_STATS: "twin: a coordinator restart drops the statistics",
    Flavour.COORDINATOR_FIRST: "twin: a crashed step leaves the coordinator's part, not the journal's",
    Flavour.LEGACY_NOT_MIGRATED: "twin: recovery compares an untagged record as Unix time",
    Flavour.KEEP_FUTURE_LEASES: "twin: recovery keeps a lease dated more than TTL in the future",
    Flavour.NO_STALE_GUARD: "a result whose generation finds another work's dispatch is not stale",
    Flavour.REFUSAL_BOOKS_FAILURE: "twin: a dispatch refused by the coordinator books a failure",
    Flavour.REFUSAL_SENDS_WORK: "twin: a dispatch refused by the coordinator still sends its WORK",
}

#: The invariants each defect must violate (F314's table, checked by the tests).
EXPECTED_VIOLATIONS: dict[Flavour, frozenset[str]] = {
    Flavour.FIXED: frozenset(),
    Flavour.DUPLICATE_OWNER: frozenset({"L1_SingleOwner", "L3_RefusalChangesNothing"}),
    Flavour.UNFENCED_STATE: frozenset({"L1_SingleOwner", "L2_OwnerFenced"}),
    Flavour.MONOTONIC_PERSISTED: frozenset(
        {"L4_UnixClockDomain", "L5_LegacyMigratable", "L5_LegacyMigrated", "NoStuckLease"}
    ),
    Flavour.REPORTED_ID_WINS: frozenset({"L7_AuthoritativeStateId"}),
    Flavour.KEEP_REFUSED_LEASE: frozenset({"L1_NoOrphanLease"}),
    Flavour.RECLAIM_EARLY: frozenset(
        {"L2_RemovalFenced", "L6_NoInheritedOwnership", "L7_AuthoritativeStateId"}
    ),
    Flavour.RESTART_KEEPS_OWNERS: frozenset({"L6_NoInheritedOwnership"}),
    Flavour.RESTART_DROPS_STATS: frozenset({"L6_StatisticsSurvive"}),
    Flavour.COORDINATOR_FIRST: frozenset({"CompletionsAccounted"}),
    Flavour.LEGACY_NOT_MIGRATED: frozenset({"L5_LegacyMigrated"}),
    Flavour.KEEP_FUTURE_LEASES: frozenset({"NoStuckLeaseRecovered"}),
    Flavour.NO_STALE_GUARD: frozenset(),  # generations never repeat: see COUNTER_STALE_VIOLATIONS
    Flavour.REFUSAL_BOOKS_FAILURE: frozenset({"L3_RefusalChangesNothing"}),
    Flavour.REFUSAL_SENDS_WORK: frozenset({"L3_RefusalChangesNothing"}),
}

#: Beyond F314's table: rank fencing with more than one dispatch per rank (F314's own caveat).
#: A result of a dispatch the master forgot (a restart) still owns its work lease, and its rank
#: owns the state task again for a newer dispatch of another work ID with the same task: the
#: rank alone cannot tell the two apart, so the old result takes the newer dispatch's state
#: lease. Generation fencing, ``(rank, dispatch_generation)``, must pass.
PIPELINE_RANK_VIOLATIONS: frozenset[str] = frozenset({"L2_OwnerFenced"})


#: Issue 21 "Why" 3: generations without the epoch (fence ``"counter"``) repeat after a restart,
#: and without the stale test (``NO_STALE_GUARD``) a late result of the forgotten dispatch whose
#: generation a new dispatch of its rank now holds is committed as that dispatch's: its work
#: lease is completed, the new dispatch's task is booked and the new dispatch ends, its lease
#: left behind. With the stale test, or with the epoch, it must pass.
COUNTER_STALE_VIOLATIONS: frozenset[str] = frozenset(
    {"L1_NoOrphanLease", "L6_NoInheritedOwnership", "L7_AuthoritativeStateId"}
)


def expected_violations(flavour: Flavour, pipeline: int = 1, fence: str = "rank") -> frozenset[str]:
    """The invariants a run with these constants must violate (empty: it must pass)."""
    if pipeline > 1 and fence == "rank":
        return EXPECTED_VIOLATIONS[flavour] | PIPELINE_RANK_VIOLATIONS
    if fence == "counter" and flavour is Flavour.NO_STALE_GUARD:
        return EXPECTED_VIOLATIONS[flavour] | COUNTER_STALE_VIOLATIONS
    return EXPECTED_VIOLATIONS[flavour]
