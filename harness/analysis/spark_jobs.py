"""PySpark jobs: per-run summaries and per-cell aggregates over a whole results directory.

Spark does the heavy part - reducing millions of long-format samples to a few
numbers per (run, metric, operator) - with window functions (`lead` for the
duration each sample holds, `last(ignorenulls)` to forward-fill step
functions) and exact `percentile`. Run metadata and event logs are tiny and
stay on the driver, where the shared assembly (`summary.assemble_row`) turns
the aggregates into rows. `local[*]` by default; `--master URL` runs the same
jobs on a cluster that can read the same paths.

The definitions are those of `metrics` (see its conventions); the pandas
engine computes them independently and `compare_frames` checks both agree.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.aggregate import CELL_KEYS, ci_half_width, metric_columns
from harness.analysis.events import event_metrics
from harness.analysis.loader import RunRef
from harness.analysis.metrics import CEIL_EPS
from harness.analysis.summary import (
    PERCENTILE_METRICS,
    SERIES_STATS_COLUMNS,
    AnalysisResult,
    ExcessFacts,
    RunPieces,
    SpecFacts,
    assemble_row,
    convergence_rows,
    operator_rows,
    series_from_frame,
)
from harness.vocabulary import Metric

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    # the cache is built once and read four times: plain columns are cheaper to build than compressed ones
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.driver.memory": "3g",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    # list the run records' files on the driver: a distributed listing job costs one task per path
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    "spark.ui.showConsoleProgress": "false",
}


def build_session(master: str = "local[*]", app: str = "bench-analysis",
                  conf: dict[str, str] | None = None) -> SparkSession:
    """A session with a quiet, modest local footprint (no UI, few shuffle partitions)."""
    from pyspark.sql import SparkSession

    # Python workers (if any are ever needed) run this interpreter, not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app)
    local_conf: dict[str, str] = {}
    if master.startswith("local"):
        # a local session listens on loopback only (Spark otherwise binds the host's first address)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        local_conf = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1"}
    for key, value in {**DEFAULT_CONF, **local_conf, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if "spark.sql.shuffle.partitions" not in (conf or {}):
        # two partitions per core: 4 on this 2-core machine, more on a cluster (Spark's 200 is far too many here)
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * spark.sparkContext.defaultParallelism)))
    return spark


def file_uris(path: Path) -> list[str]:
    """The spellings Spark may give a local file in `input_file_name()`; joining on them avoids a
    per-row regular expression over millions of samples."""
    resolved = path.resolve()
    uri = resolved.as_uri()  # file:///a%20b/x
    return sorted({uri, uri.replace("file:///", "file:/", 1), str(resolved)})


def load_samples(spark: SparkSession, refs: list[RunRef]) -> DataFrame:
    """Job- and operator-level samples (subtask -1) with an integer run index `rid`.

    A NaN value marks a gap (`metrics` conventions) and becomes null here, which Spark's aggregates skip.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.types import DoubleType, IntegerType, StringType, StructField, StructType

    schema = StructType([
        StructField("ts", DoubleType()), StructField("metric", StringType()),
        StructField("operator", StringType()), StructField("subtask", IntegerType()),
        StructField("value", DoubleType()),
    ])
    paths = [(i, r.timeseries_path) for i, r in enumerate(refs) if r.timeseries_path is not None]
    files = pd.DataFrame([(uri, i) for i, p in paths for uri in file_uris(p)], columns=["file", "rid"])
    files_df = spark.createDataFrame(files, "file string, rid int")
    raw = (spark.read.schema(schema).parquet(*[str(p.resolve()) for _, p in paths])
           .where(F.col("subtask") == -1)
           .select("ts", "metric", "operator", F.when(~F.isnan("value"), F.col("value")).alias("value"),
                   F.input_file_name().alias("file")))
    return raw.join(F.broadcast(files_df), "file").drop("file")


def _runs_frame(spark: SparkSession, refs: list[RunRef]) -> DataFrame:
    """Per-run constants: loop period, SLO, and the ideal scaler's demand coefficients (in operator order)."""
    rows = pd.DataFrame(
        [(i, r.meta.period_s, r.meta.slo_latency_s, r.meta.slo_throughput_ratio,
          float(r.meta.min_parallelism), [float(c) for c in r.meta.coefficients.values()])
         for i, r in enumerate(refs)],
        columns=["rid", "period_s", "slo_lat", "slo_ratio", "min_p", "coefs"])
    return spark.createDataFrame(rows, "rid int, period_s double, slo_lat double, slo_ratio double, "
                                       "min_p double, coefs array<double>")


