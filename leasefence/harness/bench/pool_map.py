"""The ``jobs`` benchmark's MPIPoolExecutor contender: map the identity over ``range(N)``.

Run as a script, not a module, so that its start-up is mpi4py's alone (nothing of leasefence
is imported)::

    mpiexec -n 4 python -m mpi4py.futures .../pool_map.py N

The function mapped is ``int``, the identity on ints: a builtin, pickled by name, so the worker
ranks import nothing either. Exits 1, saying so, when a result differs from its input, and 2
when its argument is not a count of tasks.
"""

import sys


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not (argv[0].isascii() and argv[0].isdigit()):  # (not '²')
        print(
            f"pool_map: usage: pool_map.py N (a count of tasks), got {argv!r:.80}", file=sys.stderr
        )
        return 2
    tasks = int(argv[0])
    from mpi4py.futures import MPIPoolExecutor  # (imported here: importing it starts MPI)

    with MPIPoolExecutor() as pool:
        results = list(pool.map(int, range(tasks)))
    if results != list(range(tasks)):
        print(f"pool_map: {tasks} tasks, wrong results", file=sys.stderr)
        return 1
    print(f"pool_map: {tasks} tasks mapped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
