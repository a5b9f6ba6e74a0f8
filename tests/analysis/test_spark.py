"""The Spark jobs give the pandas engine's numbers on the same records."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.analysis import pandas_engine, spark_jobs
from harness.analysis.aggregate import CELL_KEYS, aggregate_cells, compare_frames
from harness.analysis.loader import discover

pytestmark = pytest.mark.slow


def test_spark_matches_pandas(spark, small_matrix: Path):
    refs = discover(small_matrix)
    by_pandas = pandas_engine.summarise(refs)
    by_spark = spark_jobs.summarise(spark, refs)
    assert len(by_spark.summary) == len(refs) == 13
    assert compare_frames(by_pandas.summary, by_spark.summary, ["run_id"]) == []
    assert compare_frames(by_pandas.series_stats, by_spark.series_stats, ["run_id", "metric", "operator"]) == []
    assert compare_frames(by_pandas.convergence, by_spark.convergence, ["run_id", "stage"]) == []
    # the comparison can fail: a run whose numbers differ is caught
    tampered = by_spark.summary.copy()
    tampered.loc[0, "latency_kafka_p95"] += 1.0
    assert compare_frames(by_pandas.summary, tampered, ["run_id"])
    cells_pandas = aggregate_cells(by_pandas.summary)
    cells_spark = spark_jobs.aggregate_cells(spark, by_spark.summary)
    assert compare_frames(cells_pandas, cells_spark, CELL_KEYS) == []
    hand = by_spark.summary.set_index("run_id").loc["hand/hand-r0"]
    assert hand.tm_avg == pytest.approx(4.5) and hand.saso_qos_violations == 3
    assert hand.latency_e2e_avg == pytest.approx(3.125)  # the gap is a gap in Spark too
