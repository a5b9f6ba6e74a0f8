"""Which JIT compilers the task managers' JVMs run (`local.taskmanager_jit`, `bench calibrate --jit`).

Its own module, with no dependencies, so the CLI can offer the choice without loading the config models.
"""

from enum import StrEnum


class TaskManagerJit(StrEnum):
    """Which JIT compilers the task managers' JVMs run.

    Measured on q1 at 0.1 CPU per task manager (benchmarks/bench_jit_threads.py): a minute after a
    start or a rescale, HotSpot's C2 compiler threads used 33-56 % of each source task manager's quota
    and the task thread 7-15 %, so the job's capacity kept changing for minutes; C1's threads used a few
    per cent. On a real node C2 takes seconds of a whole core; on a fraction of one it is a transient
    that dominates short experiments, hence C1 by default here. The calibrated profiles record which
    one they were measured with (`provenance.taskmanager_jit`).
    """

    TIERED = "tiered"
    C1 = "c1"
