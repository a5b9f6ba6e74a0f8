"""PySpark jobs: `Reductions` of a whole results directory, and per-cell aggregates.

Spark reads every run's timeseries.parquet in one scan (columns pruned, job- and
operator-level rows only), names each row's run and series with two small
integers (broadcast joins: file -> run index, (metric, operator) -> series index),
and shuffles those compact rows once, by run. They are sorted by
(run, series, ts) and cached: every later job reads the cache in that order -
windows over (run, series) or run need no further exchange or sort, and cached
batches carry min/max statistics, so a job that needs three series skips the
batches of the others. No Python UDF runs: the driver only sends file and series
names and collects a few rows per run. Everything after `reduce` (last intervals,
rows, events) is `reductions.finish`, shared with the pandas engine; the
definitions are those of `metrics` and `tests/analysis/test_engines.py` checks
both engines agree.

`local[*]` by default; `--master URL` runs the same jobs on a cluster that can
read the same paths. The JVM's output and Spark's log lines go to the analysis
log, not the console.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.aggregate import CELL_KEYS, ci_half_width, metric_columns
from harness.analysis.loader import RunRef
from harness.analysis.metrics import CEIL_EPS
from harness.analysis.reductions import (
    BOUNDS_COLUMNS,
    EXCESS_COLUMNS,
    EXCESS_INPUT,
    EXCESS_LAG,
    PROVISIONING_COLUMNS,
    QOS_COLUMNS,
    QOS_INPUT,
    QOS_LATENCY,
    QOS_THROUGHPUT,
    SERIES_COLUMNS,
    SPEC_ACTUAL,
    SPEC_INPUT,
    Reductions,
    finish,
)
from harness.analysis.summary import PERCENTILE_METRICS, AnalysisResult

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

DEFAULT_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "4g",
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    # list the run records' files on the driver: a distributed listing job costs one task per path
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1000000",
    # a window over one run holds all its samples: keep them in memory (the default spills past 4096 rows)
    "spark.sql.windowExec.buffer.in.memory.threshold": "4194304",
    # sorted (run, series) columns compress to almost nothing; ts and value are stored as they are
    "spark.sql.inMemoryColumnarStorage.compressed": "true",
}

# log4j2 configuration for the driver JVM: warnings and errors to its stderr, which is the analysis log
LOG4J2 = """\
status = error
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet
logger.parquet.level = error
"""


def build_session(master: str = "local[*]", app: str = "bench-analysis", conf: dict[str, str] | None = None,
                  log_file: Path | None = None) -> SparkSession:
    """A session with a modest local footprint (no UI, few shuffle partitions).

    With `log_file`, the driver JVM this starts writes its stdout/stderr there
    (start-up banner, log4j lines, JVM warnings); a JVM already running in this
    process keeps whatever output it had.
    """
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    # Python workers (if any are ever needed) run this interpreter, not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings = {**DEFAULT_CONF, **(conf or {})}
    if master.startswith("local"):
        # a local session listens on loopback only (Spark otherwise binds the host's first address)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1", **settings}
    if SparkContext._gateway is None and log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        config = Path(tempfile.mkdtemp(prefix="bench-spark-")) / "log4j2.properties"
        config.write_text(LOG4J2)
        settings["spark.driver.extraJavaOptions"] = (
            f"{settings.get('spark.driver.extraJavaOptions', '')} -Dlog4j2.configurationFile={config.as_uri()}"
        ).strip()
        spark_conf = SparkConf(loadDefaults=False).setMaster(master).setAppName(app).setAll(list(settings.items()))
        with log_file.open("ab") as out:
            gateway = launch_gateway(spark_conf, popen_kwargs={"stdout": out, "stderr": subprocess.STDOUT})
        SparkContext(conf=spark_conf, gateway=gateway)
        config.unlink(missing_ok=True)
        config.parent.rmdir()
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    if log_file is None:
        spark.sparkContext.setLogLevel("ERROR")
    if "spark.sql.shuffle.partitions" not in (conf or {}):
        # two partitions per core: 4 on a 2-core machine, more on a cluster (Spark's 200 is far too many here)
        spark.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * spark.sparkContext.defaultParallelism)))
    return spark


def file_uris(path: Path) -> list[str]:
    """The spellings Spark may give a local file in `_metadata.file_path`; joining on them avoids a
    per-row regular expression over millions of samples."""
    resolved = path.resolve()
    uri = resolved.as_uri()  # file:///a%20b/x
    return sorted({uri, uri.replace("file:///", "file:/", 1), str(resolved)})


def _small(spark: SparkSession, frame: pd.DataFrame, schema: str) -> DataFrame:
    """A driver-side table as a Spark frame (Arrow, no Python workers)."""
    return spark.createDataFrame(frame, schema)


def scan(spark: SparkSession, refs: list[RunRef]) -> tuple[DataFrame, DataFrame]:
    """Job- and operator-level samples (subtask -1, NaN/null dropped) of every run with their file,
    and the table file -> run index (`rid`)."""
    from pyspark.sql import functions as F

    paths = [(i, r.timeseries_path) for i, r in enumerate(refs) if r.timeseries_path is not None]
    files = pd.DataFrame([(uri, i) for i, p in paths for uri in file_uris(p)], columns=["file", "rid"])
    raw = (spark.read.schema("ts double, metric string, operator string, subtask int, value double")
           .parquet(*[str(p.resolve()) for _, p in paths])
           .where((F.col("subtask") == -1) & F.col("value").isNotNull() & ~F.isnan("value"))
           .select("ts", "metric", "operator", "value", F.col("_metadata.file_path").alias("file")))
    return raw, _small(spark, files, "file string, rid int")


def series_names(samples: DataFrame) -> pd.DataFrame:
    """Every (metric, operator) in the samples, numbered in name order: `sid`."""
    names = pd.DataFrame(samples.select("metric", "operator").distinct().toPandas())
    names = names.sort_values(["metric", "operator"]).reset_index(drop=True)
    names["sid"] = range(len(names))
    return names


def sorted_samples(spark: SparkSession, samples: DataFrame, files: DataFrame, names: pd.DataFrame,
                   partitions: int) -> DataFrame:
    """(rid, sid, ts, value) hash-partitioned by run, sorted by (rid, sid, ts) and cached.

    The only shuffle. Later windows and aggregations group by the run plus
    other keys, which this partitioning satisfies, and read the cache in
    this order, so Spark plans them without exchanging or sorting again.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    sids = _small(spark, names, "metric string, operator string, sid int")
    compact = (samples.join(F.broadcast(files), "file").join(F.broadcast(sids), ["metric", "operator"])
               .select("rid", "sid", "ts", "value"))
    cached = (compact.repartition(partitions, "rid").sortWithinPartitions("rid", "sid", "ts")
              .persist(StorageLevel.MEMORY_AND_DISK))
    cached.count()
    return cached


