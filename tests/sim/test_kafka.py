"""The Kafka FIFO: time in Kafka is exact at step resolution."""

from __future__ import annotations

import pytest

from harness.backends.sim.kafka import FifoTopic


def test_fifo_ages_are_count_weighted_and_oldest_first() -> None:
    q = FifoTopic()
    q.produce(0, 100.0)
    q.produce(1, 100.0)
    q.produce(2, 100.0)
    taken, age_sum, max_age = q.consume(3, 150.0)
    assert taken == 150.0
    assert age_sum == pytest.approx(100 * 3 + 50 * 2)
    assert max_age == 3
    assert q.pending == pytest.approx(150.0)
    taken, age_sum, max_age = q.consume(4, 1_000.0)
    assert taken == pytest.approx(150.0)
    assert age_sum == pytest.approx(50 * 3 + 100 * 2)
    assert max_age == 3
    assert q.pending == 0.0 and q.head_step() is None


def test_regroup_pools_by_arrival_step_and_splits_by_weight() -> None:
    """A rescaled source's backlog: every new group gets weight x the pooled records of each arrival step,
    oldest first, and remembers the youngest record taken so far."""
    from harness.backends.sim.kafka import regroup

    a, b = FifoTopic(), FifoTopic()
    for step, count in ((0, 10.0), (2, 30.0), (5, 5.0)):
        a.produce(step, count)
    for step, count in ((1, 4.0), (2, 6.0)):
        b.produce(step, count)
    a.consume(3, 2.0)  # a took from step 0
    new = regroup([a, b], [0.75, 0.25, 0.0])
    assert [list(q.buckets) for q in new[:2]] == [[[0.0, 6.0], [1.0, 3.0], [2.0, 27.0], [5.0, 3.75]],
                                           [[0.0, 2.0], [1.0, 1.0], [2.0, 9.0], [5.0, 1.25]]]
    assert list(new[2].buckets) == [] and new[2].pending == 0.0
    assert [q.pending for q in new] == pytest.approx([39.75, 13.25, 0.0])
    assert all(q.last_step == 0.0 for q in new)