def partitioned_job_samples(spark: SparkSession, refs: list[RunRef], partitions: int
                            ) -> tuple[DataFrame, pd.DataFrame]:
    """Samples hash-partitioned by run and cached, plus each run's first and last timestamp.

    This is the only shuffle: every later window and aggregation groups by the
    run plus other keys, which this partitioning already satisfies, so Spark
    plans them without exchanging data again. Nothing is joined onto the
    millions of rows: per-run constants are applied after aggregating.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    job = load_samples(spark, refs).repartition(partitions, "rid").persist(StorageLevel.MEMORY_AND_DISK)
    bounds = pd.DataFrame(job.groupBy("rid").agg(F.min("ts").alias("run_start"), F.max("ts").alias("run_end"))
                          .toPandas())
    expected = sum(1 for r in refs if r.timeseries_path is not None)
    if len(bounds) < expected and expected > 0:
        missing = expected - len(bounds)
        raise RuntimeError(f"{missing} timeseries files gave no samples (empty, or Spark spelled their paths in a "
                           "way file_uris() does not know)")
    return job, bounds


def series_stats(job: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(run, metric, operator) -> the step function's area up to its last sample, max, min, last, n;
    and p50/p95 apart (only for `PERCENTILE_METRICS`: an exact percentile keeps every value).

    Gap markers (null values) hold nothing: their duration is in neither the area nor the span. The
    last sample's share (it holds until the run's end, unless it is a gap marker) is added on the
    driver (`finish_series`); series without a measured sample are left out.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("rid", "metric", "operator").orderBy("ts")
    held = job.withColumn("dt", F.lead("ts").over(w) - F.col("ts"))
    measured = F.col("value").isNotNull()
    agg = held.groupBy("rid", "metric", "operator").agg(
        F.sum(F.col("value") * F.col("dt")).alias("area"),
        F.sum(F.when(measured, F.col("dt"))).alias("span"),
        F.avg("value").alias("plain_mean"),
        F.max("value").alias("max"),
        F.min("value").alias("min"),
        F.max_by("value", F.when(measured, F.col("ts"))).alias("last"),
        F.max_by("value", "ts").alias("tail_value"),  # null when the series ends in a gap
        F.max("ts").alias("last_ts"),
        F.count("value").alias("n"),
    ).where(F.col("n") > 0)
    pct = (job.where(F.col("metric").isin(*PERCENTILE_METRICS) & (F.col("operator") == ""))
           .groupBy("rid", "metric", "operator")
           .agg(F.percentile("value", F.array(F.lit(0.5), F.lit(0.95))).alias("pct"))
           .select("rid", "metric", "operator", F.col("pct").getItem(0).alias("p50"),
                   F.col("pct").getItem(1).alias("p95")))
    return agg, pct


def finish_series(agg: pd.DataFrame, pct: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Add each series' last interval (last sample -> run end) and the percentiles."""
    df = agg.merge(bounds, on="rid", how="left").merge(pct, on=["rid", "metric", "operator"], how="left")
    tail = (df["run_end"] - df["last_ts"]).clip(lower=0.0).where(df["tail_value"].notna(), 0.0)
    df["tw_sum"] = df["area"].fillna(0.0) + df["tail_value"].fillna(0.0) * tail
    df["span"] = df["span"].fillna(0.0) + tail
    df["tw_mean"] = (df["tw_sum"] / df["span"]).where(df["span"] > 0, df["plain_mean"])
    return df


