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