def _sid(names: pd.DataFrame, metric: str, operator: str = "") -> int:
    """A job-level series' index, -1 when no run has it."""
    hit = names[(names["metric"] == metric) & (names["operator"] == operator)]
    return int(hit["sid"].iloc[0]) if len(hit) else -1


def series_facts(rows: DataFrame) -> DataFrame:
    """(rid, sid) -> area up to the last sample, span, plain mean, max, min, last, first and last ts, n."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.partitionBy("rid", "sid").orderBy("ts")
    held = rows.withColumn("dt", F.lead("ts").over(w) - F.col("ts"))
    return held.groupBy("rid", "sid").agg(
        F.sum(F.col("value") * F.col("dt")).alias("area"),
        F.sum("dt").alias("span"),
        F.avg("value").alias("plain_mean"),
        F.max("value").alias("max"),
        F.min("value").alias("min"),
        F.max_by("value", "ts").alias("last"),
        F.max("ts").alias("last_ts"),
        F.min("ts").alias("first_ts"),
        F.count("value").alias("n"),
    )


def percentiles(rows: DataFrame, sids: list[int]) -> DataFrame:
    """(rid, sid) -> exact p50 and p95 of the series `sids` (an exact percentile keeps every value: few series)."""
    from pyspark.sql import functions as F

    return (rows.where(F.col("sid").isin(*sids)).groupBy("rid", "sid")
            .agg(F.percentile("value", F.array(F.lit(0.5), F.lit(0.95))).alias("pct"))
            .select("rid", "sid", F.col("pct").getItem(0).alias("p50"), F.col("pct").getItem(1).alias("p95")))


def provisioning(rows: DataFrame, runs: DataFrame, inp: int, tm: int) -> DataFrame:
    """Gesscale's accuracyU/O and timeshareU/O (sec. V): actual task managers against ideal(t).

    One pass per run: ideal(t) from each input-rate sample (sum over operators
    of max(min_p, ceil(rate x coefficient))), both step functions forward-filled
    over the run's ordered samples. Rows sharing a timestamp get dt = 0 except
    the last, which has seen every value at that time. The final row's values
    are returned so the driver adds the interval up to the run's end.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    x = (rows.where(F.col("sid").isin(inp, tm))
         .join(F.broadcast(runs.where(F.size("coefs") > 0).select("rid", "coefs", "min_p")), "rid"))
    need = F.aggregate(
        F.transform("coefs", lambda c: F.greatest(F.col("min_p"),
                                                  F.ceil(F.col("value") * c - F.lit(CEIL_EPS)).cast("double"))),
        F.lit(0.0), lambda acc, v: acc + v)
    upto = Window.partitionBy("rid").orderBy("ts").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    w = Window.partitionBy("rid").orderBy("ts")
    x = (x.select("rid", "ts",
                  F.when(F.col("sid") == inp, need).alias("ideal"),
                  F.when(F.col("sid") == tm, F.col("value")).alias("actual"))
         .withColumn("i", F.last("ideal", ignorenulls=True).over(upto))
         .withColumn("a", F.last("actual", ignorenulls=True).over(upto))
         .withColumn("dt", F.lead("ts").over(w) - F.col("ts")))
    both = F.col("i").isNotNull() & F.col("a").isNotNull()
    dt_both = F.when(both, F.col("dt"))
    dt_i = F.when(F.col("i").isNotNull(), F.col("dt"))
    final = F.col("dt").isNull()

    def total(c: Column) -> Column:
        return F.coalesce(F.sum(c), F.lit(0.0))

    return x.groupBy("rid").agg(
        total(F.greatest(F.lit(0.0), F.col("i") - F.col("a")) * dt_both).alias("under"),
        total(F.greatest(F.lit(0.0), F.col("a") - F.col("i")) * dt_both).alias("over"),
        total(F.when(both & (F.col("i") > F.col("a")), F.col("dt"))).alias("t_under"),
        total(F.when(both & (F.col("a") > F.col("i")), F.col("dt"))).alias("t_over"),
        total(dt_both).alias("period"),
        total(F.col("i") * dt_i).alias("ideal_area"),
        total(dt_i).alias("ideal_span"),
        F.avg("ideal").alias("ideal_plain"),
        F.first(F.when(final, F.col("i")), ignorenulls=True).alias("i_last"),
        F.first(F.when(final, F.col("a")), ignorenulls=True).alias("a_last"),
        F.max("ts").alias("last_ts"),
    )