def provisioning(job: DataFrame, runs: DataFrame) -> DataFrame:
    """Gesscale's accuracyU/O and timeshareU/O (sec. V): actual task managers against ideal(t).

    One pass per run: ideal(t) from each input-rate sample (sum over operators
    of max(min_p, ceil(rate x coefficient))), both step functions forward-filled
    over the run's ordered samples. Rows sharing a timestamp get dt = 0 except
    the last, which has seen every value at that time. The final row's values
    are returned so the driver adds the interval up to the run's end.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = (job.where((F.col("operator") == "") & F.col("metric").isin(Metric.INPUT_RATE, Metric.TASKMANAGERS))
            .join(F.broadcast(runs.where(F.size("coefs") > 0).select("rid", "coefs", "min_p")), "rid"))
    need = F.aggregate(
        F.transform("coefs", lambda c: F.greatest(F.col("min_p"),
                                                  F.ceil(F.col("value") * c - F.lit(CEIL_EPS)).cast("double"))),
        F.lit(0.0), lambda acc, x: acc + x)
    upto = Window.partitionBy("rid").orderBy("ts").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    w = Window.partitionBy("rid").orderBy("ts")
    x = (rows.select("rid", "ts",
                     F.when(F.col("metric") == Metric.INPUT_RATE, need).alias("ideal"),
                     F.when(F.col("metric") == Metric.TASKMANAGERS, F.col("value")).alias("actual"))
         .withColumn("i", F.last("ideal", ignorenulls=True).over(upto))
         .withColumn("a", F.last("actual", ignorenulls=True).over(upto))
         .withColumn("dt", F.lead("ts").over(w) - F.col("ts")))
    both = F.col("i").isNotNull() & F.col("a").isNotNull()
    dt_both = F.when(both, F.col("dt"))
    dt_i = F.when(F.col("i").isNotNull(), F.col("dt"))
    final = F.col("dt").isNull()
    return x.groupBy("rid").agg(
        F.sum(F.greatest(F.lit(0.0), F.col("i") - F.col("a")) * dt_both).alias("under"),
        F.sum(F.greatest(F.lit(0.0), F.col("a") - F.col("i")) * dt_both).alias("over"),
        F.sum(F.when(both & (F.col("i") > F.col("a")), F.col("dt"))).alias("t_under"),
        F.sum(F.when(both & (F.col("a") > F.col("i")), F.col("dt"))).alias("t_over"),
        F.sum(dt_both).alias("period"),
        F.sum(F.col("i") * dt_i).alias("ideal_area"),
        F.sum(dt_i).alias("ideal_span"),
        F.avg("ideal").alias("ideal_plain"),
        F.first(F.when(final, F.col("i")), ignorenulls=True).alias("i_last"),
        F.first(F.when(final, F.col("a")), ignorenulls=True).alias("a_last"),
        F.max("ts").alias("last_ts"),
    )


def finish_provisioning(prov: pd.DataFrame, bounds: pd.DataFrame) -> pd.DataFrame:
    """Add the last interval (last sample -> run end) and normalise by the period."""
    df = prov.merge(bounds, on="rid", how="left")
    tail = (df["run_end"] - df["last_ts"]).clip(lower=0.0)
    i, a = df["i_last"], df["a_last"]
    has_both = i.notna() & a.notna()
    zero = 0.0

    def add(col: str, extra: pd.Series) -> pd.Series:
        return df[col].fillna(zero) + extra.where(has_both, zero).fillna(zero)

    period = add("period", tail)
    out = pd.DataFrame({"rid": df["rid"]})
    out["accuracy_u"] = add("under", (i - a).clip(lower=0.0) * tail) / period
    out["accuracy_o"] = add("over", (a - i).clip(lower=0.0) * tail) / period
    out["timeshare_u"] = 100.0 * add("t_under", tail.where(i > a, zero)) / period
    out["timeshare_o"] = 100.0 * add("t_over", tail.where(a > i, zero)) / period
    ideal_span = df["ideal_span"].fillna(zero) + tail.where(i.notna(), zero)
    ideal_area = df["ideal_area"].fillna(zero) + (i * tail).where(i.notna(), zero)
    out["ideal_avg"] = (ideal_area / ideal_span).where(ideal_span > 0, df["ideal_plain"])
    out["period"] = period
    return out


def qos_violations(job: DataFrame, runs: DataFrame, bounds: DataFrame) -> DataFrame:
    """De Matteis & Mencagli's QoS violations (sec. 5.3.3) per control step of one loop period."""
    from pyspark.sql import functions as F

    consts = runs.select("rid", "period_s", "slo_lat", "slo_ratio").join(bounds.select("rid", "run_start"), "rid")
    rows = (job.where((F.col("operator") == "")
                      & F.col("metric").isin(Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LATENCY_KAFKA))
            .join(F.broadcast(consts), "rid")
            .withColumn("bucket", F.floor((F.col("ts") - F.col("run_start")) / F.col("period_s"))))
    steps = rows.groupBy("rid", "bucket").agg(
        F.avg(F.when(F.col("metric") == Metric.INPUT_RATE, F.col("value"))).alias("inp"),
        F.avg(F.when(F.col("metric") == Metric.THROUGHPUT, F.col("value"))).alias("thr"),
        F.avg(F.when(F.col("metric") == Metric.LATENCY_KAFKA, F.col("value"))).alias("lat"),
        F.first("slo_lat").alias("slo_lat"), F.first("slo_ratio").alias("slo_ratio"),
    )
    ratio_bad = (F.col("inp") > 0) & F.col("thr").isNotNull() & (F.col("thr") / F.col("inp") < F.col("slo_ratio"))
    lat_bad = F.col("lat").isNotNull() & (F.col("lat") > F.col("slo_lat"))
    bad = F.coalesce(ratio_bad, F.lit(False)) | F.coalesce(lat_bad, F.lit(False))
    return steps.groupBy("rid").agg(F.sum(bad.cast("int")).alias("violations"), F.count("*").alias("steps"))


