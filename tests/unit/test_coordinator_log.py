"""The coordinator's file as a checkpoint and an append-only log: what a change writes, replay,
checkpoints, torn tails, group commit, and snapshots written before the log existed."""

from __future__ import annotations

import json
import os
import shutil
import zlib
from pathlib import Path

import pytest

from leasefence.impl import coordinator as impl_module
from leasefence.impl.coordinator import StateShardCoordinator, Stats
from leasefence.impl.errors import SnapshotError

DATA = Path(__file__).parent.parent / "data"
#: Written by the coordinator of commit 35f9af8 (before issue 19): epoch 2, s1 leased with a
#: generation, s3 leased without, statistics of s1 (a completion), s2 (a failure), s3 (none).
OLD = DATA / "coordinator-snapshot-before-issue-19.json"


class Clock:
    """A settable Unix clock (tests never sleep)."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _records(path: Path) -> list[dict[str, object]]:
    """The records after the checkpoint (each on its own line)."""
    text = path.read_text()
    _, end = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
    return [json.loads(line) for line in text[end:].splitlines() if line.strip()]


def test_a_snapshot_written_before_the_log_opens_with_statistics_and_epoch_carried_over(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    shutil.copyfile(OLD, path)
    c = StateShardCoordinator(path, clock=Clock())
    assert c.epoch == 3
    assert c.stats("s1") == Stats(completions=1, reward=1.5, cost=0.25)
    assert c.stats("s2") == Stats(failures=1, cost=0.5)
    assert c.stats("s3") == Stats()
    assert {t: (x.owner, x.updated, x.epoch, x.generation) for t, x in c.leases.items()} == {
        "s1": (3, 0.0, 2, (2, 7)),
        "s3": (1, 0.0, 2, None),
    }
    assert c.active_owner("s1") is None  # L6: the old epoch's leases grant nothing
    assert c.lease("s2", 4)
    again = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert again.epoch == 4
    assert again.leases["s2"].owner == 4
    assert again.stats("s1") == Stats(completions=1, reward=1.5, cost=0.25)


def test_a_change_appends_one_record_and_never_rewrites_the_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    for i in range(20):
        assert c.lease(f"s{i}", 1)
    before, inode = path.read_bytes(), os.stat(path).st_ino
    assert c.complete("s3", 1, reward=2.0)
    after = path.read_bytes()
    assert os.stat(path).st_ino == inode
    assert after.startswith(before)
    assert after[len(before) :].count(b"\n") == 1
    assert _records(path)[-1]["op"] == "free"


def test_replay_of_the_log_gives_the_state_every_acknowledged_change_left(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    clock = Clock(5_000.0)
    c = StateShardCoordinator(path, clock=clock)
    assert c.lease("a", 1)
    assert c.lease("b", 2, generation=(1, 9))
    assert c.complete("a", 1, reward=0.1, cost=0.2)
    assert c.abandon("b", 2, cost=0.3, generation=(1, 9))
    assert c.lease("c", 3)
    assert c.lease("a", 2)
    assert c.discard("a", 2)
    clock.now = 9_000.0
    assert c.recover_expired(10.0) == ["c"]
    assert c.lease("d", 1)
    assert [r["op"] for r in _records(path)] == [
        "lease", "lease", "free", "free", "lease", "lease", "free", "void", "lease",
    ]  # fmt: skip
    reloaded = StateShardCoordinator(path, clock=clock, autosave=False)
    assert reloaded.epoch == 2
    assert dict(reloaded.statistics) == dict(c.statistics)
    assert {t: (x.owner, x.epoch) for t, x in reloaded.leases.items()} == {"d": (1, 1)}


def test_the_log_is_folded_into_a_checkpoint_once_it_outgrows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(impl_module, "CHECKPOINT_MIN", 4)
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    for i in range(4):
        assert c.lease(f"s{i}", 1)
    assert len(_records(path)) == 4
    assert c.lease("s4", 1)  # the fifth record is one too many: a checkpoint holds everything
    assert _records(path) == []
    assert sorted(json.loads(path.read_text())["leases"]) == ["s0", "s1", "s2", "s3", "s4"]
    for i in range(5):  # now the checkpoint holds 10 entries: 10 records fit after it
        assert c.complete(f"s{i}", 1)
    assert len(_records(path)) == 5


def test_changes_between_commits_share_one_append(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.pending()  # nothing on disk yet: the first commit writes a checkpoint
    c.commit()
    assert not c.pending()
    size = path.stat().st_size
    assert c.lease("s1", 1)
    assert c.lease("s2", 2)
    assert c.complete("s1", 1)
    assert path.stat().st_size == size  # nothing written before the commit
    assert c.pending()
    c.commit()
    (batch,) = _records(path)  # one write, one line: a crash can damage only the last line
    assert batch["op"] == "batch"
    assert [r["op"] for r in batch["records"]] == ["lease", "lease", "free"]  # type: ignore[index]
    assert StateShardCoordinator(path, clock=Clock(), autosave=False).stats("s1").completions == 1


def test_a_batch_damaged_by_a_crash_is_a_torn_tail_and_none_of_its_records_applies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.lease("s1", 1)
    c.commit()  # the checkpoint of epoch 1, holding s1's lease
    good = path.read_bytes()
    assert c.complete("s1", 1, reward=3.0)
    assert c.lease("s2", 2)
    c.commit()
    whole = path.read_bytes()
    # The disk kept the batch's first and last bytes but not a sector in between (zeros).
    middle = len(good) + (len(whole) - len(good)) // 2
    path.write_bytes(whole[:middle] + bytes(8) + whole[middle + 8 :])
    again = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert again.leases["s1"].owner == 1  # the batch applied none of its records
    assert "s2" not in again.leases
    assert again.stats("s1") == Stats()


def test_a_torn_last_record_is_ignored_and_gone_from_the_checkpoint_of_the_next_epoch(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    good = path.read_bytes()
    assert c.complete("s1", 1, reward=3.0)
    torn = path.read_bytes()[: len(good) + 20]  # the completion's record, cut by a crash
    path.write_bytes(torn)
    manual = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert manual.stats("s1") == Stats()
    assert manual.leases["s1"].owner == 1
    assert path.read_bytes() == torn  # opening alone writes nothing
    assert manual.lease("s2", 2)
    manual.commit()  # the first write of epoch 2 is its checkpoint: the torn bytes are gone
    assert _records(path) == []
    assert StateShardCoordinator(path, clock=Clock(), autosave=False).leases["s2"].epoch == 2


def test_a_bad_record_followed_by_a_good_one_is_refused_and_left_untouched(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    assert c.lease("s2", 1)
    lines = _lines(path)
    lines[-2] = lines[-2].replace('"owner": 1', '"owner": 7')  # the checksum no longer matches
    raw = ("\n".join(lines) + "\n").encode()
    path.write_bytes(raw)
    with pytest.raises(SnapshotError, match=r"checksum mismatch.*a good one follows"):
        StateShardCoordinator(path, clock=Clock())
    assert path.read_bytes() == raw


def test_a_record_of_another_epoch_than_its_checkpoint_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock())
    assert c.lease("s1", 1)
    assert c.lease("s2", 1)
    doc = _records(path)[0]
    doc.pop("crc")
    doc["epoch"] = 5
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"))
    lines = _lines(path)
    lines[-2] = f'{text[:-1]},"crc":"{zlib.crc32(text.encode()):08x}"}}'
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SnapshotError, match="epoch 5 after a checkpoint of epoch 1"):
        StateShardCoordinator(path, clock=Clock())


def test_a_manual_commit_after_loading_writes_a_checkpoint_of_the_new_epoch(
    tmp_path: Path,
) -> None:
    path = tmp_path / "state.json"
    shutil.copyfile(OLD, path)
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.lease("s9", 2)
    c.commit()  # the file holds epoch 2: records of epoch 3 cannot follow it
    assert _records(path) == []
    assert json.loads(path.read_text())["epoch"] == 3


def test_the_example_of_the_format_page_is_what_the_coordinator_writes(tmp_path: Path) -> None:
    page = (Path(__file__).resolve().parents[2] / "docs" / "coordinator-format.md").read_text()
    example = page.split("## Example")[1].split("```\n")[1]
    path = tmp_path / "snapshot.json"
    clock = Clock(1767225600.25)
    c = StateShardCoordinator(path, clock=clock)
    assert c.lease("s1", 2)
    assert c.lease("s2", 3, generation=(1, 4))
    clock.now = 1767225612.5
    assert c.complete("s1", 2, reward=1.5, cost=0.25)
    clock.now = 1767225700.0
    assert c.recover_expired(30.0) == ["s2"]
    assert path.read_text() == example
    reopened = StateShardCoordinator(path, clock=clock, autosave=False)
    assert reopened.epoch == 2
    assert reopened.stats("s1") == Stats(completions=1, reward=1.5, cost=0.25)
    assert dict(reopened.leases) == {}


def test_a_checksummed_batch_with_a_record_that_cannot_apply_applies_none_of_its_records(
    tmp_path: Path,
) -> None:
    from leasefence.impl.coordfile import (
        StateLease,
        batch_record,
        decode,
        free_record,
        lease_record,
    )

    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.lease("s1", 1)
    c.commit()  # the checkpoint of epoch 1, holding s1's lease
    good = path.read_bytes()
    # Every checksum good: s1 freed, s2 leased, then a free of s9, which holds no lease.
    batch = batch_record(
        [
            free_record("s1", Stats(completions=1)),
            lease_record("s2", StateLease(2, 1_000.0, c.epoch)),
            free_record("s9", Stats()),
        ]
    )
    loaded = decode(path, good + batch)  # the last line: a torn tail, ignored whole
    assert set(loaded.leases) == {"s1"}
    assert loaded.leases["s1"].owner == 1
    assert loaded.stats["s1"] == Stats()
    assert "s2" not in loaded.stats
    after = lease_record("s3", StateLease(3, 1_000.0, c.epoch))
    with pytest.raises(SnapshotError, match="record 1 after the checkpoint is bad"):
        decode(path, good + batch + after)


def test_a_checksummed_batch_of_one_record_is_a_bad_record(tmp_path: Path) -> None:
    # The format's batch holds two or more records (docs/coordinator-format.md); a commit of
    # one change writes the record itself. A batch of one, every checksum good, is refused as
    # any bad record is: ignored as a torn tail when last, refused when a good one follows.
    # (Fails if the reader accepts a batch of one.)
    from leasefence.impl.coordfile import decode, lease_record
    from leasefence.impl.coordvalues import StateLease

    path = tmp_path / "state.json"
    c = StateShardCoordinator(path, clock=Clock(), autosave=False)
    assert c.lease("s1", 1)
    c.commit()
    good = path.read_bytes()
    inner = json.loads(lease_record("s2", StateLease(2, 1_000.0, c.epoch)))
    doc = {"op": "batch", "records": [inner]}
    crc = zlib.crc32(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode("ascii"))
    text = json.dumps(doc, sort_keys=True)
    single = f'{text[:-1]}, "crc": "{crc:08x}"}}\n'.encode("ascii")
    assert set(decode(path, good + single).leases) == {"s1"}
    after = lease_record("s3", StateLease(3, 1_000.0, c.epoch))
    with pytest.raises(SnapshotError, match="record 1 after the checkpoint is bad"):
        decode(path, good + single + after)
