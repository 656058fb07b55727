"""Harnesses that exercise the implementation from outside: the fault campaign on real MPI jobs,
crash experiments, benchmarks, and the planted-bug (mutant) gate."""
