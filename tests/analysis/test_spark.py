"""The Spark engine: the pandas engine's numbers, and a quiet console."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis import pandas_engine, spark_jobs
from harness.analysis.aggregate import CELL_KEYS, compare_frames
from harness.record import find_run_dirs

pytestmark = pytest.mark.slow


def test_spark_workers_give_the_pandas_numbers(spark, spark_log: Path, small_matrix: Path):
    dirs = find_run_dirs(small_matrix)
    by_pandas = pandas_engine.summarise_dirs(dirs, small_matrix)
    batches = [[str(d) for d in dirs[i:i + 3]] for i in range(0, len(dirs), 3)]  # 5 tasks
    by_spark = spark_jobs.analyse_on_spark(spark, batches, small_matrix).result()  # type: ignore[arg-type]
    assert len(by_spark.summary) == len(dirs) == 13
    assert list(by_spark.summary["run_id"]) == list(by_pandas.summary["run_id"])  # run order kept
    assert compare_frames(by_pandas.summary, by_spark.summary, ["run_id"]) == []
    assert compare_frames(by_pandas.series_stats, by_spark.series_stats, ["run_id", "metric", "operator"]) == []
    assert compare_frames(by_pandas.convergence, by_spark.convergence, ["run_id", "stage"]) == []
    assert compare_frames(by_pandas.operators, by_spark.operators, ["run_id", "operator", "metric"]) == []
    # the comparison can fail: a run whose numbers differ is caught
    tampered = by_spark.summary.copy()
    tampered.loc[0, "latency_kafka_p95"] += 1.0
    assert compare_frames(by_pandas.summary, tampered, ["run_id"])
    hand = by_spark.summary.set_index("run_id").loc["hand/hand-r0"]
    assert hand.tm_avg == pytest.approx(4.5) and hand.saso_qos_violations == 2
    assert hand.latency_e2e_avg == pytest.approx(3.125)  # the gap is a gap in Spark too
    # the JVM's start-up lines went to the log, not the console
    assert "NativeCodeLoader" in spark_log.read_text() or "WARNING" in spark_log.read_text()


def test_analyze_on_spark_is_quiet_and_agrees_with_pandas(small_matrix: Path, tmp_path: Path):
    """`bench analyze` on Spark in its own process: only our lines on the console, the same outputs as pandas.

    Spark is reached the way `auto` picks it for a small directory: `--master` given."""
    bench = Path(sys.executable).with_name("bench")
    outs = {}
    for engine, flags in (("spark", ["--engine", "auto", "--master", "local[2]"]), ("pandas", ["--engine", "pandas"])):
        out = tmp_path / engine
        proc = subprocess.run([str(bench), "analyze", str(small_matrix), "--out", str(out), *flags],
                              capture_output=True, text=True, timeout=600, env={"COLUMNS": "80", **_env()})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        console = proc.stdout + proc.stderr
        for noise in ("log4j", "WARN", "NativeCodeLoader", "incubator", "SparkContext", "py4j", "%6|", "%3|"):
            assert noise not in console, f"{engine}: {noise!r} on the console:\n{console}"
        assert f"({engine}," in proc.stdout  # the table's title names the engine
        outs[engine] = out
    log = (outs["spark"] / "analysis.log").read_text()
    assert "engine spark (asked: auto, master local[2]" in log and "NativeCodeLoader" in log
    runs = {e: pd.read_parquet(o / "runs.parquet") for e, o in outs.items()}
    cells = {e: pd.read_csv(o / "cells.csv") for e, o in outs.items()}
    assert compare_frames(runs["pandas"], runs["spark"], ["run_id"]) == []
    assert compare_frames(cells["pandas"], cells["spark"], CELL_KEYS) == []


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "COLUMNS"}

