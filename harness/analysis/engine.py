"""Which analysis engine runs: pandas for small results, Spark for large ones or a named cluster.

Both engines compute the same `reductions.Reductions` and give the same numbers;
they differ in cost. pandas starts at once and runs in this process on one core;
Spark pays a JVM start and a second Python worker (6-12 s more CPU than pandas at 2,000 runs)
but spreads the batches over every core (or a cluster). `benchmarks/bench_analysis.py`
measured on this 2-core machine (2026-11-27, the lock held, quiet: load about 2): Spark
0.67x pandas' wall time at 2,000 runs (24.1 s / 35.9 s) and 0.65x at 5,000 (63.4 s / 97.9 s),
1.65x at 500; same runs.parquet and cells.csv. With another process holding one core Spark
is slower (1.09x at 5,000): figures, loads and commands in docs/analysis.md.
`SPARK_MIN_RUNS` is the smallest measured size at which Spark was faster.
No heavy imports here: the CLI reads these names to build
its help.
"""

from __future__ import annotations

from typing import Literal

Engine = Literal["spark", "pandas"]
EngineChoice = Literal["auto", "spark", "pandas"]
ENGINES: tuple[EngineChoice, ...] = ("auto", "spark", "pandas")
SPARK_MIN_RUNS = 2000  # `auto` uses Spark from this many run records on (measured: docs/analysis.md)
DEFAULT_MASTER = "local[*]"
LOG_NAME = "analysis.log"  # beside the outputs: our, Spark's and the JVM's log lines


def choose_engine(engine: EngineChoice, runs: int, master: str | None = None) -> Engine:
    """The engine `engine` stands for with `runs` run records (`auto`: by size, or Spark for a named master)."""
    if engine != "auto":
        return engine
    if master is not None or runs >= SPARK_MIN_RUNS:
        return "spark"
    return "pandas"
