"""The implementation of F314: work journal, state-shard coordinator, MPI master and workers."""
