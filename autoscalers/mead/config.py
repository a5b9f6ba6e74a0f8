"""MEAD's parameters (Russo Russo et al. 2021, sec. VII); light, for validating experiments."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from autoscalers.config import AutoscalerConfig


def _check_levels(v: tuple[float, ...]) -> tuple[float, ...]:
    if not v or any(not 0.0 < x <= 1.0 for x in v) or list(v) != sorted(set(v)):
        raise ValueError("levels must be strictly increasing CPU shares in (0, 1]")
    return v


CpuLevels = Annotated[tuple[float, ...], AfterValidator(_check_levels)]  # the vertical policies' CPU shares

Target = Literal["mean", "p95"]


class MEADConfig(AutoscalerConfig):
    """Russo Russo et al. 2021, sec. VII: 5 CPU levels 40..100 %, T_A = 60 s, N_E = 50,000, best 5 fits.

    R_max, the response time every source-to-sink path must meet, is not a parameter here: it
    is the experiment's latency SLO (`slo.latency_s`, 5 s by default), handed to the
    autoscaler by the runner (`RunContext.slo_latency_s`), so MEAD plans for the target the
    analysis judges it by.
    """

    period_s: float = Field(60.0, ge=0.0, description="act at most this often (T_A); 0 = every call")
    levels: CpuLevels = Field((0.4, 0.55, 0.7, 0.85, 1.0), description="CPU shares, cheapest first")
    target: Target = Field("mean", description="response-time requirement on the mean or the 95th percentile")
    buffer_events: int = Field(50_000, ge=10, description="monitoring buffer capacity N_E")
    buffer_snapshots: int = Field(
        1, ge=1, description="snapshots whose inter-arrival samples form the buffer (1: theirs may overlap)"
    )
    window_fractions: tuple[float, ...] = Field((1.0, 0.5), description="fitting windows as buffer fractions")
    fits_per_window: int = Field(5, ge=1, description="best-n MAPs kept per window")
    service_scv: float = Field(0.5, gt=0.0, description="SCV of the per-record service time (0.5 = Erlang-2)")
    delta: float = Field(0.01, ge=0.0, description="Fig. 5: undo a raise that gains less than delta * R_max")
    max_scale_down_levels: int | None = Field(None, ge=1, description="planning: limit scale-down per decision")
    min_busy_fraction: float = Field(0.01, ge=0.0, lt=1.0, description="below this, busy time gives no demand")
    poisson_without_arrivals: bool = Field(
        False, description="plan with Poisson arrivals when no inter-arrival times are measured (the paper fits "
                           "MAPs to measured arrivals, so by default MEAD does not decide without them)")
