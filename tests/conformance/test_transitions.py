"""Every transition of the model's state graph is driven through the implementation in lockstep
with the model (``conformance.transitions``): the whole graph at the CI bounds here (on every
CPU), the quick bounds with the refusal probes, the scratch probes and the dispatch loop at
each kind of state (with the branch coverage of impl/ they reach held to its floors), the deep and pipelined bounds in the slow tier; a planted bug fails the
replay and leaves a scenario that replays; a planted accepted refusal fails a probe; bugs only
the dispatch loop or a scratch probe reaches fail them; every untaken branch has a reason."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leasefence.conformance import transitions as tr
from leasefence.conformance.scenarios import bounds_doc, bounds_of, load
from leasefence.conformance.scenarios import replay as replay_scenario
from leasefence.impl.coordinator import StateShardCoordinator
from leasefence.impl.journal import WorkLeaseJournal
from leasefence.impl.master import Master
from leasefence.impl.wire import WorkId
from leasefence.model.check import explore
from leasefence.model.system import Bounds


@pytest.fixture(autouse=True)
def _quiet() -> Iterator[None]:
    logging.disable(logging.WARNING)
    yield
    logging.disable(logging.NOTSET)


def test_the_graph_is_the_model_checkers_with_every_labelled_edge() -> None:
    g = tr.graph(tr.CI)
    checked = explore(tr.CI)
    assert (len(g.states), len(g.edges)) == (checked.states, checked.transitions) == (10718, 129910)
    pairs = {(s, t) for s, _, t in g.edges if s != t}
    assert len(pairs) == 40846  # distinct state pairs, self-loops left out (32,518 before crashes)
    assert g.self_loops == 37726


def test_the_paths_start_at_init_follow_the_graph_and_take_every_edge() -> None:
    g = tr.graph(tr.QUICK)
    paths = tr.cover(g)
    taken = set()
    for path in paths:
        assert g.edges[path[0]][0] == 0
        for a, b in itertools.pairwise(path):
            assert g.edges[a][2] == g.edges[b][0]
        taken.update(path)
    assert taken == set(range(len(g.edges)))
    assert len(paths) < len(g.edges) / 2


def test_every_transition_at_the_quick_bounds_is_driven_and_every_probe_refused() -> None:
    # Measured as `leasefence verify` measures it, so that code added without probes fails
    # here, at the next `make test`, not at the next `make verify` (2026-12-02 to -03: four
    # modules fell below their floors unseen, `make verify` not being run by CI).
    from leasefence.conformance.transition_layer import BRANCH_FLOOR, measure

    result, found = measure(tr.QUICK)
    assert not result.failures, result.failures[0].error
    assert result.covered == result.total == 6705
    assert result.ok
    assert [b.name for b in found] == list(BRANCH_FLOOR)
    for b in found:
        assert len(b.missing) == b.total - b.covered
        assert all(b.why[x] for x in b.missing)
        assert b.ratio >= BRANCH_FLOOR[b.name], (
            f"{b.name}: branch coverage {b.ratio:.1%} is below its floor "
            f"{BRANCH_FLOOR[b.name]:.0%}; new code needs a probe (conformance/transition_probes.py, "
            f"transition_scratch.py) or an UNTAKEN entry saying why; not taken: {b.missing}"
        )


def test_every_transition_at_the_ci_bounds_is_driven_through_the_implementation() -> None:
    result = tr.replay(tr.CI, jobs=tr.jobs_available())
    assert not result.failures, result.failures[0].error
    assert result.covered == result.total == 129910


@pytest.mark.slow
def test_every_transition_at_the_deep_bounds_is_driven_through_the_implementation() -> None:
    result = tr.replay(tr.DEEP, jobs=tr.jobs_available())
    assert not result.failures, result.failures[0].error
    assert result.covered == result.total


def test_every_transition_through_a_lease_dated_past_the_ttl_is_driven() -> None:
    # The quick and CI bounds keep the wall clock at 0 and 1: no rollback dates a lease more
    # than the TTL ahead, so a master that never reclaims such a lease passed them.
    g = tr.graph(tr.CLOCK)
    ttl = tr.CLOCK.ttl
    future = [s for s in g.states if any(x.updated - s.wall > ttl for _, x in s.journal.leases)]
    assert len(future) == 36
    result = tr.replay(tr.CLOCK)
    assert not result.failures, result.failures[0].error
    assert result.covered == result.total == 1572


TINY = Bounds(max_wall=0, max_dups=0, max_leases=1, max_reboots=0, max_rollbacks=0, max_restarts=0)


def test_two_processes_drive_the_same_paths_as_one() -> None:
    one, two = tr.replay(TINY), tr.replay(TINY, jobs=2)
    assert one.ok
    assert two.ok
    assert (one.covered, one.paths, one.steps) == (two.covered, two.paths, two.steps)
    assert one.covered == one.total > 0


def _unsaved_abandon(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted persistence bug: the coordinator books a failure but does not save it."""
    original = StateShardCoordinator.abandon

    def abandon(self: StateShardCoordinator, *args: Any, **kwargs: Any) -> bool:
        self._autosave = False
        try:
            return original(self, *args, **kwargs)
        finally:
            self._autosave = True

    monkeypatch.setattr(StateShardCoordinator, "abandon", abandon)


