"""Gesscale's parameters (Arkian et al. 2021); light, for validating experiments."""

from __future__ import annotations

from pydantic import Field

from autoscalers.config import AutoscalerConfig


class GesscaleConfig(AutoscalerConfig):
    """Gesscale's parameters (Arkian et al. 2021, sec. IV)."""

    period_s: float = Field(60.0, ge=0, description="act at most this often (paper: 1 min monitoring period)")
    bp_threshold: float = Field(0.5, ge=0, le=1, description="high backpressure level (Alg. 1)")
    headroom_threshold: float = Field(
        20.0, description="TrshldDT: min 100 (MST - CT) / MST after a scale-down, percent (paper: no value)"
    )
    n_min: int = Field(1, ge=1, description="fewest replicas per operator (Alg. 4)")
    n_max: int | None = Field(None, ge=1, description="most replicas (Alg. 3); None = key groups, sources: partitions")
    nd_max_ms: float = Field(0.0, ge=0, description="largest network round-trip delay among replicas (ms)")
    source_lag_growth: float = Field(
        0.05, ge=0, description="a source is overloaded when its lag grows faster than this x its throughput"
    )
