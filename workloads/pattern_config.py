"""The `pattern:` block of an experiment and each pattern's parameters (thesis ch. 5.4.3), without numpy.

Validating an experiment and `bench list` need these models, not the generators of `workloads.patterns`
(which build the seeded rates with numpy and re-export everything here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    model_validator,
)

from harness.errors import nested_errors
from workloads.arrival_config import ArrivalConfig
from workloads.pattern_names import PatternName


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CosineParams(_Params):
    """Starts at the max and follows a cosine; uniform noise in [0, noise] each minute."""

    min_rate: NonNegativeFloat = 250_000
    max_rate: NonNegativeFloat = 2_200_000
    period_min: PositiveFloat = 60
    noise: NonNegativeFloat = 100_000
    duration_min: PositiveInt = 140

    @model_validator(mode="after")
    def _ordered(self) -> CosineParams:
        if self.max_rate < self.min_rate:
            raise ValueError(f"max_rate ({self.max_rate}) must be >= min_rate ({self.min_rate})")
        return self


class RandomParams(_Params):
    """Random walk: each minute add or subtract U(0, max_change); clamp to [min_rate, max_rate]."""

    start_rate: NonNegativeFloat = 1_250_000
    max_change: NonNegativeFloat = 500_000
    min_rate: NonNegativeFloat = 0
    max_rate: NonNegativeFloat = 2_500_000
    duration_min: PositiveInt = 140


class RampParams(_Params):
    """Increasing (start -> end by random positive steps) or decreasing (the reverse)."""

    start_rate: NonNegativeFloat | None = None  # default: 0 (increasing) / max_rate (decreasing)
    end_rate: NonNegativeFloat | None = None  # default: max_rate (increasing) / 0 (decreasing)
    max_rate: NonNegativeFloat = 2_500_000
    duration_min: PositiveInt = 140


class ConvergenceParams(_Params):
    """Stage 0 idle start-up, stage 1 high constant rate, stage 2 lower constant rate."""

    startup_min: PositiveInt = 10
    high_rate: NonNegativeFloat = 2_000_000
    high_min: PositiveInt = 40
    low_rate: NonNegativeFloat = 1_000_000
    low_min: PositiveInt = 40


class ConstantParams(_Params):
    rate: NonNegativeFloat = 1_000_000
    duration_min: PositiveInt = 60


class TraceParams(_Params):
    """Replay a CSV: a `rate` column (records/s, one row per `step_s`) or a `timestamp` column (event times, s)."""

    path: Path
    column: Literal["rate", "timestamp"] = "rate"
    step_s: PositiveFloat = Field(1.0, description="seconds each row of a rate trace lasts (before time_scale)")


PARAMS: dict[str, type[_Params]] = {
    "cosine": CosineParams,
    "random": RandomParams,
    "increasing": RampParams,
    "decreasing": RampParams,
    "convergence": ConvergenceParams,
    "constant": ConstantParams,
    "trace": TraceParams,
}

# Thesis per-query rates for the cosine pattern (WORKLOADS-AND-QUERIES.md); other patterns
# and queries are scaled by the same factor relative to q1's 2.2 M peak.
QUERY_COSINE_DEFAULTS: dict[str, dict[str, float]] = {
    "q3": {"min_rate": 3_000, "max_rate": 33_000, "noise": 1_500},
    "q5": {"min_rate": 10_000, "max_rate": 110_000, "noise": 7_500},
    "q8": {"min_rate": 10_000, "max_rate": 110_000, "noise": 5_000},
}
QUERY_RATE_FACTOR: dict[str, float] = {"q3": 0.015, "q5": 0.05, "q8": 0.05}
_RATE_KEYS = ("min_rate", "max_rate", "noise", "start_rate", "end_rate", "max_change", "high_rate", "low_rate", "rate")


class SpikesConfig(BaseModel):
    """Short bursts on top of any pattern, at seeded random minutes (or at `at_min`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(3, ge=0)
    magnitude: float = Field(1.0, gt=0, description="added rate as a fraction of the pattern's max rate")
    duration_min: PositiveInt = 2
    at_min: list[int] | None = None


class PatternConfig(BaseModel):
    """The `pattern:` block of an experiment."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: PatternName
    params: dict[str, Any] = Field(default_factory=dict)
    scale: PositiveFloat = 1.0
    time_scale: PositiveFloat = 1.0
    spikes: SpikesConfig | None = None
    arrivals: ArrivalConfig | None = Field(None, description="arrival process around the rate (sim)")

    @model_validator(mode="after")
    def _check_params(self) -> PatternConfig:
        model = PARAMS[self.name]
        try:
            model(**self.params)
        except ValidationError as exc:
            raise ValueError(f"pattern {self.name!r}: {nested_errors(exc, 'params', model)}") from None
        return self

    def typed_params(self, query: str | None = None) -> _Params:
        params: dict[str, Any] = {}
        if query is not None:
            if self.name == "cosine" and query in QUERY_COSINE_DEFAULTS:
                params.update(QUERY_COSINE_DEFAULTS[query])
            elif query in QUERY_RATE_FACTOR:
                model = PARAMS[self.name]
                factor = QUERY_RATE_FACTOR[query]
                for key in _RATE_KEYS:
                    default = model.model_fields[key].default if key in model.model_fields else None
                    if isinstance(default, int | float):
                        params[key] = default * factor
        params.update(self.params)
        return PARAMS[self.name](**params)
