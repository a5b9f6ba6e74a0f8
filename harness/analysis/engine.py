"""Which analysis engine runs: pandas for small results, Spark for large ones or a named cluster.

Both engines compute the same `reductions.Reductions` and give the same numbers;
they differ in cost. pandas starts at once and runs in this process; Spark pays a
JVM start (~10 s) and plans per query but spreads the samples over every core (or
a cluster). `benchmarks/bench_analysis.py` measures both on 500, 2,000 and 5,000
synthetic runs; `SPARK_MIN_RUNS` sits between the sizes where pandas and where
Spark was faster on a 2-core machine (figures in the README). No heavy imports
here: the CLI reads these names to build its help.
"""

from __future__ import annotations

from typing import Literal

Engine = Literal["spark", "pandas"]
EngineChoice = Literal["auto", "spark", "pandas"]
ENGINES: tuple[EngineChoice, ...] = ("auto", "spark", "pandas")
SPARK_MIN_RUNS = 1000  # `auto` uses Spark from this many run records on
DEFAULT_MASTER = "local[*]"
LOG_NAME = "analysis.log"  # beside the outputs: our, Spark's and the JVM's log lines


def choose_engine(engine: EngineChoice, runs: int, master: str | None = None) -> Engine:
    """The engine `engine` stands for with `runs` run records (`auto`: by size, or Spark for a named master)."""
    if engine != "auto":
        return engine
    if master is not None or runs >= SPARK_MIN_RUNS:
        return "spark"
    return "pandas"
