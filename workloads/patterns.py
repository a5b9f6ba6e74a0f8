"""Load patterns: seeded per-minute target input rates (thesis ch. 5.4.3).

A pattern is an array of per-minute rates at the thesis' full scale, built by
a seeded generator so a run is reproducible. `scale` multiplies the rates
(e.g. 0.01 on one machine) and `time_scale` compresses time (10 plays 140
minutes in 14): one pattern minute lasts 60 / time_scale seconds.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workloads.pattern_config import (
    PARAMS,
    QUERY_COSINE_DEFAULTS,
    QUERY_RATE_FACTOR,
    ConstantParams,
    ConvergenceParams,
    CosineParams,
    PatternConfig,
    PatternName,
    RampParams,
    RandomParams,
    SpikesConfig,
    TraceParams,
)

__all__ = ["PARAMS", "QUERY_COSINE_DEFAULTS", "QUERY_RATE_FACTOR", "ConstantParams", "ConvergenceParams",
           "CosineParams", "LoadPattern", "PatternConfig", "PatternName", "RampParams", "RandomParams", "SpikesConfig",
           "Stage", "TraceParams", "build_pattern"]


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
