"""``total`` of a model map (the sum of its values; ``next_generation`` used it at every
DispatchWork before generations were the implementation's): carried through edits by a large map, it must equal a full sum after any sequence
of puts and drops, from a map whose total was asked early, late or never."""

from __future__ import annotations

import random

from leasefence.model.state import Chunked, as_map, drop, put, total


def test_total_carried_through_edits_equals_a_full_sum() -> None:
    rng = random.Random(20261201)
    m = as_map({f"w{i:04}": rng.randrange(1, 5) for i in range(500)})
    assert isinstance(m, Chunked)  # the large form, whose total is carried
    asked = total(m)
    assert asked == sum(v for _, v in m)
    for step in range(20_000):
        key = f"w{rng.randrange(700):04}"
        m = drop(m, key) if rng.random() < 0.3 else put(m, key, rng.randrange(1, 5))
        if step % 997 == 0 or step > 19_900:
            assert total(m) == sum(v for _, v in m), step


def test_total_of_a_small_map_is_its_sum() -> None:
    m = as_map({"w1": 2, "w2": 3})
    assert total(m) == 5
    assert total(put(m, "w1", 1)) == 4
    assert total(drop(m, "w2")) == 2
