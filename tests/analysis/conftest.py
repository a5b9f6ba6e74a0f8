"""Shared fixtures: hand-made and synthetic run records, one SparkSession per test session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.synthetic import synthetic_matrix
from harness.record import EventLog, write_run_record
from harness.vocabulary import EventKind, Metric


def hand_made_run(run_dir: Path) -> Path:
    """Four samples at irregular steps (0, 10, 30, 60 s); every answer is worked out in the tests.

    NaN marks a gap (nothing measured from 10 to 30 s for the end-to-end latency and the CPU)."""
    ts = [0.0, 10.0, 30.0, 60.0]
    nan = float("nan")
    rows = []
    for metric, values in {
        Metric.TASKMANAGERS: [3, 3, 6, 6],
        Metric.LATENCY_KAFKA: [1, 2, 3, 10],
        Metric.INPUT_RATE: [100, 100, 100, 100],
        Metric.THROUGHPUT: [100, 90, 100, 100],
        Metric.LAG: [0, 50, 0, 0],
        # per-record end-to-end latency per interval: mean and quantiles
        Metric.LATENCY_E2E_MEAN: [0.5, nan, 4, 2],
        Metric.LATENCY_E2E_P50: [0.4, nan, 3, 1.5],
        Metric.LATENCY_E2E_P95: [0.9, nan, 8, 3],
        Metric.LATENCY_E2E_P99: [0.95, nan, 20, 4],
        Metric.LATENCY_E2E_MAX: [1, nan, 31, 5],
        Metric.CPU: [0.5, nan, 0.7, 0.7],
        Metric.SKIPPED_TOTAL: [0, 0, 50, 50],
        Metric.EXPIRED_TOTAL: [0, 0, 0, 20],
    }.items():
        rows += [{"ts": t, "metric": metric, "value": float(v)} for t, v in zip(ts, values, strict=True)]
    for op, values in {"bids_source": [1, 1, 2, 2], "map": [1, 1, 3, 3], "sink": [1, 1, 1, 1]}.items():
        rows += [{"ts": t, "metric": Metric.PARALLELISM, "operator": op, "value": float(v)}
                 for t, v in zip(ts, values, strict=True)]
    events = EventLog()
    events.add(0.0, EventKind.PHASE, "start")
    events.add(0.0, EventKind.PHASE, "stage1 start", stage="stage1", start=0.0, end=40.0)
    events.add(40.0, EventKind.PHASE, "stage2 start", stage="stage2", start=40.0, end=60.0)
    events.add(5.0, EventKind.ACTION, "up", before={"bids_source": 1, "map": 1, "sink": 1},
               after={"bids_source": 2, "map": 3, "sink": 1})
    events.add(50.0, EventKind.ACTION, "down", before={"bids_source": 2, "map": 3, "sink": 1},
               after={"bids_source": 2, "map": 2, "sink": 1})
    events.add(20.0, EventKind.FAULT, "rescale failed: boom")
    events.add(15.0, EventKind.DECISION_SKIPPED, "no decision: job metrics not measured: input_rate")
    events.add(25.0, EventKind.DECISION_SKIPPED, "no decision: job metrics not measured: input_rate")
    config = {
        "name": "hand", "backend": "sim", "query": "q1", "pattern": {"name": "constant", "time_scale": 1.0},
        "autoscaler": {"name": "ds2", "params": {"overprovisioning": 1.2}},
        "loop": {"period_s": 10.0, "cooldown_s": 5.0}, "slo": {"latency_s": 2.5, "throughput_ratio": 0.95},
    }
    return write_run_record(run_dir, {"run_id": run_dir.name, "config": config, "duration_s": 60.0,
                                      "pattern": {"records": 6000.0}},
                            pd.DataFrame(rows), events, "completed")


@pytest.fixture
def hand_results(tmp_path: Path) -> Path:
    hand_made_run(tmp_path / "m" / "hand-r0")
    return tmp_path


@pytest.fixture(scope="session")
def small_matrix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 autoscalers x {cosine, convergence} x 2 repetitions of 30-minute synthetic runs, plus the hand-made one."""
    root = tmp_path_factory.mktemp("results")
    synthetic_matrix(root, patterns=("cosine", "convergence"), repetitions=2, duration_s=1800.0)
    hand_made_run(root / "hand" / "hand-r0")
    return root


@pytest.fixture(scope="session")
def spark_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("spark") / "analysis.log"


@pytest.fixture(scope="session")
def spark(spark_log: Path) -> Iterator[object]:
    """The one Spark session of the test run (a JVM costs seconds to start)."""
    from harness.analysis.spark_session import build_session

    session = build_session("local[2]", app="bench-analysis-tests", log_file=spark_log)
    yield session
    session.stop()