def excess_facts(job: DataFrame) -> DataFrame:
    """When the input stopped (if it did) and when the Kafka backlog was drained after that."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_run = Window.partitionBy("rid")
    is_inp = F.col("metric") == Metric.INPUT_RATE
    is_lag = F.col("metric") == Metric.LAG
    rows = (job.where((F.col("operator") == "") & F.col("metric").isin(Metric.INPUT_RATE, Metric.LAG))
            .withColumn("last_busy", F.max(F.when(is_inp & (F.col("value") > 0), F.col("ts"))).over(per_run))
            .withColumn("stop_ts", F.min(F.when(is_inp & (F.col("ts") > F.col("last_busy")), F.col("ts")))
                        .over(per_run)))
    return rows.groupBy("rid").agg(
        F.first("stop_ts").alias("stop_ts"),
        F.min(F.when(is_lag & (F.col("ts") >= F.col("stop_ts")) & (F.col("value") <= 1.0), F.col("ts")))
        .alias("drained_ts"),
        F.max(F.when(is_lag, F.col("ts"))).alias("last_lag_ts"),
    ).where(F.col("last_lag_ts").isNotNull())


def _nan(v: Any) -> float:
    return math.nan if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def summarise(spark: SparkSession, refs: list[RunRef],
              progress: Callable[[str], Any] | None = None) -> AnalysisResult:
    """The per-run summary of every run; Spark reduces the samples, the driver assembles rows."""
    from pyspark.sql import functions as F

    def step(msg: str) -> None:
        if progress is not None:
            progress(msg)

    runs = _runs_frame(spark, refs)
    run_ids = [r.meta.run_id for r in refs]
    stats_pdf = pd.DataFrame(columns=SERIES_STATS_COLUMNS)
    bounds_pdf = pd.DataFrame(columns=["run_id", "run_start", "run_end"])
    prov_pdf = qos_pdf = excess_pdf = pd.DataFrame(columns=["run_id"])
    if any(r.timeseries_path is not None for r in refs):
        step("reading and partitioning samples")
        partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
        job, bounds = partitioned_job_samples(spark, refs, partitions)
        bounds_df = spark.createDataFrame(bounds, "rid int, run_start double, run_end double")
        step("series statistics")
        agg, pct = series_stats(job)  # gap markers count here, as gaps
        stats_pdf = finish_series(pd.DataFrame(agg.toPandas()), pd.DataFrame(pct.toPandas()), bounds)
        measured = job.where(F.col("value").isNotNull())  # the rest takes the measured samples only
        step("SPEC provisioning")
        prov_pdf = finish_provisioning(pd.DataFrame(provisioning(measured, runs).toPandas()), bounds)
        step("QoS violations")
        qos_pdf = pd.DataFrame(qos_violations(measured, runs, bounds_df).toPandas())
        step("excess time")
        excess_pdf = pd.DataFrame(excess_facts(measured).toPandas())
        job.unpersist()
        bounds_pdf = bounds
        for frame in (stats_pdf, bounds_pdf, prov_pdf, qos_pdf, excess_pdf):
            frame["run_id"] = [run_ids[int(i)] for i in frame["rid"]]
        stats_pdf = stats_pdf[SERIES_STATS_COLUMNS]
    step("assembling rows")
    series = series_from_frame(stats_pdf)
    bounds_by = {r.run_id: (float(r.run_start), float(r.run_end)) for r in bounds_pdf.itertuples()}
    prov_by = {r.run_id: r for r in prov_pdf.itertuples()}
    qos_by = {r.run_id: (int(r.violations), int(r.steps)) for r in qos_pdf.itertuples()}
    excess_by = {r.run_id: ExcessFacts(_nan(r.stop_ts), _nan(r.drained_ts), _nan(r.last_lag_ts))
                 for r in excess_pdf.itertuples()}
    rows, conv, ops = [], [], []
    for ref in refs:
        rid = ref.meta.run_id
        start, end = bounds_by.get(rid, (0.0, 0.0))
        pieces = RunPieces(start, end, series.get(rid, {}), qos=qos_by.get(rid, (0, 0)), excess=excess_by.get(rid))
        p = prov_by.get(rid)
        if p is not None and ref.meta.coefficients and _nan(p.period) > 0:
            pieces.spec = SpecFacts(_nan(p.accuracy_u), _nan(p.accuracy_o), _nan(p.timeshare_u),
                                    _nan(p.timeshare_o), _nan(p.ideal_avg))
        event_cols, stages = event_metrics(ref.meta, ref.events, end)
        rows.append(assemble_row(ref.meta, pieces, event_cols))
        conv.extend(convergence_rows(ref.meta, stages))
        ops.extend(operator_rows(ref.meta, pieces))
    return AnalysisResult(pd.DataFrame(rows), pd.DataFrame(conv), pd.DataFrame(ops),
                          stats_pdf[SERIES_STATS_COLUMNS].reset_index(drop=True))


def aggregate_cells(spark: SparkSession, summary: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per-cell mean, t-interval and n computed by Spark (same columns as `aggregate.aggregate_cells`).

    The summary goes to Spark in long format (cell, metric, value), so one
    groupBy with three aggregates serves every metric; the driver applies the
    t quantile and pivots back to one row per cell.
    """
    from pyspark.sql import functions as F

    if summary.empty:
        return pd.DataFrame(columns=CELL_KEYS + ["runs"])
    cols = metric_columns(summary)
    wide = summary[CELL_KEYS + cols].copy()
    for c in cols:
        wide[c] = wide[c].astype(float)
    for k in CELL_KEYS:
        wide[k] = wide[k].astype(str)
    long = wide.melt(id_vars=CELL_KEYS, value_vars=cols, var_name="metric", value_name="value")
    schema = ", ".join(f"{k} string" for k in CELL_KEYS) + ", metric string, value double"
    sdf = spark.createDataFrame(long, schema)
    v = F.when(~F.isnan("value"), F.col("value"))
    agg = pd.DataFrame(sdf.groupBy(*CELL_KEYS, "metric")
                       .agg(F.avg(v).alias("mean"), F.stddev_samp(v).alias("sd"), F.count(v).alias("n"),
                            F.count("*").alias("runs"))
                       .toPandas())
    agg["ci"] = [ci_half_width(_nan(s), int(k), level) for s, k in zip(agg["sd"], agg["n"], strict=True)]
    index = agg.set_index(CELL_KEYS + ["metric"])
    mean, ci, n = (index[c].unstack("metric") for c in ("mean", "ci", "n"))
    data: dict[str, Any] = {}
    for c in cols:
        data[c] = mean[c].astype(float)
        data[f"{c}_ci"] = ci[c].astype(float)
        data[f"{c}_n"] = n[c].astype(int)
    data["runs"] = index["runs"].groupby(level=CELL_KEYS).max().astype(int)
    out = pd.DataFrame(data).reset_index()
    for k in CELL_KEYS:  # back to the summary's dtypes
        out[k] = out[k].astype(summary[k].dtype)
    return out.sort_values(CELL_KEYS).reset_index(drop=True)
