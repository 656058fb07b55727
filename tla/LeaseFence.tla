----------------------------- MODULE LeaseFence -----------------------------
(***************************************************************************)
(* Reboot-safe local lease fencing and single-owner dispatch (F314).       *)
(*                                                                         *)
(* A master dispatches units of work to worker ranks.  Each dispatch is    *)
(* one compensating transaction: lease the exact work item in the work     *)
(* journal (WorkLeaseJournal), lease its abstract state task in the        *)
(* state-shard coordinator (StateShardCoordinator), send.  Results may     *)
(* arrive late, duplicated, reordered, across master restarts, naming any  *)
(* state ID or none.  Clocks fault: reboots reset monotonic time, the wall *)
(* clock may be stepped back.                                              *)
(*                                                                         *)
(* This module is the norm.  The Python reference model                   *)
(* (leasefence.model.system.successors(), with WithinConstraint as its     *)
(* state constraint) mirrors it action for action, and the implementation  *)
(* refines the model; `leasefence tlc agree` checks that spec and model    *)
(* explore the same state graph.  Where they differ, the spec says what    *)
(* the protocol is.  Every variable is a field of model.state.State;       *)
(* the model's maps (sorted tuples of the keys present) are functions      *)
(* whose DOMAIN is the set of keys present.  Each component operator below *)
(* is a pure function returning [ok |-> result, next |-> new value], like  *)
(* the model's `(result, next)`.  The mapping table (TLA+ action | model   *)
(* function | implementation method | trace event) is in tla/README.md.   *)
(*                                                                         *)
(* Each pre-fix defect of F314 is switched back on, one at a time, by the  *)
(* constant Flavour (model.flavours.Flavour).                              *)
(*                                                                         *)
(* Pipelining (issue 12): Pipeline is how many dispatches one rank may     *)
(* hold at once, Fence the owner token of every lease: "rank" (F314),      *)
(* "generation" (<<rank, dispatch generation>>, the generation being the   *)
(* implementation's (epoch, counter)) or "counter" (the same with the      *)
(* epoch fixed at 1, Master._epoch()'s fallback: a must-fail fence).  Both *)
(* are definitions, not CONSTANTS, so that configs written before them    *)
(* stay valid; a config overrides them with `Pipeline <- Def`              *)
(* (MCLeaseFence.tla has the Defs).                                        *)
(* With Pipeline = 1 and Fence = "rank" no generation is ever tracked and  *)
(* the state graph is exactly F314's.                                      *)
(***************************************************************************)
EXTENDS Integers, FiniteSets

CONSTANTS
    TaskOf,        \* work ID -> state task ID (different payloads may share a task)
    Ranks,         \* worker ranks (MPI ranks), positive integers
    TTL,           \* lease TTL, in ticks
    MaxWall,       \* last wall-clock (and monotonic) tick
    MaxReboots,    \* reboots (monotonic origin resets)
    MaxRollbacks,  \* wall-clock rollbacks
    MaxRestarts,   \* master restarts (counted by the coordinator's epoch)
    MaxAttempts,   \* leases of one work ID (state constraint)
    MaxLeases,     \* leases in all (state constraint)
    MaxDups,       \* duplicated results
    Flavour,       \* "fixed" (F314) or one pre-fix defect "defect1".."defect4"
    NoTask         \* a model value: "no state ID" (the model's None)

Works == DOMAIN TaskOf
Tasks == {TaskOf[w] : w \in Works}

\* Dispatches one rank may hold at once (Bounds.pipeline); 1: F314's one per rank.
Pipeline == 1
\* The owner token of a lease (Bounds.fence): "rank" (F314), "generation" or "counter".
Fence == "rank"
Generations == Fence # "rank"
\* A dispatch generation is the implementation's pair (epoch, counter) (Master.next_generation),
\* written as the one number epoch * GenBase + counter (0: none, a rank-only owner).  A rank's
\* counter never reaches GenBase: it counts leases granted, at most MaxLeases (ASSUME).
GenBase == 100
\* Whether a journal written before F314 may be opened (LegacyRecord; Bounds.legacy).  A
\* definition like Pipeline: a config turns it off with `LegacyRecords <- MCNoLegacy`, to
\* see a property fail on another scenario than a legacy record's.
LegacyRecords == TRUE

\* The protocol as F314 fixes it, each pre-fix defect switched back on alone, and the
\* must-fail twins: one planted bug for each property no defect of F314 breaks, and
\* for each part of L3 defect 1 does not reach (its failures and its network).
Flavours == {"fixed", "defect1", "defect2", "defect3", "defect4", "keep-refused-lease",
             "reclaim-early", "restart-keeps-owners", "restart-drops-stats", "coordinator-first",
             "legacy-not-migrated", "keep-future-leases", "no-stale-guard",
             "refusal-books-failure", "refusal-sends-work"}
\* defect1: WorkLeaseJournal.lease refused only completed IDs; complete/abandon ignored the fence.
Defect1 == Flavour = "defect1"
\* defect2: StateShardCoordinator.lease overwrote the active worker; complete had no owner check.
Defect2 == Flavour = "defect2"
\* defect3: time.monotonic() persisted with no clock tag, and recovery compared it as is.
Defect3 == Flavour = "defect3"
\* defect4: the state ID reported by the worker was preferred over the master's stored one.
Defect4 == Flavour = "defect4"
\* Twin of L1_NoOrphanLease: a dispatch refused by the coordinator keeps its work lease.
KeepRefusedLease == Flavour = "keep-refused-lease"
\* Twin of L2_RemovalFenced: journal recovery reclaims a Unix lease one tick before its TTL.
ReclaimEarly == Flavour = "reclaim-early"
\* Twin of L6_NoInheritedOwnership: a coordinator restart keeps the old epoch's leases active.
RestartKeepsOwners == Flavour = "restart-keeps-owners"
\* Twin of L6_StatisticsSurvive: a coordinator restart loads the snapshot without its statistics.
RestartDropsStats == Flavour = "restart-drops-stats"
\* Twin of CompletionsAccounted: a step writes the coordinator before the journal, so a crash
\* inside it leaves the coordinator's part on disk instead of the journal's.
CoordinatorFirst == Flavour = "coordinator-first"
\* Twin of L5_LegacyMigrated: recovery reads a record without the Unix tag as a Unix one.
LegacyNotMigrated == Flavour = "legacy-not-migrated"
\* Twin of NoStuckLeaseRecovered: recovery keeps a Unix lease dated more than TTL in the future.
KeepFutureLeases == Flavour = "keep-future-leases"
\* Issue 21 "Why" 3: the master never calls a result stale because the dispatch its generation
\* finds is for another work ID (IsStale's first part removed).  Harmless while generations
\* never repeat (Fence "generation"); fails once they do (Fence "counter").
NoStaleGuard == Flavour = "no-stale-guard"
\* Twins of L3_RefusalChangesNothing's failures and network (issue 21 "Why" 5): RejectDispatch
\* books the refused dispatch as a failure of its task in the coordinator's statistics (a
\* refusal counted as a failed attempt), or the WORK message leaves although the coordinator
\* refused the state lease (the payload sent before its answer is read).  L3's clauses on
\* attempts and leases alone see neither.
RefusalBooksFailure == Flavour = "refusal-books-failure"
RefusalSendsWork == Flavour = "refusal-sends-work"

ASSUME /\ Flavour \in Flavours
       /\ Pipeline \in Nat \ {0}
       /\ Fence \in {"rank", "generation", "counter"}
       /\ MaxLeases < GenBase
       /\ Ranks \subseteq Nat \ {0}
       /\ NoTask \notin Tasks
       /\ \A n \in {TTL, MaxWall, MaxReboots, MaxRollbacks, MaxRestarts,
                    MaxAttempts, MaxLeases, MaxDups} : n \in Nat

(* Clock domains of a persisted timestamp (model.rules.CLOCKS).  "unix":     *)
(* tagged Unix time (F314).  "legacy": an untagged monotonic value from a    *)
(* journal written before F314.  "mono": an untagged monotonic value written *)
(* by pre-fix code (defect 3); on disk it looks exactly like "legacy".       *)
Clocks == {"unix", "legacy", "mono"}

\* The monotonic stamp of a legacy record: an uptime from an earlier boot,
\* larger than any reachable one (Bounds.legacy_stamp).
LegacyStamp == MaxWall + 1

VARIABLES
    wall,         \* Unix time, in ticks
    mono,         \* monotonic time, in ticks (reset by a reboot)
    journal,      \* the work journal after replaying its records (model.state.Journal)
    coordinator,  \* the state-shard coordinator (model.state.Coordinator)
    active,       \* the active dispatches [rank, work, task, gen], as the master stored them
    net,          \* results in flight: one <<rank, work>> per payload sent (rank fencing)
    dups,         \* deliveries that left their message in flight (duplicated results)
    reboots,      \* reboots so far
    rollbacks,    \* wall-clock rollbacks so far
    gnet,         \* results in flight with their generation: <<rank, work, gen>> (generation fencing)
    gens          \* per rank, the counter of its dispatch generations (Master._generations): in
                  \* the master's memory, reset and resumed from the journal at every restart

vars == <<wall, mono, journal, coordinator, active, net, dups, reboots, rollbacks, gnet, gens>>

-----------------------------------------------------------------------------
(* Maps with the keys present as DOMAIN (model.state.get / put / drop).     *)
EmptyMap == [k \in {} |-> 0]
Has(m, k) == k \in DOMAIN m
Put(m, k, v) == [x \in DOMAIN m \cup {k} |-> IF x = k THEN v ELSE m[x]]
Drop(m, k) == [x \in DOMAIN m \ {k} |-> m[x]]
Without(m, ks) == [x \in DOMAIN m \ ks |-> m[x]]

\* The sum of the values of a map of integers.
MapSum(m) ==
    LET RECURSIVE Sum(_)
        Sum(D) == IF D = {} THEN 0
                  ELSE LET k == CHOOSE x \in D : TRUE IN m[k] + Sum(D \ {k})
    IN  Sum(DOMAIN m)

\* The active dispatches of rank r (system.dispatches_of).
Slots(r) == {d \in active : d.rank = r}

-----------------------------------------------------------------------------
(***************************************************************************)
(* TypeOK: every variable holds a value of its type and range              *)
(* (model.invariants.type_ok).                                             *)
(***************************************************************************)
\* Every variable holds a value of its type and range.
TypeOK ==
    /\ wall \in 0..MaxWall
    /\ mono \in 0..MaxWall
    /\ reboots \in 0..MaxReboots
    /\ rollbacks \in 0..MaxRollbacks
    /\ DOMAIN journal.leases \subseteq Works
    /\ \A w \in DOMAIN journal.leases :
          /\ journal.leases[w].owner \in Ranks
          /\ journal.leases[w].updated \in Int
          /\ journal.leases[w].clock \in Clocks
          /\ journal.leases[w].gen \in Nat
    /\ journal.completed \subseteq Works
    /\ DOMAIN journal.attempts \subseteq Works
    /\ \A w \in DOMAIN journal.attempts : journal.attempts[w] \in Nat \ {0}
    /\ coordinator.epoch \in 1..(MaxRestarts + 1)
    /\ DOMAIN coordinator.leases \subseteq Tasks
    /\ \A t \in DOMAIN coordinator.leases :
          /\ coordinator.leases[t].owner \in Ranks
          /\ coordinator.leases[t].updated \in Int
          /\ coordinator.leases[t].epoch \in 1..coordinator.epoch
          /\ coordinator.leases[t].gen \in Nat
    /\ DOMAIN coordinator.stats \subseteq Tasks
    /\ \A t \in DOMAIN coordinator.stats :
          \A f \in {"completions", "failures", "reward", "cost"} :
             coordinator.stats[t][f] \in Nat
    /\ \A d \in active :
          /\ d.rank \in Ranks
          /\ d.work \in Works
          /\ d.task = TaskOf[d.work]
          /\ d.gen \in Nat
    /\ \A r \in Ranks : Cardinality(Slots(r)) <= Pipeline
    /\ net \subseteq Ranks \X Works
    /\ gnet \subseteq Ranks \X Works \X (Nat \ {0})
    /\ dups \in 0..MaxDups
    /\ DOMAIN gens \subseteq Ranks
    /\ \A r \in DOMAIN gens : gens[r] \in 1..(GenBase - 1)

-----------------------------------------------------------------------------
(***************************************************************************)
(* Decision rules shared by the journal and the coordinator (model.rules). *)
(***************************************************************************)

(* Reclaimable (rules.reclaimable): whether recovery with TTL reclaims a     *)
(* lease stamped `updated` in domain `clock`, the clocks reading `now` and   *)
(* `monoNow`.  F314 3.2: (1) TTL = 0 reclaims every active record; (2) a     *)
(* record without the Unix tag is legacy and is reclaimed; (3) otherwise     *)
(* reclaim when now - updated >= TTL.  Beyond F314: a Unix record dated more *)
(* than TTL in the future (the wall clock was stepped back) is reclaimed.    *)
(* Defect 3 compared monotonic values only, negative after a reboot.         *)
Reclaimable(updated, clock, now, monoNow) ==
    IF Defect3 THEN monoNow - updated >= TTL
    ELSE \/ TTL = 0
         \/ clock # "unix"
         \/ updated - now > TTL
         \/ now - updated >= TTL

(* AuthoritativeStateTask (rules.authoritative_state_task): the task a      *)
(* result commits.  The master's stored ID wins (L7); the report is used     *)
(* only when the master holds none (old protocol).  Defect 4 preferred the   *)
(* report whenever there was one.                                            *)
AuthoritativeStateTask(stored, reported) ==
    IF Defect4 /\ reported # NoTask THEN reported
    ELSE IF stored # NoTask THEN stored ELSE reported

-----------------------------------------------------------------------------
(***************************************************************************)
(* The work journal (WorkLeaseJournal), as pure operators on its value     *)
(* (model.journal).  Each returns [ok |-> ..., next |-> journal].  A       *)
(* refused call returns the journal unchanged: it writes nothing.          *)
(***************************************************************************)

\* The fence in force: defect 1 ignored the worker (complete/abandon were unconditional).
Fenced == ~Defect1

Refused(x) == [ok |-> FALSE, next |-> x]

(* LeaseWork(j, w, r, g) mirrors journal.lease_work.  Succeeds for a work  *)
(* ID neither completed nor actively leased (L1): grants the lease to the   *)
(* owner token <<r, g>> (g = 0: the rank alone), stamped with Unix time     *)
(* and tagged "unix" (L4), and counts an attempt.                           *)
(* Defect 1 refused only completed IDs; defect 3 stamped monotonic time     *)
(* with no tag.                                                             *)
LeaseWork(j, w, r, g) ==
    IF w \in j.completed \/ (Has(j.leases, w) /\ ~Defect1)
    THEN Refused(j)
    ELSE LET lease == IF Defect3
                      THEN [owner |-> r, updated |-> mono, clock |-> "mono", gen |-> g]
                      ELSE [owner |-> r, updated |-> wall, clock |-> "unix", gen |-> g]
             n     == IF Has(j.attempts, w) THEN j.attempts[w] ELSE 0
         IN  [ok |-> TRUE,
              next |-> [j EXCEPT !.leases = Put(j.leases, w, lease),
                                 !.attempts = Put(j.attempts, w, n + 1)]]

(* CompleteWork(j, w, r, g) mirrors journal.complete_work.  Succeeds for  *)
(* an ID not completed whose active lease the token <<r, g>> owns exactly  *)
(* (L2): marks it completed and drops its lease.  Unfenced (defect 1): any *)
(* ID not yet completed.                                                    *)
OwnsWork(j, w, r, g) == Has(j.leases, w) /\ j.leases[w].owner = r /\ j.leases[w].gen = g

CompleteWork(j, w, r, g) ==
    IF w \in j.completed THEN Refused(j)
    ELSE IF Fenced /\ ~OwnsWork(j, w, r, g) THEN Refused(j)
    ELSE [ok |-> TRUE,
          next |-> [j EXCEPT !.leases = Drop(j.leases, w),
                             !.completed = j.completed \cup {w}]]

(* AbandonWork(j, w, r, g) mirrors journal.abandon_work.  Succeeds when   *)
(* the lease exists and <<r, g>> owns it exactly (L2; unfenced under       *)
(* defect 1): drops the lease, so the work may be leased again.            *)
AbandonWork(j, w, r, g) ==
    IF ~Has(j.leases, w) \/ (Fenced /\ ~OwnsWork(j, w, r, g)) THEN Refused(j)
    ELSE [ok |-> TRUE, next |-> [j EXCEPT !.leases = Drop(j.leases, w)]]

(* Recovers(updated, clock): the verdict recovery (RecoverWork,              *)
(* RecoverStates) gives a lease: Reclaimable, but under two twins.          *)
(* LegacyNotMigrated ignores the clock tag (an untagged record is compared  *)
(* as Unix time); KeepFutureLeases drops the future-dated disjunct.         *)
Recovers(updated, clock) ==
    IF LegacyNotMigrated THEN Reclaimable(updated, "unix", wall, mono)
    ELSE IF KeepFutureLeases /\ clock = "unix" THEN TTL = 0 \/ wall - updated >= TTL
    ELSE Reclaimable(updated, clock, wall, mono)

(* RecoverWork(j) mirrors journal.recover_work.  Reclaims every active      *)
(* lease the recovery rule selects; `gone` is the set of reclaimed IDs.     *)
(* The twin ReclaimEarly also reclaims a Unix lease one tick before its TTL. *)
RecoverWork(j) ==
    LET gone == {w \in DOMAIN j.leases :
                    \/ Recovers(j.leases[w].updated, j.leases[w].clock)
                    \/ /\ ReclaimEarly
                       /\ j.leases[w].clock = "unix"
                       /\ wall - j.leases[w].updated >= TTL - 1}
    IN  [gone |-> gone, next |-> [j EXCEPT !.leases = Without(j.leases, gone)]]

(* CompactJournalOp(j) mirrors journal.compact_journal: one record per      *)
(* completed ID and per active lease, each keeping its own clock tag.  The  *)
(* abstract state is unchanged; only the file shrinks.                      *)
CompactJournalOp(j) == j

-----------------------------------------------------------------------------
(***************************************************************************)
(* The state-shard coordinator (StateShardCoordinator), as pure operators  *)
(* on its value (model.coordinator).  A lease is active when it was taken  *)
(* in the coordinator's current epoch; older ones are stale (L6).          *)
(***************************************************************************)

IsActive(c, t) == Has(c.leases, t) /\ c.leases[t].epoch = c.epoch
\* The owner token <<r, g>> is exactly the active lease's owner (g = 0: rank only).
Owned(c, t, r, g) == IsActive(c, t) /\ c.leases[t].owner = r /\ c.leases[t].gen = g

NoStats == [completions |-> 0, failures |-> 0, reward |-> 0, cost |-> 0]

\* The statistics of t plus one outcome (coordinator._add).
AddStats(c, t, completions, failures, reward, cost) ==
    LET old == IF Has(c.stats, t) THEN c.stats[t] ELSE NoStats
    IN  Put(c.stats, t, [completions |-> old.completions + completions,
                         failures    |-> old.failures + failures,
                         reward      |-> old.reward + reward,
                         cost        |-> old.cost + cost])

(* LeaseState(c, t, r, g) mirrors coordinator.lease_state.  Succeeds when  *)
(* t has no active lease (L1); a stale one is replaced; the owner token is  *)
(* <<r, g>>.  Defect 2 overwrote the active owner; defect 3 stamped         *)
(* monotonic time.                                                          *)
LeaseState(c, t, r, g) ==
    IF IsActive(c, t) /\ ~Defect2 THEN Refused(c)
    ELSE LET stamp == IF Defect3 THEN mono ELSE wall
         IN  [ok |-> TRUE,
              next |-> [c EXCEPT !.leases = Put(c.leases, t,
                           [owner |-> r, updated |-> stamp, epoch |-> c.epoch, gen |-> g])]]

(* CompleteState(c, t, r, g) mirrors coordinator.complete_state (reward   *)
(* and cost 1).  Succeeds when <<r, g>> owns the active lease of t (L2):    *)
(* frees the task and books one completion.  Defect 2 completed whatever    *)
(* active lease there was, whoever owned it.                                *)
CompleteState(c, t, r, g) ==
    IF ~IsActive(c, t) THEN Refused(c)
    ELSE IF ~Owned(c, t, r, g) /\ ~Defect2 THEN Refused(c)
    ELSE [ok |-> TRUE,
          next |-> [c EXCEPT !.leases = Drop(c.leases, t),
                             !.stats = AddStats(c, t, 1, 0, 1, 1)]]

(* AbandonState(c, t, r, g) mirrors coordinator.abandon_state (cost 1).    *)
(* Succeeds when <<r, g>> owns the active lease of t (L2): frees the task   *)
(* and books one failure.                                                   *)
AbandonState(c, t, r, g) ==
    IF ~Owned(c, t, r, g) THEN Refused(c)
    ELSE [ok |-> TRUE,
          next |-> [c EXCEPT !.leases = Drop(c.leases, t),
                             !.stats = AddStats(c, t, 0, 1, 0, 1)]]

(* DiscardState(c, t, r, g) mirrors coordinator.discard_state.  Succeeds   *)
(* when <<r, g>> owns the active lease of t (L2): frees the task,           *)
(* statistics untouched.  No system action uses it yet (the model's        *)
(* successors() does not).                                                  *)
DiscardState(c, t, r, g) ==
    IF ~Owned(c, t, r, g) THEN Refused(c)
    ELSE [ok |-> TRUE, next |-> [c EXCEPT !.leases = Drop(c.leases, t)]]

(* RecoverStates(c) mirrors coordinator.recover_states (recover_expired).   *)
(* Voids every stale lease and every expired active one (the journal's rule *)
(* for Unix records); statistics are untouched.                             *)
RecoverStates(c) ==
    LET gone == {t \in DOMAIN c.leases :
                    \/ c.leases[t].epoch # c.epoch
                    \/ Recovers(c.leases[t].updated, "unix")}
    IN  [gone |-> gone, next |-> [c EXCEPT !.leases = Without(c.leases, gone)]]

(* RestartCoordinator(c) mirrors coordinator.restart_coordinator: loads the *)
(* snapshot into the next epoch (L6).  Statistics survive; every lease keeps *)
(* its owner for the record but its time is zeroed and its epoch is now     *)
(* older, so it grants no ownership and the first RecoverStates clears it.  *)
(* The twin RestartKeepsOwners moves every lease into the new epoch;        *)
(* RestartDropsStats loads no statistics.                                   *)
RestartCoordinator(c) ==
    [epoch  |-> c.epoch + 1,
     leases |-> [t \in DOMAIN c.leases |->
                   [c.leases[t] EXCEPT !.updated = 0,
                                       !.epoch = IF RestartKeepsOwners THEN c.epoch + 1 ELSE @]],
     stats  |-> IF RestartDropsStats THEN EmptyMap ELSE c.stats]

-----------------------------------------------------------------------------
(***************************************************************************)
(* The system (model.system): the master's dispatch transaction and result *)
(* handling, recovery, restarts, and clocks with faults.                   *)
(***************************************************************************)

(* Init mirrors system.initial_state: an empty journal and coordinator      *)
(* (epoch 1), no dispatch, nothing in flight, clocks at zero.               *)
Init ==
    /\ wall = 0
    /\ mono = 0
    /\ journal = [leases |-> EmptyMap, completed |-> {}, attempts |-> EmptyMap]
    /\ coordinator = [epoch |-> 1, leases |-> EmptyMap, stats |-> EmptyMap]
    /\ active = {}
    /\ net = {}
    /\ dups = 0
    /\ reboots = 0
    /\ rollbacks = 0
    /\ gnet = {}
    /\ gens = EmptyMap

(* NextGen(r) mirrors system.next_generation (Master.next_generation): the *)
(* generation of rank r's next dispatch, 0 under rank fencing: the          *)
(* coordinator's epoch (GenEpoch) with r's counter plus one.  The counter   *)
(* advances when the journal grants a lease with it (Bump), lives in the    *)
(* master's memory and restarts at a restart (Resume); the epoch, which a   *)
(* restart advances, is what keeps a token from repeating across restarts.  *)
(* Under Fence "counter" the epoch is always 1 (Master._epoch()'s fallback  *)
(* for a coordinator without one): tokens repeat after a restart.           *)
GenEpoch(c) == IF Fence = "counter" THEN 1 ELSE c.epoch
Counter(r) == IF Has(gens, r) THEN gens[r] ELSE 0
NextGen(r) == IF Generations THEN GenEpoch(coordinator) * GenBase + Counter(r) + 1 ELSE 0
\* The counters after rank r's journal lease was granted with NextGen(r).
Bump(r) == IF Generations THEN Put(gens, r, Counter(r) + 1) ELSE gens

(* Resume(j, e) mirrors system.resume_generations                          *)
(* (Master._resume_generations): a restarted master's counters, each rank's *)
(* the largest counter of epoch e among its journal leases as read from     *)
(* disk (before recovery); every other rank's restarts from 0.  With the    *)
(* epoch a restart advances, no lease is of the new one: all restart at 0.  *)
Resume(j, e) ==
    LET gs(r) == {j.leases[w].gen % GenBase :
                     w \in {x \in DOMAIN j.leases : /\ j.leases[x].owner = r
                                                    /\ j.leases[x].gen # 0
                                                    /\ j.leases[x].gen \div GenBase = e}}
        Max(S) == CHOOSE m \in S : \A n \in S : n <= m
    IN  [r \in {x \in Ranks : gs(x) # {}} |-> Max(gs(r))]

\* Send(r, w, g): the WORK payload of w to rank r, generation g, leaves; its result is in
\* flight: <<r, w>> in net under rank fencing, <<r, w, g>> in gnet under generation fencing.
Send(r, w, g) ==
    IF Generations THEN gnet' = gnet \cup {<<r, w, g>>} /\ UNCHANGED net
    ELSE net' = net \cup {<<r, w>>} /\ UNCHANGED gnet

(* DispatchWork(w, r) mirrors system.dispatch_work (Master.dispatch).       *)
(* Enabled when rank r holds fewer than Pipeline dispatches (at depth 1:    *)
(* none).  One compensating transaction, atomic: reserve target, parameter  *)
(* and algorithm (not part of the state: they always succeed here),         *)
(* LeaseWork, LeaseState, send.  If LeaseWork refuses, nothing changes.  If *)
(* LeaseState refuses, RejectDispatch undoes LeaseWork with AbandonWork     *)
(* (the attempt stays counted) and nothing is sent.  On success the master  *)
(* stores [rank, work, task, gen] with gen = NextGen(r) (both leases are   *)
(* taken by the token <<r, gen>>) and the payload is in flight: in net      *)
(* under rank fencing, in gnet with its generation under generation         *)
(* fencing.  Whenever LeaseWork grants, r's generation counter advances.    *)
DispatchWork(w, r) ==
    LET t  == TaskOf[w]
        g  == NextGen(r)
        lw == LeaseWork(journal, w, r, g)
        ls == LeaseState(coordinator, t, r, g)
    IN  /\ Cardinality(Slots(r)) < Pipeline
        /\ IF ~lw.ok THEN UNCHANGED vars
           ELSE IF ~ls.ok
           THEN \* RejectDispatch: undo the steps taken, in reverse order (the twin
                \* KeepRefusedLease skips the undo); nothing is booked, nothing is sent (but
                \* under the twins RefusalBooksFailure and RefusalSendsWork).
                /\ journal' = IF KeepRefusedLease THEN lw.next
                              ELSE AbandonWork(lw.next, w, r, g).next
                /\ gens' = Bump(r)
                /\ coordinator' = IF RefusalBooksFailure
                                  THEN [coordinator EXCEPT
                                          !.stats = AddStats(coordinator, t, 0, 1, 0, 1)]
                                  ELSE coordinator
                /\ IF RefusalSendsWork THEN Send(r, w, g) ELSE UNCHANGED <<net, gnet>>
                /\ UNCHANGED <<wall, mono, active, dups, reboots, rollbacks>>
           ELSE /\ journal' = lw.next
                /\ gens' = Bump(r)
                /\ coordinator' = ls.next
                /\ active' = active \cup {[rank |-> r, work |-> w, task |-> t, gen |-> g]}
                /\ Send(r, w, g)
                /\ UNCHANGED <<wall, mono, dups, reboots, rollbacks>>

(* InFlight(r, w): the results in flight from r about w, by generation: 0 *)
(* for <<r, w>> in net, g for <<r, w, g>> in gnet.                          *)
InFlight(r, w) ==
    (IF <<r, w>> \in net THEN {0} ELSE {}) \cup {m[3] : m \in {x \in gnet : x[1] = r /\ x[2] = w}}

(* ConsumeResult(r, w, g, keep): the network side of a delivery.  The      *)
(* result of generation g (0: the message <<r, w>> in net; else            *)
(* <<r, w, g>> in gnet) leaves the network, or, with keep (only while      *)
(* dups < MaxDups), stays in flight to be delivered again: a duplicated    *)
(* result.                                                                  *)
ConsumeResult(r, w, g, keep) ==
    /\ keep => dups < MaxDups
    /\ IF g = 0
       THEN /\ net' = IF keep THEN net ELSE net \ {<<r, w>>}
            /\ UNCHANGED gnet
       ELSE /\ gnet' = IF keep THEN gnet ELSE gnet \ {<<r, w, g>>}
            /\ UNCHANGED net
    /\ dups' = IF keep THEN dups + 1 ELSE dups

(* Found(r, w, p): the dispatches of r the result is for, as the master     *)
(* looks them up among its own (Slots(r)): by generation when the result    *)
(* presents one (p # 0), else by work ID.  At most one.                     *)
Found(r, w, p) == {d \in Slots(r) : IF p = 0 THEN d.work = w ELSE d.gen = p}

(* IsStale(r, w, p): the master drops the result unread.  Either the        *)
(* dispatch found is for another work ID (the result names a work the      *)
(* dispatch was not given), or none is found while every slot of r holds   *)
(* another dispatch (at depth 1: a result for another work ID than r's     *)
(* active dispatch, the classic late result).                              *)
IsStale(r, w, p) ==
    \/ ~NoStaleGuard /\ \E d \in Found(r, w, p) : d.work # w
    \/ Found(r, w, p) = {} /\ Cardinality(Slots(r)) >= Pipeline

(* The parts of CommitResult.  ResultToken: the owner token, the stored     *)
(* generation of the dispatch found, else the presented one.  ResultTask:   *)
(* AuthoritativeStateTask of the stored task (none when no dispatch is      *)
(* found) and the reported one.  WorkPart: the journal's call, StatePart:   *)
(* the coordinator's (CompleteWork/CompleteState on success,                *)
(* AbandonWork/AbandonState on failure), each on the current value.         *)
ResultToken(r, w, p) ==
    IF Found(r, w, p) = {} THEN p ELSE (CHOOSE d \in Found(r, w, p) : TRUE).gen
ResultTask(r, w, p, reported) ==
    AuthoritativeStateTask(IF Found(r, w, p) = {} THEN NoTask
                           ELSE (CHOOSE d \in Found(r, w, p) : TRUE).task, reported)
WorkPart(r, w, p, ok) ==
    IF ok THEN CompleteWork(journal, w, r, ResultToken(r, w, p))
    ELSE AbandonWork(journal, w, r, ResultToken(r, w, p))
StatePart(r, w, p, reported, ok) ==
    IF ok THEN CompleteState(coordinator, ResultTask(r, w, p, reported), r, ResultToken(r, w, p))
    ELSE AbandonState(coordinator, ResultTask(r, w, p, reported), r, ResultToken(r, w, p))

(* CommitResult(r, w, p, reported, ok): the containers' side of a result    *)
(* that is not stale.  The owner token is <<r, stored gen>> when a dispatch *)
(* is found, else <<r, p>> (a result the master has forgotten, e.g. across *)
(* a restart).  The task is AuthoritativeStateTask of the stored and the    *)
(* reported one (L7).  Success runs CompleteWork then CompleteState,        *)
(* failure AbandonWork then AbandonState; the state step runs only when the *)
(* work step succeeded and there is a task.  Each container refuses a token *)
(* that is not exactly its lease's owner (L2).  The dispatch found ends.    *)
CommitResult(r, w, p, reported, ok) ==
    LET found == Found(r, w, p)
        wr    == WorkPart(r, w, p, ok)
    IN  /\ journal' = wr.next
        /\ coordinator' = IF wr.ok /\ ResultTask(r, w, p, reported) # NoTask
                          THEN StatePart(r, w, p, reported, ok).next ELSE coordinator
        /\ active' = IF found = {} THEN active ELSE active \ {CHOOSE d \in found : TRUE}

(* DeliverResult(r, w, reported, ok, keep, withgen) mirrors                *)
(* system.deliver_result (Master.handle_result).  Enabled for a result in   *)
(* flight from r about w, of generation g (InFlight).  It may be late or    *)
(* reordered, report any state ID or none (NoTask: the old protocol) and,   *)
(* from gnet, present its generation (withgen: p = g) or none (p = 0: an    *)
(* old-protocol worker).  The message is consumed (ConsumeResult); a stale  *)
(* result changes nothing else (IsStale); any other is committed to the     *)
(* journal and the coordinator (CommitResult).                              *)
DeliverResult(r, w, reported, ok, keep, withgen) ==
  \E g \in InFlight(r, w) :
    LET p == IF withgen THEN g ELSE 0
    IN  /\ withgen => g # 0
        /\ ConsumeResult(r, w, g, keep)
        /\ IF IsStale(r, w, p)
           THEN UNCHANGED <<journal, coordinator, active>>
           ELSE CommitResult(r, w, p, reported, ok)
        /\ UNCHANGED <<wall, mono, reboots, rollbacks, gens>>

(* ReclaimExpired mirrors system.reclaim_expired (Master.reclaim_expired).  *)
(* Always enabled: the master's periodic recovery runs RecoverWork and      *)
(* RecoverStates with the TTL, then forgets every dispatch whose work or    *)
(* task was reclaimed.                                                      *)
ReclaimExpired ==
    LET rw == RecoverWork(journal)
        rs == RecoverStates(coordinator)
    IN  /\ journal' = rw.next
        /\ coordinator' = rs.next
        /\ active' = {d \in active : d.work \notin rw.gone /\ d.task \notin rs.gone}
        /\ UNCHANGED <<wall, mono, net, dups, reboots, rollbacks, gnet, gens>>

\* RestartFrom(j, c): the restart on the files a crashed step left (journal j, coordinator c),
\* or on the files as they are (RestartMaster): the next epoch, the generation counters
\* resumed from the journal as read from disk, then recovery with the TTL.
RestartFrom(j, c) ==
    /\ journal' = RecoverWork(j).next
    /\ coordinator' = RecoverStates(RestartCoordinator(c)).next
    /\ active' = {}
    /\ gens' = Resume(j, GenEpoch(RestartCoordinator(c)))

(* RestartMaster mirrors system.restart_master (Master.restart_master).     *)
(* Enabled while the coordinator's epoch is at most MaxRestarts. The master *)
(* is killed and started on the same journal and snapshot: its memory       *)
(* (active dispatches, generation counters) is lost; RestartFrom loads the  *)
(* next epoch (L6), resumes the counters, then RecoverWork and              *)
(* RecoverStates run with the TTL. Results in flight may still arrive.      *)
RestartMaster ==
    /\ coordinator.epoch <= MaxRestarts
    /\ RestartFrom(journal, coordinator)
    /\ UNCHANGED <<wall, mono, net, dups, reboots, rollbacks, gnet>>

(***************************************************************************)
(* Crash mid-step (issue 21 point 2).  The master writes the journal       *)
(* before the coordinator in every step, and a SIGKILL between the two     *)
(* leaves the journal's part on disk without the coordinator's.  Each      *)
(* Crash action is such a step cut after its journal part, followed by the *)
(* restart on those files (RestartMaster's effect, RestartFrom), at one    *)
(* instant; enabled while a restart is (epoch at most MaxRestarts) and the *)
(* journal part writes something (else it is RestartMaster itself).  The   *)
(* twin CoordinatorFirst writes the coordinator first: its crash leaves the*)
(* coordinator's part instead.                                             *)
(***************************************************************************)

(* CrashDispatchWork(w, r) mirrors system.crash_dispatch_work.  Enabled     *)
(* when DispatchWork(w, r) is and LeaseWork grants: the work lease is on    *)
(* disk (for a refused dispatch, before RejectDispatch gave it back), the   *)
(* state lease is not, nothing was sent.                                    *)
CrashDispatchWork(w, r) ==
    LET lw == LeaseWork(journal, w, r, NextGen(r))
        ls == LeaseState(coordinator, TaskOf[w], r, NextGen(r))
    IN  /\ coordinator.epoch <= MaxRestarts
        /\ Cardinality(Slots(r)) < Pipeline
        /\ IF CoordinatorFirst THEN ls.ok ELSE lw.ok
        /\ IF CoordinatorFirst THEN RestartFrom(journal, ls.next)
           ELSE RestartFrom(lw.next, coordinator)
        /\ UNCHANGED <<wall, mono, net, dups, reboots, rollbacks, gnet>>

(* CrashDeliverResult(r, w, reported, ok, withgen) mirrors                 *)
(* system.crash_deliver_result.  Enabled for a result DeliverResult would   *)
(* commit (not stale) whose WorkPart succeeds: the message is consumed,     *)
(* the journal's completion (or abandon) is on disk, the coordinator's      *)
(* CompleteState (AbandonState) is not: the task's statistics miss it.      *)
CrashDeliverResult(r, w, reported, ok, withgen) ==
  \E g \in InFlight(r, w) :
    LET p  == IF withgen THEN g ELSE 0
        t  == ResultTask(r, w, p, reported)
        wr == WorkPart(r, w, p, ok)
        sr == StatePart(r, w, p, reported, ok)
    IN  /\ withgen => g # 0
        /\ coordinator.epoch <= MaxRestarts
        /\ ~IsStale(r, w, p)
        /\ IF CoordinatorFirst THEN t # NoTask /\ sr.ok ELSE wr.ok
        /\ ConsumeResult(r, w, g, FALSE)
        /\ IF CoordinatorFirst THEN RestartFrom(journal, sr.next)
           ELSE RestartFrom(wr.next, coordinator)
        /\ UNCHANGED <<wall, mono, reboots, rollbacks>>

(* CrashReclaimExpired mirrors system.crash_reclaim_expired.  Enabled when  *)
(* RecoverWork reclaims something: its reclaims are on disk, RecoverStates' *)
(* are not.  The restart at the same instant recovers the same leases       *)
(* again, so its successor is RestartMaster's; stated so that every         *)
(* crashed step of the master is an action of its own.                      *)
CrashReclaimExpired ==
    LET rw == RecoverWork(journal)
        rs == RecoverStates(coordinator)
    IN  /\ coordinator.epoch <= MaxRestarts
        /\ IF CoordinatorFirst THEN rs.gone # {} ELSE rw.gone # {}
        /\ IF CoordinatorFirst THEN RestartFrom(journal, rs.next)
           ELSE RestartFrom(rw.next, coordinator)
        /\ UNCHANGED <<wall, mono, net, dups, reboots, rollbacks, gnet>>

(* Tick: enabled while both clocks are below MaxWall; one tick passes on    *)
(* both.                                                                    *)
Tick ==
    /\ wall < MaxWall
    /\ mono < MaxWall
    /\ wall' = wall + 1
    /\ mono' = mono + 1
    /\ UNCHANGED <<journal, coordinator, active, net, dups, reboots, rollbacks, gnet, gens>>

(* RollbackClock(to): enabled while rollbacks < MaxRollbacks, for any tick  *)
(* before the wall clock; the wall clock is stepped back to it.             *)
RollbackClock(to) ==
    /\ rollbacks < MaxRollbacks
    /\ to \in 0..(wall - 1)
    /\ wall' = to
    /\ rollbacks' = rollbacks + 1
    /\ UNCHANGED <<mono, journal, coordinator, active, net, dups, reboots, gnet, gens>>

(* Reboot: enabled while reboots < MaxReboots; the monotonic origin resets. *)
Reboot ==
    /\ reboots < MaxReboots
    /\ mono' = 0
    /\ reboots' = reboots + 1
    /\ UNCHANGED <<wall, journal, coordinator, active, net, dups, rollbacks, gnet, gens>>

(* CompactJournal mirrors journal.compact_journal (WorkLeaseJournal.compact).*)
(* Always enabled; the abstract state is unchanged (a stuttering step).     *)
CompactJournal ==
    /\ journal' = CompactJournalOp(journal)
    /\ UNCHANGED <<wall, mono, coordinator, active, net, dups, reboots, rollbacks, gnet, gens>>

(* LegacyRecord(w, r) mirrors journal.legacy_record.  A journal written     *)
(* before F314 is opened: enabled only while the journal holds no record at *)
(* all (and LegacyRecords holds), so at most one legacy record arrives,    *)
(* before any F314 lease.  It carries a monotonic stamp from another boot,  *)
(* no clock tag, and counts as an attempt.                                  *)
LegacyRecord(w, r) ==
    /\ LegacyRecords
    /\ DOMAIN journal.attempts = {}
    /\ journal' = [journal EXCEPT
                     !.leases = Put(journal.leases, w,
                                    [owner |-> r, updated |-> LegacyStamp, clock |-> "legacy",
                                     gen |-> 0]),
                     !.attempts = Put(journal.attempts, w, 1)]
    /\ UNCHANGED <<wall, mono, coordinator, active, net, dups, reboots, rollbacks, gnet, gens>>

(* Next mirrors system.successors: every action with every argument.        *)
Next ==
    \/ \E r \in Ranks, w \in Works : DispatchWork(w, r)
    \/ \E r \in Ranks, w \in Works, reported \in Tasks \cup {NoTask},
          ok \in BOOLEAN, keep \in BOOLEAN, withgen \in BOOLEAN :
             DeliverResult(r, w, reported, ok, keep, withgen)
    \/ ReclaimExpired
    \/ RestartMaster
    \/ \E r \in Ranks, w \in Works : CrashDispatchWork(w, r)
    \/ \E r \in Ranks, w \in Works, reported \in Tasks \cup {NoTask},
          ok \in BOOLEAN, withgen \in BOOLEAN :
             CrashDeliverResult(r, w, reported, ok, withgen)
    \/ CrashReclaimExpired
    \/ Tick
    \/ \E to \in 0..MaxWall : RollbackClock(to)
    \/ Reboot
    \/ CompactJournal
    \/ \E w \in Works, r \in Ranks : LegacyRecord(w, r)

Spec == Init /\ [][Next]_vars

(* WithinConstraint mirrors system.within_constraint, the state constraint  *)
(* (CONSTRAINT in the configs): at most MaxAttempts leases of one work ID   *)
(* and MaxLeases in all.                                                    *)
WithinConstraint ==
    /\ \A w \in DOMAIN journal.attempts : journal.attempts[w] <= MaxAttempts
    /\ MapSum(journal.attempts) <= MaxLeases

-----------------------------------------------------------------------------
(***************************************************************************)
(* L1-L7 of F314 (model.invariants), each one condition, with F314's words.*)
(***************************************************************************)

\* L1: A local work/state ID has at most one active worker at any moment.
L1_SingleOwner ==
    \A d1, d2 \in active :
        d1 # d2 => /\ d1.work # d2.work
                   /\ d1.task # d2.task

\* L2: complete, abandon and discard change state only when the worker is the current owner.
\* Stated over what it protects: every active dispatch still owns its work
\* lease and its active state lease; the owner is the whole token <<rank, gen>>
\* (gen is always 0 under rank fencing).
L2_OwnerFenced ==
    \A d \in active :
        /\ OwnsWork(journal, d.work, d.rank, d.gen)
        /\ Owned(coordinator, d.task, d.rank, d.gen)

\* L1: A work lease is held only for a dispatch the master holds: none is left behind by a refusal or a forgotten dispatch.
\* But across a restart (a crash mid-step leaves its lease to expire), every journal lease a
\* step grants (but a legacy record) belongs to a dispatch that step starts, and every dispatch
\* a step ends holds no work lease after it.
L1OrphanStep ==
    coordinator'.epoch = coordinator.epoch =>
       /\ \A w \in DOMAIN journal'.leases :
             LET x == journal'.leases[w]
             IN  (/\ ~(Has(journal.leases, w) /\ journal.leases[w] = x)
                  /\ x.clock # "legacy")
                    => \E d \in active' \ active :
                          d.rank = x.owner /\ d.work = w /\ d.gen = x.gen
       /\ \A d \in active \ active' : ~OwnsWork(journal', d.work, d.rank, d.gen)

\* L1: A work lease is held only for a dispatch the master holds: none is left behind by a refusal or a forgotten dispatch.
L1_NoOrphanLease == [][L1OrphanStep]_vars

\* L2: complete, abandon and discard change state only when the worker is the current owner.
\* Every lease a step removes or replaces, in the journal or the coordinator, goes by a
\* result its owner's rank delivered in that step, by recovery of an expired (or stale)
\* lease, or by a restart's voiding.  Expired is F314's rule, whatever the Flavour.
Delivered ==
    {m[1] : m \in {x \in net : dups' # dups \/ x \notin net'}}
       \cup {m[1] : m \in {x \in gnet : dups' # dups \/ x \notin gnet'}}
Expired(updated, clock) ==
    \/ TTL = 0
    \/ clock # "unix"
    \/ updated - wall > TTL
    \/ wall - updated >= TTL
L2RemovalStep ==
    /\ \A w \in DOMAIN journal.leases :
          LET x == journal.leases[w]
          IN  ~(Has(journal'.leases, w) /\ journal'.leases[w] = x)
                 => x.owner \in Delivered \/ Expired(x.updated, x.clock)
    /\ \A t \in DOMAIN coordinator.leases :
          LET y == coordinator.leases[t]
          IN  ~(Has(coordinator'.leases, t) /\ coordinator'.leases[t] = y)
                 => \/ coordinator'.epoch # coordinator.epoch
                    \/ y.epoch # coordinator.epoch
                    \/ y.owner \in Delivered
                    \/ Expired(y.updated, "unix")

\* L2: complete, abandon and discard change state only when the worker is the current owner.
L2_RemovalFenced == [][L2RemovalStep]_vars

\* L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
\* A frame condition on every step, in three parts, one per thing a refusal could change.
\* Attempts and leases (L3Leases): a work ID held or completed before the step keeps its
\* attempts and is not leased again (its lease may go: that is L2's business), and an active
\* state lease is not replaced within one epoch.  Failures (L3Failures): within one epoch, a
\* task's statistics change only in a step that frees its active lease (by its owner's result:
\* L2_RemovalFenced).  Network (L3Network): every result a step puts in flight belongs to a
\* dispatch that step starts, so a refused dispatch sends nothing.  Persisted events: the journal
\* and the coordinator are the replay of their records, each kind with its footprint here (a
\* lease record counts an attempt, a done record completes, a reclaim drops a lease; a
\* coordinator record sets or drops a lease or books statistics), so a refusal that persists
\* an event breaks one of the parts; a record that replays to nothing is not in the abstract
\* state (tla/README.md, "L3: failures, network and persisted events": the refusal probes
\* check the implementation's files).
L3Leases ==
    /\ \A w \in Works :
          (Has(journal.leases, w) \/ w \in journal.completed) =>
             /\ Has(journal'.attempts, w) = Has(journal.attempts, w)
             /\ Has(journal.attempts, w) => journal'.attempts[w] = journal.attempts[w]
             /\ (Has(journal.leases, w) /\ Has(journal'.leases, w))
                   => journal'.leases[w] = journal.leases[w]
    /\ \A t \in Tasks :
          (/\ IsActive(coordinator, t)
           /\ Has(coordinator'.leases, t)
           /\ coordinator'.leases[t] # coordinator.leases[t])
             => coordinator'.epoch # coordinator.epoch
\* Whether the step changes the statistics of t (an entry appears, goes or differs).
StatsChanged(t) ==
    \/ Has(coordinator.stats, t) # Has(coordinator'.stats, t)
    \/ Has(coordinator.stats, t) /\ coordinator'.stats[t] # coordinator.stats[t]
L3Failures ==
    coordinator'.epoch = coordinator.epoch =>
        \A t \in Tasks :
            StatsChanged(t) => IsActive(coordinator, t) /\ ~Has(coordinator'.leases, t)
L3Network ==
    /\ \A m \in net' \ net : \E d \in active' \ active : d.rank = m[1] /\ d.work = m[2]
    /\ \A m \in gnet' \ gnet : \E d \in active' \ active : <<d.rank, d.work, d.gen>> = m
L3Step == L3Leases /\ L3Failures /\ L3Network

\* L3: A refused duplicate lease changes nothing: no attempts, leases, failures or persisted events.
L3_RefusalChangesNothing == [][L3Step]_vars

\* L4: Persisted expiry uses a Unix clock, comparable across reboots, and records its clock domain.
\* Stated over what it protects: a reboot (the monotonic origin reset) changes no lease's
\* recovery verdict, journal or coordinator, so none becomes a permanent future lease across it
\* (F314's scenario: "not even lease_ttl=0 reclaims it").
L4RebootStep ==
    reboots' # reboots =>
        /\ \A w \in DOMAIN journal.leases :
              LET x == journal.leases[w]
              IN  Reclaimable(x.updated, x.clock, wall, mono)
                     = Reclaimable(x.updated, x.clock, wall', mono')
        /\ \A t \in DOMAIN coordinator.leases :
              LET y == coordinator.leases[t]
              IN  Reclaimable(y.updated, "unix", wall, mono)
                     = Reclaimable(y.updated, "unix", wall', mono')

\* L4: Persisted expiry uses a Unix clock, comparable across reboots, and records its clock domain.
L4_UnixClockDomain == [][L4RebootStep]_vars

\* L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
L5_LegacyMigratable ==
    \A w \in DOMAIN journal.leases :
        journal.leases[w].clock # "unix" =>
            Reclaimable(journal.leases[w].updated, journal.leases[w].clock, wall, mono)

\* Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
NoStuckLease ==
    LET Frees(updated, clock) ==
            \E d \in 0..(2 * TTL) : Reclaimable(updated, clock, wall + d, mono + d)
    IN  /\ \A w \in DOMAIN journal.leases :
              Frees(journal.leases[w].updated, journal.leases[w].clock)
        /\ \A t \in DOMAIN coordinator.leases :
              coordinator.leases[t].epoch = coordinator.epoch =>
                 Frees(coordinator.leases[t].updated, "unix")

(* L5 and NoStuckLease above are about the rule Reclaimable, which has the  *)
(* clock tag and the future date as disjuncts: they cannot fail unless that  *)
(* function does (issue 21 point 2).  The two below are about the state     *)
(* machine: what a recovery step leaves.  A recovery is ReclaimExpired or a *)
(* restart's (RestartMaster and every Crash action run RecoverWork and      *)
(* RecoverStates on the files; the epoch changes only there).               *)
Recovery == ReclaimExpired \/ coordinator'.epoch # coordinator.epoch

\* L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
\* Stated about the state machine: no journal record without the Unix tag outlives a recovery.
L5MigratedStep ==
    Recovery => \A w \in DOMAIN journal'.leases : journal'.leases[w].clock = "unix"

\* L5: A legacy monotonic record without a clock tag is migratable and never becomes a permanent future lease.
L5_LegacyMigrated == [][L5MigratedStep]_vars

\* Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
\* Stated about the state machine: every Unix journal lease and every active state lease a
\* recovery keeps is dated within [now - TTL, now + TTL] (TTL = 0: none is kept), so it expires
\* within 2*TTL ticks of the wall clock, whatever rollbacks and reboots came before.
Fresh(updated) == -TTL <= wall' - updated /\ wall' - updated < TTL
NoStuckStep ==
    Recovery =>
        /\ \A w \in DOMAIN journal'.leases :
              journal'.leases[w].clock = "unix" => Fresh(journal'.leases[w].updated)
        /\ \A t \in DOMAIN coordinator'.leases :
              coordinator'.leases[t].epoch = coordinator'.epoch
                 => Fresh(coordinator'.leases[t].updated)

\* Beyond F314: no lease stays stuck after a wall-clock rollback; each is reclaimable within 2*TTL.
NoStuckLeaseRecovered == [][NoStuckStep]_vars

\* Beyond F314: per task, the coordinator never books more completions than the journal holds completed work IDs of it.
CompletionsAccounted ==
    \A t \in DOMAIN coordinator.stats :
        coordinator.stats[t].completions <= Cardinality({w \in journal.completed : TaskOf[w] = t})

\* L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
\* Every active state lease belongs to a live dispatch of its owner (token) in this epoch.
L6_NoInheritedOwnership ==
    \A t \in DOMAIN coordinator.leases :
        coordinator.leases[t].epoch = coordinator.epoch =>
            \E d \in active : /\ d.rank = coordinator.leases[t].owner
                             /\ d.task = t
                             /\ d.gen = coordinator.leases[t].gen

\* L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
\* No step, a restart included, ever loses a statistic.
L6StatsStep ==
    \A t \in DOMAIN coordinator.stats :
        /\ Has(coordinator'.stats, t)
        /\ \A f \in {"completions", "failures", "reward", "cost"} :
              coordinator'.stats[t][f] >= coordinator.stats[t][f]

\* L6: A coordinator restart voids old MPI rank ownership; statistics survive, execution ownership is not inherited.
L6_StatisticsSurvive == [][L6StatsStep]_vars

\* L7: A state ID in a result never overrides the authoritative ID the master stored at dispatch.
\* When a rank's dispatch ends within one epoch, the task the master stored for
\* it is the one released in that step: its owner token holds no active lease of it.
L7Step ==
    coordinator'.epoch = coordinator.epoch =>
        \A d \in active :
            d \notin active' => ~Owned(coordinator', d.task, d.rank, d.gen)

\* L7: A state ID in a result never overrides the authoritative ID the master stored at dispatch.
L7_AuthoritativeStateId == [][L7Step]_vars

=============================================================================
