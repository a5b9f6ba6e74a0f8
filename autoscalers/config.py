"""What configures an autoscaler: its typed parameters and what the run tells it.

Light on purpose (pydantic and the standard library only): `harness.config` validates every
experiment's autoscaler parameters through these models, and that must not import an
autoscaler's implementation (numpy queueing models, scipy, statsmodels, networkx).
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict


class AutoscalerConfig(BaseModel):
    """Base of every autoscaler's typed parameters (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class RunContext:
    """What the experiment decides for every autoscaler alike, passed in by the runner.

    One source for each value: the experiment's `slo` and `loop` sections (harness/config.py).
    An autoscaler that plans against a latency target (MEAD, MPC's latency cost, Flink-ER's
    latency constraint) reads `slo_latency_s` here instead of keeping its own copy, so the
    target it plans for is the one the analysis judges it by. A predictive autoscaler (MPC)
    reads the loop's period and cool-down: a configuration it applies stays in force for the
    cool-down. The defaults equal harness.config's defaults (a test keeps them equal); they
    serve unit tests that build an autoscaler without a run.
    """

    slo_latency_s: float = 5.0
    slo_throughput_ratio: float = 0.95
    period_s: float = 15.0
    cooldown_s: float = 300.0
