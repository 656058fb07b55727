---------------------------- MODULE MCLeaseFence ----------------------------
(***************************************************************************)
(* Model-checking bounds for LeaseFence.  This module only supplies the    *)
(* constants a .cfg file cannot write (the function TaskOf); it never      *)
(* changes the spec's logic.  The configs MC*.cfg and Buggy*.cfg choose    *)
(* every other constant.                                                   *)
(***************************************************************************)
EXTENDS LeaseFence, TLC

\* The model's default task map (Bounds.task_of): two work IDs share the
\* state task s1 (different exact-work payloads, same state), one more has s2.
MCTaskOf == ("w1" :> "s1" @@ "w2" :> "s1" @@ "w3" :> "s2")

\* A smaller map for the must-fail configs: one shared task and one more.
MCTaskOfSmall == ("w1" :> "s1" @@ "w2" :> "s1")

\* Overrides of the spec's Pipeline and Fence (`Pipeline <- MCPipeline2` in a config):
\* two dispatches per rank, and the owner tokens.
MCPipeline2 == 2
MCFenceRank == "rank"
MCFenceGeneration == "generation"
\* Generations without the epoch (Master._epoch()'s fallback of 1): they repeat after a restart.
MCFenceCounter == "counter"

\* Override of the spec's LegacyRecords (`LegacyRecords <- MCNoLegacy`): no journal written
\* before F314 is ever opened.
MCNoLegacy == FALSE
=============================================================================
