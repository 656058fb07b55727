--------------------------- MODULE LeaseFenceLive ---------------------------
(***************************************************************************)
(* Liveness of F314 (issue 21 point 3): every lease is eventually freed,   *)
(* every rank eventually idle, every work item eventually completed or     *)
(* given up, under fairness assumptions stated in F314's terms.            *)
(*                                                                         *)
(* This module reuses LeaseFence's actions unchanged (INSTANCE) and        *)
(* changes only what liveness cannot live with:                           *)
(*  - the clock keeps moving.  LeaseFence's Tick stops at MaxWall, and     *)
(*    after a rollback the clock can freeze (mono already at MaxWall), so  *)
(*    a lease stamped near the end would never expire.  Here Tick is      *)
(*    always enabled: below MaxWall a clock advances as before; at MaxWall *)
(*    the origin slides instead: every stamp of that clock's domain gets   *)
(*    one tick older (down to 0).  Reclaimable only ever compares          *)
(*    differences of a clock and its stamps, so sliding the origin is     *)
(*    time passing; the floor 0 can only make a lease look younger than   *)
(*    it is (after a later rollback), never older: it delays a reclaim,    *)
(*    it never makes one early.  The state stays finite.                   *)
(*  - no CONSTRAINT.  The bounds of LeaseFence's WithinConstraint are      *)
(*    guards inside the actions that grant a lease (Budget): a state       *)
(*    constraint cuts behaviours, and liveness over cut behaviours can     *)
(*    pass vacuously.  An item whose budget is spent while it is neither   *)
(*    leased nor completed is *given up*, as the implementation gives up   *)
(*    an item after max_failures failures or max_invalid invalid answers.  *)
(*  - every other bound (restarts, reboots, rollbacks, duplicates) is      *)
(*    already a guard of its action in LeaseFence.                         *)
(*                                                                         *)
(* Fairness, in F314's terms (all weak; LiveSpec):                        *)
(*  - WF Tick: real time passes.  Nothing a program does stops it.         *)
(*  - WF ReclaimExpired: the master's loop runs recover_expired every      *)
(*    quarter TTL while it is alive (impl/transport.py master_dispatch);   *)
(*    it is always enabled, so weak fairness is what a periodic timer      *)
(*    gives.                                                               *)
(*  - WF DispatchWork per work item: the master offers every pending item  *)
(*    (catalogue order, Master.dispatch_pending) to every free rank each  *)
(*    round; an item that stays dispatchable is eventually dispatched.     *)
(* Deliberately *not* assumed: that a worker ever answers (DeliverResult), *)
(* that the master restarts, that clocks fault.  A result may be lost for *)
(* ever (a dead worker): liveness rests on the TTL and recovery alone, so  *)
(* it holds however many workers die.  The refused LeaseState of a        *)
(* dispatch counts an attempt (F314's RejectDispatch keeps it), so an item *)
(* whose task is always busy may be given up: allowed, and reported.       *)
(*                                                                         *)
(* The Python checker (model/live.py, model/livecheck.py) mirrors this     *)
(* module: live_successors is Next, FAIRNESS is Fairness, and it finds     *)
(* fair cycles (strongly connected components under weak fairness per     *)
(* class) and prints a lasso.  `leasefence tlc agree` requires the same    *)
(* verdict and the same number of states from both on every live config.  *)
(*                                                                         *)
(* Planted bugs (definitions a config overrides, like LeaseFence's         *)
(* Pipeline): Starve, the work IDs the dispatcher never offers (a          *)
(* candidate-policy bug: EveryItemSettled fails); RecoveryHaltsAfterRollback,*)
(* the master's periodic recovery stops for good once the wall clock has   *)
(* stepped back (EveryLeaseFreed and EveryRankIdle fail).  LiveSpecUnfair *)
(* is LiveSpec with the fairness removed (every property fails).           *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS TaskOf, Ranks, TTL, MaxWall, MaxReboots, MaxRollbacks, MaxRestarts,
          MaxAttempts, MaxLeases, MaxDups, Flavour, NoTask

VARIABLES wall, mono, journal, coordinator, active, net, dups, reboots, rollbacks, gnet, gens

LF == INSTANCE LeaseFence

vars == LF!vars
Works == LF!Works
Tasks == LF!Tasks

\* The work IDs the dispatcher never offers (planted bug; {} in F314).
Starve == {}
\* Whether the periodic recovery stops for good after a wall-clock rollback (planted bug).
RecoveryHaltsAfterRollback == FALSE

ASSUME /\ MaxWall >= TTL
       /\ Starve \subseteq Works

Attempts(w) == IF LF!Has(journal.attempts, w) THEN journal.attempts[w] ELSE 0

(* Budget(w): the bounds of LeaseFence's WithinConstraint as a guard: one   *)
(* more lease of w keeps it within MaxAttempts for w and MaxLeases in all.  *)
Budget(w) == Attempts(w) < MaxAttempts

(* GivenUp(w): w is neither completed nor leased and its budget is spent:  *)
(* no lease of it can ever be granted again.                                *)
GivenUp(w) == /\ w \notin journal.completed
              /\ ~LF!Has(journal.leases, w)
              /\ ~Budget(w)

Settled(w) == w \in journal.completed \/ GivenUp(w)

-----------------------------------------------------------------------------
(* The sliding clock.  Older(u): a stamp one tick older, not below 0.       *)
Older(u) == IF u > 0 THEN u - 1 ELSE 0

\* A work lease's stamp slides when its clock's domain is at MaxWall.
SlideWork(x) ==
    IF \/ x.clock = "unix" /\ wall = MaxWall
       \/ x.clock = "mono" /\ mono = MaxWall
    THEN [x EXCEPT !.updated = Older(x.updated)]
    ELSE x

\* State leases are stamped with wall time (monotonic under defect 3).
StateAtCap == IF LF!Defect3 THEN mono = MaxWall ELSE wall = MaxWall

(* Tick: always enabled.  Each clock below MaxWall advances one tick; for  *)
(* a clock at MaxWall, every stamp of its domain gets one tick older       *)
(* instead (legacy stamps, from another boot, never move).  It stutters    *)
(* only when both clocks are at MaxWall and every sliding stamp is 0.      *)
Tick ==
    /\ wall' = IF wall < MaxWall THEN wall + 1 ELSE wall
    /\ mono' = IF mono < MaxWall THEN mono + 1 ELSE mono
    /\ journal' = [journal EXCEPT !.leases =
                      [w \in DOMAIN journal.leases |-> SlideWork(journal.leases[w])]]
    /\ coordinator' = [coordinator EXCEPT !.leases =
                          [t \in DOMAIN coordinator.leases |->
                              IF StateAtCap
                              THEN [coordinator.leases[t] EXCEPT !.updated = Older(@)]
                              ELSE coordinator.leases[t]]]
    /\ UNCHANGED <<active, net, dups, reboots, rollbacks, gnet, gens>>

-----------------------------------------------------------------------------
(* LeaseFence's actions, with the lease bounds as guards.                   *)

\* DispatchWork(w, r): LeaseFence's, within the budget of w, unless the dispatcher starves w.
DispatchWork(w, r) == w \notin Starve /\ Budget(w) /\ LF!DispatchWork(w, r)

DeliverResult(r, w, reported, ok, keep, withgen) == LF!DeliverResult(r, w, reported, ok, keep, withgen)

\* ReclaimExpired: LeaseFence's, unless the planted bug has halted recovery after a rollback.
ReclaimExpired == ~(RecoveryHaltsAfterRollback /\ rollbacks > 0) /\ LF!ReclaimExpired

RestartMaster == LF!RestartMaster
RollbackClock(to) == LF!RollbackClock(to)
Reboot == LF!Reboot
CompactJournal == LF!CompactJournal
LegacyRecord(w, r) == Budget(w) /\ LF!LegacyRecord(w, r)

(* Next mirrors model.live.live_successors: LeaseFence's Next with the      *)
(* sliding Tick and the budget guards.                                      *)
Next ==
    \/ \E r \in Ranks, w \in Works : DispatchWork(w, r)
    \/ \E r \in Ranks, w \in Works, reported \in Tasks \cup {NoTask},
          ok \in BOOLEAN, keep \in BOOLEAN, withgen \in BOOLEAN :
             DeliverResult(r, w, reported, ok, keep, withgen)
    \/ ReclaimExpired
    \/ RestartMaster
    \/ Tick
    \/ \E to \in 0..MaxWall : RollbackClock(to)
    \/ Reboot
    \/ CompactJournal
    \/ \E w \in Works, r \in Ranks : LegacyRecord(w, r)

(* Fairness mirrors model.live.FAIRNESS (the header says why each holds).   *)
Fairness ==
    /\ WF_vars(Tick)
    /\ WF_vars(ReclaimExpired)
    /\ \A w \in Works : WF_vars(\E r \in Ranks : DispatchWork(w, r))

LiveSpec == LF!Init /\ [][Next]_vars /\ Fairness

\* The must-fail twin: the same system with no fairness at all.
LiveSpecUnfair == LF!Init /\ [][Next]_vars

TypeOK == LF!TypeOK

-----------------------------------------------------------------------------
(* The liveness properties (model.live.LIVE_PROPERTIES), one each.          *)

\* Every lease is eventually freed: each work lease and each state lease, whatever epoch.
EveryLeaseFreed ==
    /\ \A w \in Works : LF!Has(journal.leases, w) ~> ~LF!Has(journal.leases, w)
    /\ \A t \in Tasks : LF!Has(coordinator.leases, t) ~> ~LF!Has(coordinator.leases, t)

\* Every rank is eventually idle: a rank holding a dispatch eventually holds none.
EveryRankIdle ==
    \A r \in Ranks : LF!Slots(r) # {} ~> LF!Slots(r) = {}

\* Every item is eventually completed or given up.
EveryItemSettled ==
    \A w \in Works : <>Settled(w)
=============================================================================