def qos_violations(rows: DataFrame, consts: DataFrame, inp: int, thr: int, lat: int) -> DataFrame:
    """De Matteis & Mencagli's QoS violations (sec. 5.3.3) per control step of one loop period.

    Runs without an input or a throughput series have no control steps (the metric core's rule).
    """
    from pyspark.sql import functions as F

    x = (rows.where(F.col("sid").isin(inp, thr, lat))
         .join(F.broadcast(consts.select("rid", "period_s", "slo_lat", "slo_ratio", "run_start")), "rid")
         .withColumn("bucket", F.floor((F.col("ts") - F.col("run_start")) / F.col("period_s"))))
    steps = x.groupBy("rid", "bucket").agg(
        F.avg(F.when(F.col("sid") == inp, F.col("value"))).alias("inp"),
        F.avg(F.when(F.col("sid") == thr, F.col("value"))).alias("thr"),
        F.avg(F.when(F.col("sid") == lat, F.col("value"))).alias("lat"),
        F.first("slo_lat").alias("slo_lat"), F.first("slo_ratio").alias("slo_ratio"),
    )
    ratio_bad = (F.col("inp") > 0) & F.col("thr").isNotNull() & (F.col("thr") / F.col("inp") < F.col("slo_ratio"))
    lat_bad = F.col("lat").isNotNull() & (F.col("lat") > F.col("slo_lat"))
    bad = F.coalesce(ratio_bad, F.lit(False)) | F.coalesce(lat_bad, F.lit(False))
    return (steps.groupBy("rid").agg(
        F.sum(bad.cast("int")).alias("violations"), F.count("*").alias("steps"),
        F.count("inp").alias("with_inp"), F.count("thr").alias("with_thr"))
        .where((F.col("with_inp") > 0) & (F.col("with_thr") > 0)).select(*QOS_COLUMNS))


