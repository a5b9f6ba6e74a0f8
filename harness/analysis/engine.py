"""Which analysis engine runs: pandas for small results, Spark for large ones or a named cluster.

Both engines compute the same `reductions.Reductions` and give the same numbers;
they differ in cost. pandas starts at once and runs in this process on one core;
Spark pays a JVM start (~15 s of CPU) and ships batches to its Python workers,
but spreads them over every core (or a cluster). `benchmarks/bench_analysis.py`
measured on this 2-core machine (shared, the lock held): 2,000 runs Spark 102.8 s /
pandas 146.0 s (0.70x; CPU 169 s / 144 s), same runs.parquet and cells.csv (figures,
commands and the 500-run row in docs/analysis.md). `SPARK_MIN_RUNS` is the smallest measured
size at which Spark was at least as fast.
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
