"""The executable reference model of F314: pure, immutable, and explored exhaustively.

No I/O, no clocks, no MPI, no imports from ``leasefence.impl`` (a test enforces this). Each
action returns its result and the next state, so the implementation can be compared call by call.
"""
