"""The Spark engine: batches of runs analysed in parallel on Spark's workers.

Spark distributes the same unit of work the pandas engine runs in its own
process - `assembly.analyse_dirs`: read a batch of run records (pyarrow), reduce
their samples (`reductions`, numpy), assemble their rows - over every core of
this machine (`local[*]`) or a cluster (`--master URL`), and the driver collects
a few rows per run. So both engines give the same numbers by construction and a
metric is defined once.

Why not Spark SQL over the samples: measured on 500 runs (12.6 M samples, 2
cores), a native plan (one scan, broadcast joins for run and series ids, one
shuffle by run, windows over the sorted cache) used ~9x the CPU of the numpy
reductions - string keys, the shuffle and the sorts cost far more per sample than
`reduceat` over already-sorted arrays - so it could never catch up with one
pandas process on two cores. Spreading the numpy reductions over Spark's Python
workers pays from about 2,000 runs on 2 cores (`engine.SPARK_MIN_RUNS`).

A cluster must see the results directory at the same path and have this package
installed for its Python workers. The JVM's output and Spark's log lines go to
the analysis log, not the console.
"""

from __future__ import annotations

import logging
import os
import pickle
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.analysis.assembly import RunRows, analyse_dirs
from harness.analysis.spark_session import build_session
from harness.analysis.summary import AnalysisResult

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark import Broadcast
    from pyspark.sql import SparkSession

# runs per task: big enough that a task's fixed costs vanish, small enough that every core gets several
MAX_BATCH_RUNS = 64
TASKS_PER_CORE = 4

log = logging.getLogger(__name__)


def batch_size(runs: int, cores: int) -> int:
    """Runs per task: `TASKS_PER_CORE` tasks per core, at most `MAX_BATCH_RUNS` runs each."""
    return max(1, min(MAX_BATCH_RUNS, -(-runs // (TASKS_PER_CORE * max(1, cores)))))


def _analyse_batches(batches: Broadcast[list[list[str]]], results_dir: str
                     ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The function Spark runs on its workers: batch numbers in, (batch, pickled `RunRows`) out."""

    def run(ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        from harness.analysis.assembly import analyse_dirs

        for chunk in ids:
            for b in chunk.column(0).to_pylist():
                rows = analyse_dirs([Path(d) for d in batches.value[b]], Path(results_dir))
                yield pa.RecordBatch.from_pydict({"batch": [b], "rows": [pickle.dumps(rows, protocol=5)]})

    return run


def analyse_on_spark(spark: SparkSession, batches: list[list[str]], results_dir: Path,
                     progress: Callable[[str], Any] | None = None, done_runs: int = 0, total_runs: int = 0
                     ) -> RunRows:
    """`assembly.analyse_dirs` of each batch of run directories, one Spark task per batch."""
    rows = RunRows()
    if not batches:
        return rows
    shared = spark.sparkContext.broadcast(batches)  # each worker fetches the lists once, not with every task
    work = _analyse_batches(shared, str(Path(results_dir).resolve()))
    jobs = spark.range(0, len(batches), 1, numPartitions=len(batches)).mapInArrow(work, "batch long, rows binary")
    try:
        with _reporting(spark, batches, done_runs, total_runs, progress):
            collected = jobs.collect()
    finally:
        shared.unpersist()
    for r in sorted(collected, key=lambda r: r["batch"]):
        rows.extend(pickle.loads(r["rows"]))
    return rows


def summarise_dirs(run_dirs: Sequence[Path], results_dir: Path, master: str = "local[*]",
                   progress: Callable[[str], Any] | None = None, log_file: Path | None = None,
                   conf: dict[str, str] | None = None) -> AnalysisResult:
    """The per-run summary of every run directory, batches of runs spread over Spark's workers.

    The driver is not idle while the JVM starts (seconds): it analyses batches
    itself, in order, until the session is up, and hands Spark the rest.
    """
    cores = (os.cpu_count() or 1) if master.startswith("local") else 0
    size = batch_size(len(run_dirs), cores) if cores else MAX_BATCH_RUNS
    paths = [str(Path(d).resolve()) for d in run_dirs]
    batches = [paths[i:i + size] for i in range(0, len(paths), size)]
    rows = RunRows()
    done = 0
    with ThreadPoolExecutor(1, thread_name_prefix="spark-start") as pool:
        starting = pool.submit(build_session, master, conf=conf, log_file=log_file)
        if progress is not None:
            progress("starting Spark")
        while done < len(batches) and not starting.done():
            rows.extend(analyse_dirs([Path(d) for d in batches[done]], results_dir))
            done += 1
            if progress is not None:
                progress(f"run {sum(len(b) for b in batches[:done])}/{len(paths)} (while Spark starts)")
        spark = starting.result()
    log.info("Spark up (%s, %d cores); the driver analysed %d of %d batches meanwhile",
             spark.sparkContext.master, spark.sparkContext.defaultParallelism, done, len(batches))
    try:
        rows.extend(analyse_on_spark(spark, batches[done:], results_dir, progress,
                                     sum(len(b) for b in batches[:done]), len(paths)))
    finally:
        spark.stop()
    return rows.result()


class _reporting:
    """Reports finished tasks (`run k/n`) while a job runs (Spark's status tracker, polled)."""

    def __init__(self, spark: SparkSession, batches: list[list[str]], done: int, total: int,
                 progress: Callable[[str], Any] | None):
        self.tracker = spark.sparkContext.statusTracker()
        self.per_task = -(-sum(len(b) for b in batches) // len(batches))
        self.done, self.total = done, total or sum(len(b) for b in batches)
        self.progress = progress
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        while not self.stop.wait(0.5):
            finished = 0
            for sid in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(sid)
                if info is not None:
                    finished = max(finished, info.numCompletedTasks)
            if self.progress is not None:
                self.progress(f"run {min(self.total, self.done + finished * self.per_task)}/{self.total} on Spark")

    def __enter__(self) -> _reporting:
        if self.progress is not None:
            self.progress(f"run {self.done}/{self.total} on Spark")
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join()
