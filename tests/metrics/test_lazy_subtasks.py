"""`LazySubtasksOperatorMetrics`: per-subtask readings built on first read, otherwise the plain OperatorMetrics."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

from harness.metrics.snapshot import LazySubtasksOperatorMetrics, OperatorMetrics, SubtaskMetrics

SUBTASKS = (SubtaskMetrics(records_in_per_s=10.0, busy_ms_per_s=400.0),
            SubtaskMetrics(records_in_per_s=30.0, busy_ms_per_s=900.0))
VALUES = {"parallelism": 2, "records_in_per_s": 40.0, "busy_ms_per_s": 650.0, "lag": 12.0}


def lazy() -> tuple[OperatorMetrics, list[int]]:
    calls: list[int] = []

    def build() -> tuple[SubtaskMetrics, ...]:
        calls.append(1)
        return SUBTASKS

    return LazySubtasksOperatorMetrics.create(build, **VALUES), calls


def test_the_subtasks_are_built_once_on_first_read_and_the_rest_is_there_at_once() -> None:
    m, calls = lazy()
    assert (m.parallelism, m.records_in_per_s, m.busy_ms_per_s, m.lag) == (2, 40.0, 650.0, 12.0)
    assert math.isnan(m.cpu_load) and m.cpu_share == 1.0 and m.is_backpressured is None  # the field defaults
    assert calls == []
    assert m.max_busy_ms_per_s == 900.0
    assert m.subtasks is m.subtasks == SUBTASKS
    assert calls == [1]


def test_it_is_the_plain_operator_metrics_of_the_same_values() -> None:
    plain = OperatorMetrics(**VALUES, subtasks=SUBTASKS)
    m, _ = lazy()
    assert m == plain and plain == m and hash(m) == hash(plain) and repr(m) == repr(plain)
    assert dataclasses.asdict(lazy()[0]) == dataclasses.asdict(plain)
    assert m != dataclasses.replace(plain, busy_ms_per_s=651.0)
    for copied in (pickle.loads(pickle.dumps(lazy()[0])), copy.deepcopy(lazy()[0]), copy.copy(lazy()[0])):
        assert type(copied) is OperatorMetrics and repr(copied) == repr(plain)  # (a pickled NaN is another NaN)
    changed = dataclasses.replace(lazy()[0], lag=3.0)
    assert changed.lag == 3.0 and changed.subtasks == SUBTASKS


def test_a_builder_that_fails_fails_again_on_the_next_read() -> None:
    def broken() -> tuple[SubtaskMetrics, ...]:
        raise ValueError("boom")

    m = LazySubtasksOperatorMetrics.create(broken, parallelism=1)
    for _ in range(2):
        try:
            _ = m.subtasks
        except ValueError as exc:
            assert str(exc) == "boom"
        else:
            raise AssertionError("no error")