def test_a_planted_bug_fails_the_replay_with_a_shortest_path_saved_as_a_scenario(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _unsaved_abandon(monkeypatch)
    result = tr.replay(tr.QUICK, save=tmp_path, jobs=2)
    assert not result.ok
    (failure,) = result.failures
    assert "files differ from memory" in failure.error
    assert failure.saved is not None
    doc = load(failure.saved)
    g = tr.graph(tr.QUICK)
    assert len(doc["steps"]) == len(g.prefix(g.edges[failure.edge][0])) + 1
    with pytest.raises(AssertionError, match="files differ from memory"):
        replay_scenario(doc)
    monkeypatch.undo()
    replay_scenario(doc)  # the fixed implementation passes the same steps


def test_a_scenario_with_bounds_and_a_legacy_record_replays_under_those_bounds() -> None:
    g = tr.graph(tr.QUICK)
    legacy = next(i for i, (_, label, _) in enumerate(g.edges) if label[0] == "LegacyRecord")
    path = [*g.prefix(g.edges[legacy][0]), legacy]
    doc = tr.scenario(g, path, "a test")
    assert bounds_of(doc["bounds"]) == g.bounds
    assert doc["steps"][-1]["action"] == "LegacyRecord"
    replay_scenario(doc)
    assert bounds_of(bounds_doc(Bounds())) == tr.catalogue_bounds(Bounds())
    used = Bounds()
    assert used.generations is False  # cached on the instance once read
    assert used.work_set
    assert set(bounds_doc(used)) == {f for f in Bounds.__dataclass_fields__ if f != "flavour"}


def _abandon_by_anyone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted token bug the model cannot express: the journal lets any rank abandon a lease."""
    original = WorkLeaseJournal.abandon

    def abandon(
        self: WorkLeaseJournal, work_id: str, worker: int | None = None, generation: Any = None
    ) -> bool:
        return original(self, work_id)

    monkeypatch.setattr(WorkLeaseJournal, "abandon", abandon)


def _discard_any_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted fence bug: the coordinator discards for the owner rank whatever its generation."""
    original = StateShardCoordinator.discard

    def discard(
        self: StateShardCoordinator, task_id: str, worker: int, generation: Any = None
    ) -> bool:
        held = self.leases.get(task_id)
        return original(self, task_id, worker, held.generation if held else generation)

    monkeypatch.setattr(StateShardCoordinator, "discard", discard)


@pytest.mark.parametrize(
    ("plant", "probe"),
    [
        (_abandon_by_anyone, "journal.abandon"),
        (_discard_any_generation, "coordinator.discard"),
    ],
)
def test_a_refusal_the_model_cannot_express_that_is_accepted_fails_a_probe(
    plant: Any, probe: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tr.replay(TINY, probes=True).ok  # the probes reach a leased state at these bounds
    plant(monkeypatch)
    assert tr.replay(TINY).ok  # no model step calls it so
    result = tr.replay(TINY, probes=True)
    (failure,) = result.failures
    assert f"probe {probe}(" in failure.error


def test_a_hostile_file_read_as_good_fails_a_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    from leasefence.conformance import transition_probes

    monkeypatch.setattr(transition_probes, "persisted_journal", lambda path: {})
    result = tr.replay(TINY, probes=True)
    (failure,) = result.failures
    assert "hostile journal" in failure.error


def _commit_never_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted group-commit bug: ``Master.commit`` writes nothing, so a WORK leaves before its
    lease is durable and the restart inside the job reads less than was acknowledged."""
    monkeypatch.setattr(Master, "commit", lambda self: None)


def _queue_loses_an_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted scheduling bug: the lazy queue drops the catalogue's last item as if done."""
    original = Master._finished_here

    def finished_here(self: Master, work_id: WorkId) -> bool:
        return original(self, work_id) or work_id == list(self.catalogue)[-1]

    monkeypatch.setattr(Master, "_finished_here", finished_here)


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        (_commit_never_writes, "does not validate"),
        (_queue_loses_an_item, "neither done nor given up"),
    ],
)
def test_a_bug_only_the_dispatch_loop_reaches_fails_the_loop_at_a_replayed_state(
    plant: Any, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    assert tr.replay(TINY).ok  # no model step runs the loop
    result = tr.replay(TINY, probes=True)
    (failure,) = result.failures
    assert "loop " in failure.error
    assert says in failure.error


def _legacy_copy_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted legacy bug: the coordinator drops F314's snapshot without keeping a copy."""
    from leasefence.impl import coordinator

    monkeypatch.setattr(coordinator, "keep_legacy_copy", lambda path, original: None)


def _failed_write_kept_in_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """A planted persistence bug: a coordinator change whose write failed stays in memory."""
    import contextlib

    @contextlib.contextmanager
    def change(self: StateShardCoordinator, tasks: Any) -> Iterator[None]:
        yield
        self._persist()

    monkeypatch.setattr(StateShardCoordinator, "_change", change)


@pytest.mark.parametrize(
    ("plant", "says"),
    [
        (_legacy_copy_not_kept, "its bytes are kept beside it"),
        (_failed_write_kept_in_memory, "a failed write put the change back"),
    ],
)
def test_a_bug_only_a_scratch_probe_reaches_fails_it(
    plant: Any, says: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plant(monkeypatch)
    assert tr.replay(TINY).ok  # no model step reaches it
    result = tr.replay(TINY, probes=True)
    (failure,) = result.failures
    assert says in failure.error


def test_every_untaken_branch_listed_with_a_reason_is_a_line_of_its_module() -> None:
    from leasefence.conformance.transition_layer import UNTAKEN

    root = Path(__file__).resolve().parents[2]
    for module, source in UNTAKEN:
        lines = [line.strip() for line in (root / module).read_text().splitlines()]
        assert lines.count(source) == 1, (module, source)


@pytest.mark.slow
def test_every_transition_at_pipeline_depth_2_is_driven_and_every_probe_refused() -> None:
    result = tr.replay(tr.PIPELINED, probes=True)
    assert not result.failures, result.failures[0].error
    assert result.covered == result.total == 21390  # PIPELINED's transitions (its comment)
