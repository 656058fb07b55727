"""Crash consistency of the work journal and the coordinator snapshot (``leasefence crashcheck``):
SIGKILL at every file system call, and simulated power loss over every prefix of the recorded file
operations, each recovered directory checked against the reference model.

How it works (issue 8), one module per part:

Workloads (``workloads``)
    A seeded sequence of calls on one ``WorkLeaseJournal`` (lease, complete, abandon, recover,
    compact, commit, reopen; ``sync="always"`` or ``"group"``; sometimes over a journal holding a
    legacy record, perhaps without its newline) or on one ``StateShardCoordinator`` (lease, complete, abandon, discard,
    recover_expired, save, commit, restart; ``autosave`` on or off: with it every change appends
    its record to the snapshot's log, without it ``commit`` appends the changes since the last
    write together and ``save`` writes a checkpoint). The clock is ``BASE + tick`` with a
    tick fixed by the workload, so the reference model (``leasefence.model``) can replay the
    same calls in integer ticks and predict every result and every state.

The oracle (``oracle``)
    The model turns the workload into the sequence of states the files may hold: for the journal
    the state after each record (a crash may keep any prefix of the records written), for the
    coordinator each persisted state (a checkpoint, or a commit of the log: a crash keeps the
    old one or the new one). Every call
    runs in a forked child (``child``) that writes ``A <step> <result>`` to a pipe only after the
    call returned. A crash after the acknowledgement of step ``a`` with step ``a + 1`` in flight
    must recover to a state between "everything durable at the acknowledgement of ``a``" and
    "everything step ``a + 1`` could have written". Fewer is a *lost acknowledged operation*;
    more, or a state that is no prefix at all, is a violation too. Each recovered state is
    mapped onto the model's ``State`` by ``conformance.refinement`` (generations included) and
    checked with ``model.invariants`` (TypeOK, L1-L6, NoStuckLease, CompletionsAccounted but on
    the coordinator alone; L3 and L6's statistics across the crash, from the last durable
    state). Opening may raise nothing at all: a crash must never produce ``JournalCorrupt`` or
    ``SnapshotError``. After a torn tail, one more lease
    is written and the journal reopened, to check the tail is cut and kept in ``.broken``.

Family ``kill`` (``runner.check_kill``)
    The child counts its mutating calls (``os.open`` with ``O_CREAT``, ``os.write``,
    ``os.fsync``, ``os.ftruncate``, ``os.replace``, ``os.rename``, ``os.unlink``; wrapped by
    ``instrument``). For every ``k`` the parent runs the workload again; after call ``k`` the
    child reports and blocks on a pipe, and the parent SIGKILLs it there: after every write and
    every fsync, at every step of compaction, of snapshot saving and of torn-tail cutting.

Family ``power`` (``runner.check_power``, ``disk``)
    The child records the file operations (creates, writes with their offsets, fsyncs of files
    and of the directory, renames, truncates, unlinks) and the acknowledgements between them.
    The parent rebuilds the directory after a simulated power loss at every prefix ``p``: every
    operation made durable by a later fsync (of the file for data, of the directory for names)
    is kept; of the others, a suffix from a chosen operation ``q`` on is lost. Three models
    of write ``q`` (``disk.MODELS``, chosen with ``--model``, figures printed per model):
    ``whole`` (lost whole), ``torn`` (kept cut at every byte; at 64 spread offsets for writes
    longer than 256 bytes) and ``sectors`` (any subset of its 512-byte sectors kept, as ext4
    and XFS may: the file grown to the write's end, zeros in the other sectors where it grew;
    every subset for writes of up to 8 sectors, 64 seeded ones for longer writes). So unsynced
    tails are lost, renames not yet made durable by a directory fsync may be undone, and
    writes are torn or reach the disk in pieces. States are deduplicated before reopening.

Family ``master`` (``master.check_master``, issue 19)
    The group-commit master itself (``Master.open(..., group_commit=True)`` and
    ``master_dispatch`` over an in-process transport), killed at every file call and cut by
    power loss under every model: every WORK it sent must find its leases on disk, every
    completion it told must be in the journal and booked by the coordinator. One workload per
    round (``master-<items>-d<depth>-s<seed>``).

The figures and violations of a run are a ``report.Report``; ``runner.run`` and
``runner.replay`` are the entry points, ``layer`` the row of ``leasefence verify``.
"""
