"""Analysis benchmark: 500 run records of 140-minute runs at 5 s resolution into all tables.

Generates synthetic run records (job-level metrics + per-operator metrics for
3 operators, long format, ~25 k rows per run) into a temp dir (or `--data`,
reused if it already holds enough runs), then times

- Spark: session start + per-run summaries + per-cell aggregates + tables, and
- pandas: the same summaries, aggregates and tables,

checks both give the same numbers, and prints both figures. Target (issue 4):
Spark <= 60 s on a 2-core machine, Spark start included.

    .venv/bin/python benchmarks/bench_analysis.py [--runs 500] [--minutes 140] [--data DIR] [--master URL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.analysis import pandas_engine, spark_jobs
from harness.analysis.aggregate import CELL_KEYS, aggregate_cells, compare_frames
from harness.analysis.loader import discover
from harness.analysis.synthetic import synthetic_run
from harness.analysis.tables import build_tables, write_tables
from harness.record import find_run_dirs

AUTOSCALERS = {"ds2": 1.0, "dhalion": 0.85, "hpa-cpu": 1.3, "hpa-varga": 1.15, "flink-operator": 1.05}
QUERIES = ("q1", "q11")
PATTERNS = ("cosine", "convergence")


def generate(root: Path, runs: int, minutes: float, step_s: float, console: Console) -> None:
    cells = [(q, p, a) for q in QUERIES for p in PATTERNS for a in AUTOSCALERS]
    with Progress(TextColumn("generating run records"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("gen", total=runs)
        for i in range(runs):
            query, pattern, name = cells[i % len(cells)]
            rep = i // len(cells)
            synthetic_run(root / "bench" / f"{query}_{pattern}_{name}-r{rep}", autoscaler=name, query=query,
                          pattern=pattern, seed=i + 1, repetition=rep, duration_s=minutes * 60, step_s=step_s,
                          lag_factor=AUTOSCALERS[name] * (1 + 0.02 * (rep % 5)), faults=int(i % 37 == 0),
                          matrix="bench")
            bar.advance(task)


def jvm_cpu_s() -> float:
    """CPU seconds the Spark driver JVM has used (Linux /proc): a figure less sensitive to other load."""
    try:
        from pyspark import SparkContext

        pid = SparkContext._gateway.proc.pid  # type: ignore[union-attr]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except Exception:
        return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=500)
    ap.add_argument("--minutes", type=float, default=140.0)
    ap.add_argument("--step", type=float, default=5.0)
    ap.add_argument("--data", type=Path, default=None, help="keep/reuse the generated records here")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--skip-pandas", action="store_true")
    args = ap.parse_args()
    console = Console()
    tmp = None
    root = args.data
    if root is None:
        tmp = tempfile.mkdtemp(prefix="bench-analysis-")
        root = Path(tmp)
    try:
        have = len(find_run_dirs(root)) if root.exists() else 0
        if have < args.runs:
            t0 = time.perf_counter()
            generate(root, args.runs, args.minutes, args.step, console)
            console.print(f"generated {args.runs} run records in {time.perf_counter() - t0:.1f} s under {root}")
        refs = discover(root)[: args.runs]
        rows = sum(pandas_engine.read_timeseries(r).shape[0] for r in refs[:1]) * len(refs)
        console.print(f"{len(refs)} runs, ~{rows / 1e6:.1f} M long-format rows, {os.cpu_count()} cores")

        t0 = time.perf_counter()
        cpu0 = time.process_time()
        spark = spark_jobs.build_session(args.master)
        t_start = time.perf_counter() - t0
        by_spark = spark_jobs.summarise(spark, refs)
        cells_spark = spark_jobs.aggregate_cells(spark, by_spark.summary)
        out_spark = root / "_out-spark"
        write_tables(build_tables(cells_spark, by_spark.convergence), out_spark)
        t_spark = time.perf_counter() - t0
        cpu_spark = jvm_cpu_s() + time.process_time() - cpu0
        spark.stop()
        console.print(f"Spark ({args.master}): {t_spark:.1f} s total, of which session start {t_start:.1f} s; "
                      f"CPU {cpu_spark:.1f} s (JVM + driver); load average {os.getloadavg()[0]:.1f}")

        if args.skip_pandas:
            return
        t0 = time.perf_counter()
        cpu0 = time.process_time()
        by_pandas = pandas_engine.summarise(refs)
        cells_pandas = aggregate_cells(by_pandas.summary)
        write_tables(build_tables(cells_pandas, by_pandas.convergence), root / "_out-pandas")
        t_pandas = time.perf_counter() - t0
        cpu_pandas = time.process_time() - cpu0
        console.print(f"pandas: {t_pandas:.1f} s; CPU {cpu_pandas:.1f} s")

        problems = (compare_frames(by_pandas.summary, by_spark.summary, ["run_id"])
                    + compare_frames(cells_pandas, cells_spark, CELL_KEYS))
        if problems:
            console.print("[red]Spark and pandas DISAGREE:[/red]")
            for p in problems[:20]:
                console.print(f"  {p}")
        else:
            console.print(f"Spark and pandas agree on {len(by_spark.summary)} run summaries x "
                          f"{by_spark.summary.shape[1]} columns and {len(cells_spark)} cells (rtol 1e-6)")
        console.print(f"RESULT runs={len(refs)} spark_s={t_spark:.1f} spark_start_s={t_start:.1f} "
                      f"spark_cpu_s={cpu_spark:.1f} pandas_s={t_pandas:.1f} pandas_cpu_s={cpu_pandas:.1f} "
                      f"agree={not problems}")
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
