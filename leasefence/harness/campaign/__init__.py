"""Fault-injection campaigns on real MPI runs: the experiment F314 left open.

A campaign runs ``leasefence run`` under ``mpiexec`` for two builds, the F314 code and a pre-fix
build (a temporary copy of the sources with the four F314 mutants of ``leasefence.harness.mutants``
applied, imported first through ``PYTHONPATH``), with the same seed and the same fault schedule,
each on its own journal, snapshot, trace and event log. Faults:

- scheduled (``schedule``), each fired when a given fraction of the work items is completed:
  ``kill`` (SIGKILL of the master, rank 0; the job dies with it; a torn tail is left on the
  journal and the trace, as a crash in the middle of an append would; a new ``mpiexec`` on the
  same files restarts the master), ``reboot`` (the same, and the new master's monotonic clock
  counts from the moment of the reboot), ``pause`` (a worker SIGSTOPped past its TTL, then
  SIGCONTed), ``clock-forward`` / ``clock-back`` (the master's wall clock stepped through
  ``--clock-file``);
- for the whole run: delayed, duplicated and wrong-ID results (``--inject late,dup,wrong-id``;
  a held result overtaken by later ones is a reordering), concurrent candidates for the same
  work and state task (``--duplicate-candidates``, besides the workload's own variants of one
  state task), journal compaction (``--compact-every``); beyond depth 1 also ``restart``, the
  master restarted inside the running job every ``restart_every`` results (``--inject
  restart``, ``leasefence.harness.faults.RestartFault``), its workers and their results in flight alive.

``check_history`` then reads each build's trace, journal and event log offline and replays the
trace through a lease ledger that follows F314's rules (who holds each work and state lease,
granted by ``DispatchWork``, released by an accepted result, by ``ReclaimExpired`` or by
``RestartMaster``; early reclaims judged by the model's rule), and through the model
(``conformance.tracecheck.validate``); both read the trace with ``conformance.traceformat``.

One module per concern: ``schedule`` (builds, faults, options, the schedule), ``process`` (the
tree a build runs from, PIDs, signals, torn tails, growing logs), ``runner`` (jobs of a build and
the campaign), ``ledger`` (the lease ledger), ``history`` (a build's history: ledger and model),
``metrics`` (per-build figures, AUC, the gates), ``table`` (table and JSON), ``plot``, and
``layer`` (the ``verify`` layer).

Pipelined dispatch (issue 12): ``pipeline=N`` passes ``--pipeline N`` to every job, so a worker
rank holds up to N dispatches and, beyond 1, leases are fenced by ``(rank, generation)``. The
builds compared there are ``f314`` (generation fence, the run's default) and ``rank-fence``
(the same code with ``--fence rank``, unsafe by the model: ``leasefence model check --pipeline 2
--fence rank``); ``pre-fix`` runs at depth N only when asked. The ledger then holds whole owner
tokens and counts results across generations. The model's counterexample needs a result that
crosses a master restart: a kill or reboot starts a new MPI job whose old workers died with the
master, so only the in-job ``restart`` fault (on by default beyond depth 1) can reach it, and
``rank-fence`` stays a measurement, not a gate.
"""

from __future__ import annotations

from leasefence.harness.campaign.history import (
    check_build,
    interrupted_rejections,
    validate_segments,
)
from leasefence.harness.campaign.ledger import History, check_history, journal_done_records
from leasefence.harness.campaign.metrics import (
    BuildRun,
    CampaignResult,
    FiredFault,
    coverage_auc,
    percentile,
)
from leasefence.harness.campaign.process import read_ndjson, tear
from leasefence.harness.campaign.runner import run_build, run_campaign
from leasefence.harness.campaign.schedule import (
    ALL_BUILDS,
    BUILDS,
    IN_JOB_RESTART,
    INJECT,
    PIPELINE_BUILDS,
    RESTART_EVERY,
    RUN_FAULTS,
    SCHEDULED,
    CampaignConfig,
    Fault,
    build_args,
    default_builds,
    schedule,
)
from leasefence.harness.campaign.table import format_table, table_rows, to_json

__all__ = [
    "ALL_BUILDS",
    "BUILDS",
    "INJECT",
    "IN_JOB_RESTART",
    "PIPELINE_BUILDS",
    "RESTART_EVERY",
    "RUN_FAULTS",
    "SCHEDULED",
    "BuildRun",
    "CampaignConfig",
    "CampaignResult",
    "Fault",
    "FiredFault",
    "History",
    "build_args",
    "check_build",
    "check_history",
    "coverage_auc",
    "default_builds",
    "format_table",
    "interrupted_rejections",
    "journal_done_records",
    "percentile",
    "read_ndjson",
    "run_build",
    "run_campaign",
    "schedule",
    "table_rows",
    "tear",
    "to_json",
    "validate_segments",
]
