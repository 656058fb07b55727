-------------------------- MODULE MCLeaseFenceLive --------------------------
(***************************************************************************)
(* Model-checking bounds for LeaseFenceLive (the live configs MCLeaseFence- *)
(* Live.cfg and BuggyLive_*.cfg).  Like MCLeaseFence.tla it only supplies   *)
(* what a .cfg cannot write (TaskOf) and the overrides of the planted bugs; *)
(* it never changes the spec's logic.                                      *)
(***************************************************************************)
EXTENDS LeaseFenceLive, TLC

\* Two work IDs sharing one state task (as MCTaskOfSmall in MCLeaseFence.tla): with
\* MaxAttempts = 2 each item can be leased, reclaimed and leased again, and a dispatch can
\* be refused because the other item holds the task.
MCTaskOfLive == ("w1" :> "s1" @@ "w2" :> "s1")

\* Override of Starve (`Starve <- MCStarveW2`): the dispatcher never offers w2.
MCStarveW2 == {"w2"}

\* Override of RecoveryHaltsAfterRollback (`RecoveryHaltsAfterRollback <- MCTrue`).
MCTrue == TRUE
=============================================================================
