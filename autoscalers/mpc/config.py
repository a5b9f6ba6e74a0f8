"""MPC's parameters (De Matteis & Mencagli, sec. 5.3, Tab. 6); light, for validating experiments."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from autoscalers.config import AutoscalerConfig


class MPCConfig(AutoscalerConfig):
    """De Matteis & Mencagli, sec. 5.3 and Tab. 6 (beta 0.5, gamma 0.4, h in {1, 2, 3}).

    The latency threshold delta of Expr. 12 is the experiment's latency SLO (`slo.latency_s`,
    via `RunContext`), not a parameter: one target, shared with the analysis.
    """

    objective: Literal["throughput", "latency"] = "throughput"
    horizon: int = Field(1, ge=1, le=4, description="prediction horizon h (control steps)")
    alpha: float | None = Field(None, gt=0.0, description="QoS weight; default 200 (throughput) / 2 (latency)")
    beta: float = Field(0.5, ge=0.0, description="resource cost per core")
    gamma: float = Field(0.4, ge=0.0, description="switching cost per squared change")
    max_parallelism: int = Field(32, ge=1, description="largest replica count considered per operator")
    cpu_levels: tuple[float, ...] = Field((), description="vertical dimension (CPU shares); empty = off")
    arrival_scv: float | None = Field(None, ge=0.0, description="ca^2; None = measured, else 1")
    service_scv: float = Field(1.0, ge=0.0, description="cs^2 (not measured by Flink)")
    min_history: int = Field(4, ge=2, description="snapshots needed before Holt-Winters replaces the last value")
    history_window: int = Field(60, ge=2, description="most recent snapshots used for the forecast")
    seasonal_periods: int | None = Field(None, ge=2, description="Holt-Winters season in steps; None = Holt")
    refit_every: int = Field(20, ge=1, description="re-optimise the smoothing parameters every this many steps")
    correction: bool = True
    correction_bounds: tuple[float, float] = (0.1, 1.0e5)
    min_busy_fraction: float = Field(0.01, ge=0.0, lt=1.0)
    backlog: Literal["horizon", "ignore"] = Field(
        "horizon",
        description="horizon: the records waiting in Kafka are served over the planning horizon, on top of the "
                    "forecast; ignore: plan for the forecast input rate alone",
    )
    search: Literal["bnb", "exhaustive"] = "bnb"
    bound: Literal["paper", "lookahead"] = Field("paper", description="B&B pruning rule")

    @field_validator("cpu_levels")
    @classmethod
    def _levels(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(not 0.0 < x <= 1.0 for x in v) or list(v) != sorted(set(v)):
            raise ValueError("cpu_levels must be strictly increasing CPU shares in (0, 1]")
        return v

    @property
    def qos_weight(self) -> float:
        if self.alpha is not None:
            return self.alpha
        return 200.0 if self.objective == "throughput" else 2.0
