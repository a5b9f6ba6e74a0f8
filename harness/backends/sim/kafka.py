"""A Kafka topic as the simulator sees it: a FIFO of records that remember when they arrived.

Records are a fluid, kept as (arrival_step, count) buckets; consuming takes
from the head, so the time a record spent in Kafka (the thesis' latency,
ch. 5.3: event-time lag at the source) is exact at step resolution without
any per-record work. The same FIFO holds an operator's input buffer, whose
buckets carry the records' event-time step, so the end-to-end latency at the
sink is exact at step resolution too (`harness.backends.sim.model`).
Retention (thesis ch. 6.3.1) deletes from the head too: `expire` drops the
buckets of log segments older than the retention time.
"""

from __future__ import annotations

from collections import deque
from itertools import chain

import numpy as np

_EPS = 1e-9


class FifoTopic:
    """Pending records of one consumer group on one topic."""

    __slots__ = ("buckets", "pending", "last_step")

    def __init__(self) -> None:
        self.buckets: deque[list[float]] = deque()  # [arrival_step, count]
        self.pending = 0.0
        self.last_step = -1.0  # arrival step of the youngest record taken so far (-1: none yet)

    def produce(self, step: int, count: float) -> None:
        if count > 0.0:
            self.buckets.append([float(step), count])
            self.pending += count

    def head_step(self) -> float | None:
        """Arrival step of the oldest pending record."""
        return self.buckets[0][0] if self.buckets else None

    def append(self, step: float, count: float) -> None:
        """Add records that arrived at (or carry the event time of) `step`; merges with the tail bucket."""
        if count > 0.0:
            buckets = self.buckets
            if buckets and buckets[-1][0] == step:
                buckets[-1][1] += count
            else:
                buckets.append([step, count])
            self.pending += count

    def consume(self, step: int, amount: float, into: list[tuple[float, float]] | None = None
                ) -> tuple[float, float, float]:
        """Take up to `amount` records from the head.

        Returns (taken, age_sum, max_age) with ages in steps: age_sum is the
        count-weighted sum of (step - arrival_step), max_age the oldest one taken.
        `into`, when given, receives the taken (arrival_step, count) pieces in order.
        """
        buckets = self.buckets
        if amount <= 0.0 or not buckets:
            return 0.0, 0.0, 0.0
        max_age = step - buckets[0][0]
        rem = amount
        age_sum = 0.0
        while rem > 0.0 and buckets:
            head = buckets[0]
            c = head[1]
            self.last_step = head[0]
            if c <= rem + _EPS * c:
                rem -= c
                age_sum += c * (step - head[0])
                buckets.popleft()
                if into is not None:
                    into.append((head[0], c))
            else:
                head[1] = c - rem
                age_sum += rem * (step - head[0])
                if into is not None:
                    into.append((head[0], rem))
                rem = 0.0
        taken = amount - rem if rem > 0.0 else amount
        if buckets:
            self.pending -= taken
        else:
            taken = self.pending  # absorb rounding: an empty queue has nothing pending
            self.pending = 0.0
        return taken, age_sum, max_age

    def expire(self, before_step: float) -> float:
        """Delete every record that arrived before `before_step` (retention); returns how many."""
        buckets = self.buckets
        gone = 0.0
        while buckets and buckets[0][0] < before_step:
            gone += buckets.popleft()[1]
        if gone:
            self.pending = max(0.0, self.pending - gone) if buckets else 0.0
        return gone


def regroup(queues: list[FifoTopic], weights: list[float]) -> list[FifoTopic]:
    """Pool the pending records of `queues` and split them into new queues by `weights`.

    Used when a source is rescaled and Kafka partitions move between subtasks:
    the backlog is assumed to spread over the new partition groups in
    proportion to their partitions (an approximation at the moment of a
    rescale; between rescales every group's queue is exact). A backlog holds a
    bucket per arrival step (thousands), so the pooling and splitting run in
    numpy: the buckets are read into one flat array (no per-bucket array), `np.bincount` sums each step's
    counts in queue order (as a loop would) and the new buckets are built from two flat lists.
    """
    total = sum(q.pending for q in queues)
    last_step = max((q.last_step for q in queues), default=-1.0)
    n = sum(len(q.buckets) for q in queues)
    if n:
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(q.buckets for q in queues)), dtype=np.float64,
                           count=2 * n)  # step, count, step, count, ...
        steps: np.ndarray = flat[0::2]
        pooled: np.ndarray
        if len(queues) == 1 and (n == 1 or bool(np.all(steps[1:] > steps[:-1]))):
            pooled = flat[1::2]  # one queue, a bucket per step: already pooled (what the bincount would sum)
        else:
            steps, where = np.unique(steps, return_inverse=True)  # sorted: oldest first
            pooled = np.bincount(where.ravel(), weights=flat[1::2], minlength=len(steps))
    out = []
    for w in weights:
        nq = FifoTopic()
        if n:
            counts = pooled * w
            keep = counts > 0.0
            nq.buckets.extend(map(list, zip(steps[keep].tolist(), counts[keep].tolist(), strict=True)))
        nq.pending = total * w
        nq.last_step = last_step
        out.append(nq)
    return out
