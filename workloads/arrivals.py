"""Arrival processes around a load pattern: Poisson, bursty (2-state MMPP) or deterministic.

A pattern gives the *mean* input rate per step; the arrival process decides how
records actually arrive around it. MEAD (Russo Russo et al. 2021, sec. 4.1)
fits Markovian Arrival Processes to observed inter-arrival times, so the
simulator needs input whose burstiness differs from Poisson, and a sample of
inter-arrival times to hand to the autoscaler.

The bursty kind is a 2-state Markov-modulated Poisson process (MMPP, the
simplest MAP): a quiet state and a burst state whose rate is `burst_factor`
times the quiet rate, with exponentially distributed sojourns (means
`mean_quiet_s` and `mean_burst_s`). The two rates are normalised so the
time-averaged rate equals the pattern's rate:
    pi_b = T_b / (T_b + T_q),  m_q = 1 / (1 - pi_b + f * pi_b),  m_b = f * m_q.
The state switches at step boundaries (a discrete-time approximation that is
exact in the limit of short steps and fine for sojourns of several steps).

Everything here is pure (no I/O) and seeded by the caller's generator.
"""

from __future__ import annotations

import numpy as np

from workloads.arrival_config import ArrivalConfig, ArrivalKind

__all__ = ["ArrivalConfig", "ArrivalKind"]  # the config models live in workloads.arrival_config

def mmpp_states(n_steps: int, step_s: float, cfg: ArrivalConfig, rng: np.random.Generator) -> np.ndarray:
    """Boolean burst indicator per step of a 2-state Markov chain (vectorised)."""
    if n_steps <= 0:
        return np.zeros(0, dtype=bool)
    # Sojourns in whole steps: geometric with the per-step leaving probability.
    p_leave_q = -np.expm1(-step_s / cfg.mean_quiet_s)
    p_leave_b = -np.expm1(-step_s / cfg.mean_burst_s)
    mean_cycle = 1.0 / p_leave_q + 1.0 / p_leave_b
    pairs = int(n_steps / mean_cycle * 1.5) + 16
    while True:
        quiet = rng.geometric(p_leave_q, size=pairs)
        burst = rng.geometric(p_leave_b, size=pairs)
        if quiet.sum() + burst.sum() >= n_steps:
            break
        pairs *= 2
    start_burst = rng.random() < cfg.burst_probability
    first, second = (burst, quiet) if start_burst else (quiet, burst)
    lengths = np.empty(2 * pairs, dtype=np.int64)
    lengths[0::2], lengths[1::2] = first, second
    flags = np.zeros(2 * pairs, dtype=bool)
    flags[0::2], flags[1::2] = start_burst, not start_burst
    return np.repeat(flags, lengths)[:n_steps]


def rate_multipliers(n_steps: int, step_s: float, cfg: ArrivalConfig, rng: np.random.Generator) -> np.ndarray:
    """Per-step factor on the pattern's rate (all ones unless bursty)."""
    if cfg.kind != "map" or cfg.burst_factor == 1.0:
        return np.ones(n_steps)
    quiet, burst = cfg.multipliers()
    return np.where(mmpp_states(n_steps, step_s, cfg, rng), burst, quiet)


def arrival_counts(
    expected: np.ndarray, cfg: ArrivalConfig, rng: np.random.Generator, step_s: float = 1.0
) -> np.ndarray:
    """Records arriving in each step, given the pattern's expected records per step.

    poisson: Poisson(expected); map: Poisson(expected * MMPP multiplier);
    deterministic: exactly `expected` (fractional records allowed, a fluid).
    """
    expected = np.asarray(expected, dtype=float)
    if cfg.kind == "deterministic":
        return expected.copy()
    lam = expected * rate_multipliers(len(expected), step_s, cfg, rng)
    return rng.poisson(np.maximum(lam, 0.0)).astype(float)


def interarrival_sample(
    counts: np.ndarray,
    cfg: ArrivalConfig,
    rng: np.random.Generator,
    size: int = 5000,
    step_s: float = 1.0,
    unit_draws: np.ndarray | None = None,
) -> np.ndarray:
    """Inter-arrival times (s) of a thinned copy of the records that arrived in `counts`' steps.

    At millions of records per second a literal run of `size` consecutive gaps
    covers milliseconds and never sees a burst. Instead the records are thinned
    (kept independently with probability q = size / total), which keeps a
    (modulated) Poisson process of the same kind at rate q x rate, and its gaps
    stay in real time: the sample spans the whole window, so burst durations
    survive for MEAD's MAP fit (MEAD rescales to the measured rate itself).
    Within a step the rate is constant, so the thinned gaps of step k are
    Exp(1) / (q rate_k) (deterministic: 1 / (q rate_k)), in time order.
    `unit_draws` (>= size standard exponentials) lets a caller that samples
    often reuse pre-drawn variates instead of drawing new ones.
    """
    counts = np.asarray(counts, dtype=float)
    total = float(counts.sum())
    if size <= 0 or total <= 0:
        return np.zeros(0)
    # Proportional allocation by cumulative rounding: no step is starved by flooring.
    q = min(1.0, size / total)
    kept = np.floor(np.cumsum(counts) * q + 1e-9).astype(np.int64)
    per_step = np.empty_like(kept)  # kept[k] - kept[k-1], without np.diff's per-call checks (every snapshot)
    per_step[:1] = kept[:1]
    np.subtract(kept[1:], kept[:-1], out=per_step[1:])
    rates = np.repeat(counts * q / step_s, per_step)
    if len(rates) == 0:
        return np.zeros(0)
    if cfg.kind == "deterministic":
        return 1.0 / rates
    if unit_draws is not None and len(unit_draws) >= len(rates):
        return unit_draws[: len(rates)] / rates
    return rng.standard_exponential(len(rates)) / rates


def coefficient_of_variation(x: np.ndarray) -> float:
    """std / mean (0 for an empty or all-zero sample)."""
    x = np.asarray(x, dtype=float)
    mean = float(x.mean()) if len(x) else 0.0
    return float(x.std() / mean) if mean > 0 else 0.0


def fine_schedule(
    per_second: np.ndarray, cfg: ArrivalConfig, rng: np.random.Generator, step_s: float = 0.1
) -> np.ndarray:
    """Target rates (records/s) per `step_s` step for a load generator, drawn from the arrival process.

    The pattern's per-second rates are split into steps of `step_s`; each step's count is
    drawn with `arrival_counts` (Poisson, MMPP-modulated Poisson, or exact) and written back as
    a rate, so a generator pacing each step evenly follows the process at `step_s` resolution:
    bursts of the MMPP (mean sojourns of seconds) are reproduced, and the counts per 100 ms
    carry the process' variance. Below `step_s` the generator paces evenly; a thinned sample of
    its send times is still Poisson-like within a step (independent thinning of a dense stream).
    """
    per_second = np.asarray(per_second, dtype=float)
    k = max(1, int(round(1.0 / step_s)))
    expected = np.repeat(per_second / k, k)
    return arrival_counts(expected, cfg, rng, 1.0 / k) * k
