"""Hypothesis state machines that drive the implementation and the model side by side.

Every rule draws its arguments and calls one ``do_*`` action, which applies the same action to
the model (``leasefence.model``) and to the implementation (``leasefence.impl``), compares the
two return values, then compares the implementation's abstract state (``refinement``) with the
model's, and checks the two-state properties (L3, L4's reboot, L6's statistics, L7) on both
sides. After every step the state invariants (``type_ok``, L1, L2, L5, L6, ``no_stuck_lease``,
``completions_accounted``) are checked on both sides as ``@invariant()``s named like the model's functions. The ``do_*`` actions take plain
arguments, so a scenario file (``conformance.scenarios``) replays the same steps without
Hypothesis. One module per machine:

======================  ======================================================================
machine (module)        what it drives
======================  ======================================================================
``JournalMachine``      one ``WorkLeaseJournal`` on a real file: leases, fenced and unfenced
(``journal``)           calls, recovery, compaction, close/reopen, torn tails, a legacy record
``CoordinatorMachine``  one ``StateShardCoordinator`` with autosave: leases, fenced calls,
(``coordinator``)       recovery, restart into a new epoch from the snapshot on disk
``MasterMachine``       the ``Master`` over the in-process transport; the machine is the
(``master``)            network: results are delivered by a rule, late, duplicated, with wrong
                        or no IDs
``SystemMachine``       the above plus master kill and restart from disk (a new coordinator
(``system``)            epoch), torn tails, compaction, a legacy journal at start, trace
                        validation
``Pipelined*``          ``PipelinedMasterMachine`` and ``PipelinedSystemMachine``: the two above
(``pipelined``)         at pipeline depth 2 with generation fencing (issue 12): two dispatches
                        per rank, results presenting their generation or none, older
                        generations delivered after a re-dispatch, duplicated, reordered,
                        across a restart
======================  ======================================================================

What every machine shares (the step protocol, the clock rules, the invariants) is in ``base``.
Rule names are the model's action names in snake_case (``dispatch_work`` is ``DispatchWork``);
the one table mapping actions to model functions, methods, trace events and these rules is
``leasefence.conformance.actions``.
"""

from __future__ import annotations

from leasefence.conformance.machines.base import (
    SAVE_ENV,
    SCENARIO_ACTIONS,
    ConformanceFailure,
    ConformanceMachine,
)
from leasefence.conformance.machines.coordinator import CoordinatorMachine
from leasefence.conformance.machines.journal import JournalMachine
from leasefence.conformance.machines.master import (
    REORDERED,
    MasterMachine,
    Message,
    SteeredMasterMachine,
)
from leasefence.conformance.machines.pipelined import (
    PipelinedMasterMachine,
    PipelinedSystemMachine,
)
from leasefence.conformance.machines.system import SystemMachine

#: Every machine by its ``NAME`` (the coverage report's and the scenario files' name).
MACHINES: dict[str, type[ConformanceMachine]] = {
    m.NAME: m
    for m in (
        JournalMachine,
        CoordinatorMachine,
        SteeredMasterMachine,
        SystemMachine,
        PipelinedMasterMachine,
        PipelinedSystemMachine,
    )
}

__all__ = [
    "MACHINES",
    "REORDERED",
    "SAVE_ENV",
    "SCENARIO_ACTIONS",
    "ConformanceFailure",
    "ConformanceMachine",
    "CoordinatorMachine",
    "JournalMachine",
    "MasterMachine",
    "Message",
    "PipelinedMasterMachine",
    "PipelinedSystemMachine",
    "SteeredMasterMachine",
    "SystemMachine",
]