def excess_facts(rows: DataFrame, inp: int, lag: int) -> DataFrame:
    """When the input stopped (the first sample after the last with input > 0) and when the Kafka
    backlog was drained after that; runs with a lag series only."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    per_run = Window.partitionBy("rid")
    is_inp, is_lag = F.col("sid") == inp, F.col("sid") == lag
    x = (rows.where(F.col("sid").isin(inp, lag))
         .withColumn("last_busy", F.max(F.when(is_inp & (F.col("value") > 0), F.col("ts"))).over(per_run))
         .withColumn("stop_ts", F.min(F.when(is_inp & (F.col("ts") > F.col("last_busy")), F.col("ts")))
                     .over(per_run)))
    return x.groupBy("rid").agg(
        F.first("stop_ts").alias("stop_ts"),
        F.min(F.when(is_lag & (F.col("ts") >= F.col("stop_ts")) & (F.col("value") <= 1.0), F.col("ts")))
        .alias("drained_ts"),
        F.max(F.when(is_lag, F.col("ts"))).alias("last_lag_ts"),
    ).where(F.col("last_lag_ts").isNotNull())


def _run_constants(refs: list[RunRef]) -> pd.DataFrame:
    """Per-run constants: loop period, SLO, and the ideal scaler's demand coefficients (in operator order)."""
    return pd.DataFrame(
        [(i, r.meta.period_s, r.meta.slo_latency_s, r.meta.slo_throughput_ratio,
          float(r.meta.min_parallelism), [float(c) for c in r.meta.coefficients.values()])
         for i, r in enumerate(refs)],
        columns=["rid", "period_s", "slo_lat", "slo_ratio", "min_p", "coefs"])


def reduce(spark: SparkSession, refs: list[RunRef], progress: Callable[[str], Any] | None = None) -> Reductions:
    """`Reductions` of every run: one scan, one shuffle, then a few jobs over the sorted cache."""

    def step(msg: str) -> None:
        if progress is not None:
            progress(msg)

    if not any(r.timeseries_path is not None for r in refs):
        return Reductions.empty()
    partitions = int(spark.conf.get("spark.sql.shuffle.partitions") or 8)
    step("reading samples")
    samples, files = scan(spark, refs)
    names = series_names(samples)
    step("partitioning and sorting samples")
    rows = sorted_samples(spark, samples, files, names, partitions)
    try:
        step("series statistics")
        facts = pd.DataFrame(series_facts(rows).toPandas())
        pct_sids = [s for m in PERCENTILE_METRICS if (s := _sid(names, m)) >= 0]
        pct = (pd.DataFrame(percentiles(rows, pct_sids).toPandas()) if pct_sids
               else pd.DataFrame(columns=["rid", "sid", "p50", "p95"]))
        facts = facts.merge(pct, on=["rid", "sid"], how="left").merge(names, on="sid", how="left")
        bounds = facts.groupby("rid", as_index=False).agg(run_start=("first_ts", "min"), run_end=("last_ts", "max"))
        series = facts[SERIES_COLUMNS]
        runs = _run_constants(refs)
        consts = _small(spark, runs.merge(bounds, on="rid"),
                        "rid int, period_s double, slo_lat double, slo_ratio double, min_p double, "
                        "coefs array<double>, run_start double, run_end double")
        step("SPEC provisioning")
        inp, tm = _sid(names, SPEC_INPUT), _sid(names, SPEC_ACTUAL)
        prov = (pd.DataFrame(provisioning(rows, consts, inp, tm).toPandas()) if inp >= 0 and tm >= 0
                else pd.DataFrame(columns=PROVISIONING_COLUMNS))
        step("QoS violations")
        q_inp, q_thr, q_lat = (_sid(names, m) for m in (QOS_INPUT, QOS_THROUGHPUT, QOS_LATENCY))
        qos = (pd.DataFrame(qos_violations(rows, consts, q_inp, q_thr, q_lat).toPandas())
               if q_inp >= 0 and q_thr >= 0 else pd.DataFrame(columns=QOS_COLUMNS))
        step("excess time")
        e_inp, e_lag = _sid(names, EXCESS_INPUT), _sid(names, EXCESS_LAG)
        excess = (pd.DataFrame(excess_facts(rows, e_inp, e_lag).toPandas()) if e_lag >= 0
                  else pd.DataFrame(columns=EXCESS_COLUMNS))
    finally:
        rows.unpersist()
    return Reductions(bounds[BOUNDS_COLUMNS], series, prov[PROVISIONING_COLUMNS], qos[QOS_COLUMNS],
                      excess[EXCESS_COLUMNS])


def summarise(spark: SparkSession, refs: list[RunRef],
              progress: Callable[[str], Any] | None = None) -> AnalysisResult:
    """The per-run summary of every run; Spark reduces the samples, the driver assembles rows."""
    t0 = time.perf_counter()
    red = reduce(spark, refs, progress)
    if progress is not None:
        progress(f"assembling rows ({time.perf_counter() - t0:.0f} s in Spark)")
    return finish(refs, red)


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


def _nan(v: Any) -> float:
    return float("nan") if v is None or (isinstance(v, float) and v != v) else float(v)
