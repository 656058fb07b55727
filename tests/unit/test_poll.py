"""How a rank waits for its next message: the schedule of each poll mode, driven without a clock."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from leasefence.impl.poll import AGAIN, POLL_MODES, YIELD, PollPolicy, guess_policy, usable_cores


def schedule(policy: PollPolicy, at: list[float]) -> list[float]:
    """``policy.wait``'s answers at the given times into one wait, sleeps carried along."""
    answers, slept = [], 0.0
    for waited in at:
        step = policy.wait(waited, slept)
        slept = step if step > 0 else slept
        answers.append(step)
    return answers


def test_sleep_mode_is_the_old_schedule_doubling_from_a_fifth_of_a_millisecond_to_five() -> None:
    policy = PollPolicy.of("sleep", oversubscribed=False)
    assert schedule(policy, [0.0] * 7) == [0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.005, 0.005]


def test_auto_spins_then_yields_then_sleeps_when_every_rank_has_a_core() -> None:
    policy = PollPolicy.of("auto", oversubscribed=False)
    answers = schedule(policy, [0.0, 0.001, 0.003, 0.021, 0.023, 0.1, 0.2, 0.3, 0.4, 0.5])
    assert answers[:2] == [AGAIN, AGAIN]
    assert answers[2:4] == [YIELD, YIELD]
    assert answers[4:] == [0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.002]


def test_auto_never_yields_and_soon_sleeps_on_a_node_with_more_ranks_than_cores() -> None:
    policy = PollPolicy.of("auto", oversubscribed=True)
    answers = schedule(policy, [0.0, 0.00001, 0.0001, 0.001, 0.01, 1.0, 10.0, 100.0])
    assert YIELD not in answers
    assert answers[:2] == [AGAIN, AGAIN]
    assert answers[2:] == [0.00002, 0.00004, 0.00008, 0.00016, 0.0002, 0.0002]
    assert max(answers) <= 0.0002  # a rank waiting for a frame wakes soon after it came


def test_an_oversubscribed_worker_never_spins_and_sleeps_at_most_fifty_microseconds() -> None:
    """Fails if a waiting worker takes the core the master needs (a spin), or sleeps so long
    that the master waits for its RESULTs (issue 19); the master's schedule is the one above,
    and a node with a core a rank does not change either role's."""
    worker = PollPolicy.of("auto", oversubscribed=True, worker=True)
    answers = schedule(worker, [0.0, 0.00001, 0.0001, 0.001, 1.0, 100.0])
    assert AGAIN not in answers
    assert YIELD not in answers
    assert answers == [0.00002, 0.00004, 0.00005, 0.00005, 0.00005, 0.00005]
    assert PollPolicy.of("auto", True, worker=False) == PollPolicy.of("auto", True)
    assert PollPolicy.of("auto", True).spin > 0  # the master still catches a quick reply
    assert PollPolicy.of("auto", False, worker=True) == PollPolicy.of("auto", False)
    assert PollPolicy.of("block", True, worker=True).block


def test_spin_polls_again_for_ever_and_yield_yields_for_ever() -> None:
    assert set(schedule(PollPolicy.of("spin", True), [0.0, 1.0, 1e6])) == {AGAIN}
    assert set(schedule(PollPolicy.of("yield", True), [0.0, 1.0, 1e6])) == {YIELD}


def test_only_block_mode_blocks_and_otherwise_it_waits_as_auto() -> None:
    assert [m for m in POLL_MODES if PollPolicy.of(m, False).block] == ["block"]
    for oversubscribed in (False, True):
        block, auto = PollPolicy.of("block", oversubscribed), PollPolicy.of("auto", oversubscribed)
        assert (block.spin, block.yield_for, block.max_sleep) == (
            auto.spin,
            auto.yield_for,
            auto.max_sleep,
        )


def test_an_unknown_poll_mode_is_refused_with_the_modes_named() -> None:
    with pytest.raises(ValueError, match="auto, spin, yield, sleep, block"):
        PollPolicy.of("busy", oversubscribed=False)


def test_a_job_with_more_ranks_than_usable_cores_is_guessed_oversubscribed() -> None:
    cores = usable_cores()
    assert cores >= 1

    def comm(size: int, rank: int) -> SimpleNamespace:
        return SimpleNamespace(Get_size=lambda: size, Get_rank=lambda: rank)

    assert guess_policy(comm(cores, 0)) == PollPolicy.of("auto", oversubscribed=False)
    assert guess_policy(comm(cores + 1, 0)) == PollPolicy.of("auto", oversubscribed=True)
    # rank 0 is the master; any other rank waits as a worker
    assert guess_policy(comm(cores + 1, 1)) == PollPolicy.of("auto", True, worker=True)
    assert guess_policy(comm(cores + 1, 1)) != guess_policy(comm(cores + 1, 0))
    assert math.isinf(PollPolicy.of("spin", False).spin)
