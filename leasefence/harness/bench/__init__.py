"""Side-by-side benchmarks: every figure is a ratio of contenders measured in the same run.

Machines are noisy (the CI boxes and the 2-core development machines are shared), so nothing
here is a timed test. Each benchmark runs its contenders interleaved (A, B, C, A, B, C, ...),
repeats, takes each contender's median and reports the ratio of medians beside its goal. The
goals are printed, never enforced: ``leasefence bench`` exits non-zero only on an error.

Benchmarks (``BENCHMARKS``):

``journal``       durable lease+complete pairs per second: ``WorkLeaseJournal`` against SQLite
                  (WAL, ``synchronous=FULL``, same directory) and against the disk's fdatasync
                  limit, per call and for group commit.
``recovery``      journal open time against length (10³…10⁵, 10⁶ with ``--full``), before and
                  after compaction, and of the same records as a run writes them (batch lines
                  of 32, clock readings stamped to 10 µs); records replayed per second; a
                  compacted journal of 10,000 active leases.
``scale``         the master's items per second and peak memory (``tracemalloc``) per item,
                  in process over the memory journal, at 10³ and 3·10³ items (10⁴ with
                  ``--full``): flat means the cost per item does not grow with the run.
``dispatch``      master round trips per second against a bare mpi4py loop and
                  ``MPIPoolExecutor``, and pipeline depth 2 against depth 1 (issue 12): short
                  ``mpiexec -n 3`` jobs of ``mpi_job`` (``--ranks N``: ``-n N``).
``jobs``          whole jobs, start-up included, as a user runs them: ``leasefence run
                  --worker trivial`` (durable) against ``MPIPoolExecutor`` mapping the identity,
                  2,000 and 20,000 tasks on ``mpiexec -n 4`` (issue 19, point 1), timed from
                  outside.
``verification``  the model checker's states per second against TLC's on the same bounds;
                  conformance steps per second.
``trace``         ``trace check`` steps per second on synthesized runs of 10³, 10⁴, 10⁵ items.

Run with ``make bench`` or ``leasefence bench [--json PATH] [--full | --tiny] [--only NAMES]``.
This package imports none of its modules (import each from its own): ``mpi_job`` must load the
compiled dispatcher, when asked to, before anything imports the interpreted one. One module per
concern: ``runner`` (the run and its report), ``common`` (sizes, interleaving,
medians), ``goals`` (the goals and the other figures), one module per benchmark (``journal``,
``recovery``, ``scale``, ``dispatch``, ``jobs``, ``verification``, ``trace``), ``pool_map`` (the
``jobs`` pool contender's script, run by path so that it imports nothing of leasefence), and
two that only the dispatch benchmark runs:

- ``mpi_job`` is one contender of the dispatch benchmark as an MPI job
  (``mpiexec -n 3 python -m leasefence.harness.bench.mpi_job CONTENDER --tasks N --out FILE``;
  the pool contender runs under ``python -m mpi4py.futures -m ...``). It ships in the package,
  so ``leasefence bench`` works from an installed wheel. Its docstring says what each contender
  is. ``master-depth1`` and ``master-depth2`` are the in-memory master with generation fencing
  at pipeline depth 1 and 2, otherwise identical; ``leasefence bench`` prints their ratio as
  ``depth 2 / depth 1 throughput`` (``depth2_over_depth1`` in the JSON: round trips per second
  of depth 2 over depth 1, medians; above 1 means pipelining helps). Each master contender's
  result also records how deep it really ran (``max_in_flight_per_rank``,
  ``mean_in_flight_per_rank``) and rank 0's CPU time (``master_cpu_s``); the MPI test requires
  the depth-2 contender to reach 2, so a silent fallback to depth 1 fails it. One run
  (``leasefence bench --only dispatch``, 2 cores, trivial tasks): 3.42× (2.85× and 3.78× in two
  more runs), because depth 1 waits in the polling loops' sleeps and depth 2 keeps the next
  WORK queued at each worker (docs/performance.md, "Pipeline depth", says more).
  The goal *in-memory master / bare blocking loop* reads ``master-run``, the in-memory master
  as ``leasefence run`` configures it by default (generation fence, depth by TTL up to
  pipeline 64, group commit), since that is what users run; ``master-memory`` (depth 1, rank
  fence) is printed beside it as the latency figure, and ``bare-deep`` (a bare loop as deep
  as the run's pipeline) as the fairer partner of a pipelined master. ``bare-transport``
  splits the goal's ratio in two: ``master-run`` over it is what the master's decisions cost
  (the same waiting loop, the real workers, the WORK bytes made before the clock starts), and
  it over ``bare`` what the Python MPI path, the wire and the worker loop cost; beside them
  the CPU a round trip takes rank 0 and the workers (``cpu_us_per_round_trip``).
  ``master-run``, ``bare-deep``, ``bare`` and ``bare-transport`` each run ten times
  ``--tasks`` round trips (``LONG_JOBS``): a bare job of a few milliseconds measured the
  scheduler, not the loop.
- ``memory_journal`` is the benchmark-only in-memory journal (the master's ``Journal``
  protocol, no disk) that isolates the cost of the master's logic; it keeps the generation part
  of the owner token too, for the depth-2 contender.
"""
