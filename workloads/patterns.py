"""Load patterns: seeded per-minute target input rates (thesis ch. 5.4.3).

A pattern is an array of per-minute rates at the thesis' full scale, built by
a seeded generator so a run is reproducible. `scale` multiplies the rates
(e.g. 0.01 on one machine) and `time_scale` compresses time (10 plays 140
minutes in 14): one pattern minute lasts 60 / time_scale seconds.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
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
from workloads.arrivals import ArrivalConfig

PatternName = Literal["cosine", "random", "increasing", "decreasing", "convergence", "constant", "trace"]


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


@dataclass(frozen=True)
class Stage:
    name: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class LoadPattern:
    """Target input rates over a run, already scaled in rate and time."""

    name: str
    step_rates: np.ndarray  # records/s, one value per step of `step_s` seconds (scaled time)
    step_s: float
    stages: tuple[Stage, ...] = field(default_factory=tuple)

    @property
    def duration_s(self) -> float:
        return len(self.step_rates) * self.step_s

    @property
    def max_rate(self) -> float:
        return float(self.step_rates.max()) if len(self.step_rates) else 0.0

    def rate_at(self, t: float) -> float:
        i = int(t // self.step_s)
        if i < 0 or i >= len(self.step_rates):
            return 0.0
        return float(self.step_rates[i])

    def per_second(self) -> np.ndarray:
        """Rate for every whole second of the (scaled) run."""
        t = np.arange(int(np.ceil(self.duration_s)))
        idx = np.minimum((t // self.step_s).astype(int), len(self.step_rates) - 1)
        return self.step_rates[idx]

    def records_between(self, t0: float, t1: float) -> float:
        """Records the pattern asks for in [t0, t1) (piecewise-constant integral)."""
        edges = np.arange(len(self.step_rates) + 1) * self.step_s
        lo = np.clip(t0, edges[0], edges[-1])
        hi = np.clip(t1, edges[0], edges[-1])
        overlap = np.clip(np.minimum(edges[1:], hi) - np.maximum(edges[:-1], lo), 0, None)
        return float((overlap * self.step_rates).sum())


def _minute_rates(name: str, p: Any, rng: np.random.Generator) -> tuple[np.ndarray, list[tuple[str, int, int]]]:
    stages: list[tuple[str, int, int]] = []
    if name == "cosine":
        m = np.arange(p.duration_min)
        base = p.min_rate + (p.max_rate - p.min_rate) * (1 + np.cos(2 * np.pi * m / p.period_min)) / 2
        rates = base + rng.uniform(0, p.noise, size=len(m))
    elif name == "random":
        rates = np.empty(p.duration_min)
        r = p.start_rate
        for i in range(p.duration_min):
            rates[i] = r
            r = float(np.clip(r + rng.uniform(-p.max_change, p.max_change), p.min_rate, p.max_rate))
    elif name in ("increasing", "decreasing"):
        start = p.start_rate if p.start_rate is not None else (0.0 if name == "increasing" else p.max_rate)
        end = p.end_rate if p.end_rate is not None else (p.max_rate if name == "increasing" else 0.0)
        steps = rng.uniform(0, 1, size=p.duration_min - 1)
        frac = np.concatenate([[0.0], np.cumsum(steps) / steps.sum()]) if steps.sum() > 0 else np.zeros(1)
        rates = start + (end - start) * frac
    elif name == "convergence":
        rates = np.concatenate(
            [np.zeros(p.startup_min), np.full(p.high_min, p.high_rate), np.full(p.low_min, p.low_rate)]
        )
        a, b = p.startup_min, p.startup_min + p.high_min
        stages = [("stage0", 0, a), ("stage1", a, b), ("stage2", b, b + p.low_min)]
    elif name == "constant":
        rates = np.full(p.duration_min, p.rate)
    else:
        raise ValueError(f"no minute generator for pattern {name!r}")
    return np.asarray(rates, dtype=float), stages


def _trace_rates(p: TraceParams) -> np.ndarray:
    """Per-second rates from a CSV trace."""
    if not p.path.exists():
        raise ValueError(f"trace file {p.path} does not exist")
    with p.path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    if not rows or p.column not in rows[0]:
        raise ValueError(f"trace file {p.path}: needs a {p.column!r} column")
    values = np.array([float(r[p.column]) for r in rows])
    if p.column == "rate":
        if (values < 0).any():
            raise ValueError(f"trace file {p.path}: negative rate")
        return values
    t = values - values.min()
    return np.bincount(np.floor(t).astype(int)).astype(float)


def build_pattern(cfg: PatternConfig, seed: int, query: str | None = None) -> LoadPattern:
    """Generate the pattern of an experiment, deterministic for a given seed."""
    rng = np.random.default_rng(seed)
    params = cfg.typed_params(query)
    stages: list[tuple[str, int, int]] = []
    if isinstance(params, TraceParams):
        rates, step_full_s = _trace_rates(params), (params.step_s if params.column == "rate" else 1.0)
    else:
        rates, stages = _minute_rates(cfg.name, params, rng)
        step_full_s = 60.0
    if cfg.spikes is not None and cfg.spikes.count > 0:
        rates = _add_spikes(rates, cfg.spikes, step_full_s, rng)
    step_s = step_full_s / cfg.time_scale
    return LoadPattern(
        name=cfg.name,
        step_rates=np.maximum(rates, 0.0) * cfg.scale,
        step_s=step_s,
        stages=tuple(Stage(n, a * step_s, b * step_s) for n, a, b in stages),
    )


def _add_spikes(rates: np.ndarray, spikes: SpikesConfig, step_full_s: float, rng: np.random.Generator) -> np.ndarray:
    out = rates.copy()
    width = max(1, int(round(spikes.duration_min * 60 / step_full_s)))
    height = spikes.magnitude * float(rates.max() if len(rates) else 0.0)
    if spikes.at_min is not None:
        starts = [int(m * 60 / step_full_s) for m in spikes.at_min]
    else:
        starts = sorted(rng.choice(max(1, len(rates) - width), size=spikes.count, replace=False).tolist())
    for s in starts:
        out[s : s + width] += height
    return out
