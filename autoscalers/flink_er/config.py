"""Flink-ER's parameters (see the scaler's docstring for the defaults' sources); light."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from autoscalers.config import AutoscalerConfig


class FlinkERConfig(AutoscalerConfig):
    """Flink-ER's parameters (see the module docstring for the defaults' sources)."""

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    enlarge: Literal["each", "first"] = Field(
        "each",
        description="each: every operator first after a partition with f >= lambda c gets one more subtask "
                    "(Alg. 2); first: only the one after the minimum cut",
    )

    period_s: float = Field(60.0, ge=0, description="act at most this often")
    lam: float = Field(0.85, alias="lambda", gt=0, le=1, description="bottleneck when f >= lambda c (eq. 11)")
    phi_s: float = Field(30.0, ge=0, description="lag threshold phi in seconds of the subtask's input")
    phi_records: float | None = Field(None, ge=0, description="absolute lag threshold phi (overrides phi_s)")
    busy_floor: float = Field(0.05, gt=0, le=1, description="busy fraction below this counts as this")
    latency_feedback: bool = Field(True, description="Alg. 1's capacity regulation")
    latency_low: float = Field(0.5, gt=0, lt=1, description="'far below' lc means below this x lc")
    queue_threshold: float = Field(
        0.5, ge=0, le=1, description="input-buffer usage from which tuples count as waiting at a vertex"
    )
    eta: float | None = Field(None, gt=0, lt=1, description="fixed relative step instead of eq. 14")
    eta_max: float = Field(0.5, gt=0, lt=1, description="cap on eq. 14's relative step")
    n_max: int | None = Field(None, ge=1, description="most subtasks; None = key groups, sources: partitions")
