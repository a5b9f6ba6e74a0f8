"""End-to-end latency as a histogram: the bucket bounds and the quantile estimator, shared by every backend.

The Nexmark jobs' sink (queries/src/.../LatencyHistogram.java) counts every record's processing time
minus event time into cumulative buckets that Flink exports to Prometheus; Prometheus' own
`histogram_quantile` turns the buckets' increase over an interval into that interval's quantiles.
The simulator counts its records into the same buckets and estimates with `histogram_quantile` below,
the same algorithm as Prometheus, so both backends report the same quantity the same way.

Bounds: about ten per decade (preferred numbers 1, 1.25, 1.6, 2, 2.5, 3.15, 4, 5, 6.3, 8; whole
milliseconds below 10 ms, the resolution of event times) from 1 ms to 52.5 min: linear interpolation
inside a bucket is then off by a few percent at most, for the milliseconds of a healthy pipeline as
for the minutes of a stalled one. `tests/queries/test_build.py` checks that the Java list is this one.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

E2E_BUCKETS_MS: tuple[int, ...] = (
    1, 2, 3, 4, 5, 6, 8,
    10, 12, 16, 20, 25, 31, 40, 50, 63, 80,
    100, 125, 160, 200, 250, 315, 400, 500, 630, 800,
    1_000, 1_250, 1_600, 2_000, 2_500, 3_150, 4_000, 5_000, 6_300, 8_000,
    10_000, 12_500, 16_000, 20_000, 25_000, 31_500, 40_000, 50_000, 63_000, 80_000,
    100_000, 125_000, 160_000, 200_000, 250_000, 315_000, 400_000, 500_000, 630_000, 800_000,
    1_000_000, 1_250_000, 1_600_000, 2_000_000, 2_500_000, 3_150_000,
)
#: Upper bounds in seconds (Prometheus' `le`); a last, implicit bucket holds everything above.
E2E_BUCKETS_S: np.ndarray = np.asarray(E2E_BUCKETS_MS, dtype=float) / 1000.0

# Series of the sink's histogram as Flink's Prometheus reporter names them (LatencyHistogram.java).
E2E_SERIES = "flink_taskmanager_job_task_operator_latencyE2e_"
# cumulative records with latency <= le, label le in whole milliseconds ("Inf" for the open bucket): Flink's
# reporter turns any label character outside [a-zA-Z0-9:_] into "_", so seconds ("0.05") would not survive
E2E_BUCKET = E2E_SERIES + "le_bucket"
E2E_COUNT = E2E_SERIES + "count"  # records
E2E_SUM_MS = E2E_SERIES + "sumMs"  # summed latency, ms
E2E_MAX_MS = E2E_SERIES + "maxMs"  # largest latency of the last scrape interval, ms (NaN: no record)


def bucket_index(latency_s: np.ndarray | float) -> np.ndarray:
    """Bucket of each latency: the first bound >= it; len(bounds) for the bucket above the last bound."""
    return np.searchsorted(E2E_BUCKETS_S, np.asarray(latency_s, dtype=float), side="left")


def histogram_quantile(q: float, counts: Sequence[float] | np.ndarray,
                       bounds_s: Sequence[float] | np.ndarray = E2E_BUCKETS_S) -> float:
    """Prometheus' `histogram_quantile` over per-bucket (not cumulative) counts.

    `counts` has one entry per bound plus the last, open bucket. As in Prometheus (promql/quantile.go):
    the rank q x total falls into a bucket and is interpolated linearly between its lower and upper
    bound (the first bucket starts at 0); a rank in the open bucket returns the largest bound. NaN
    when there are no observations.
    """
    c = np.asarray(counts, dtype=float)
    if len(c) != len(bounds_s) + 1:
        raise ValueError(f"need {len(bounds_s) + 1} bucket counts (bounds + the open bucket), got {len(c)}")
    cum = np.cumsum(c)
    total = float(cum[-1])
    if not total > 0 or math.isnan(q):
        return math.nan
    if q < 0:
        return -math.inf
    if q > 1:
        return math.inf
    rank = q * total
    b = int(np.searchsorted(cum, rank, side="left"))
    if b >= len(bounds_s):
        return float(bounds_s[-1])
    start = 0.0 if b == 0 else float(bounds_s[b - 1])
    below = 0.0 if b == 0 else float(cum[b - 1])
    in_bucket = float(cum[b]) - below
    if in_bucket <= 0:
        return float(bounds_s[b])
    return start + (float(bounds_s[b]) - start) * (rank - below) / in_bucket


def histogram_quantiles(q: float, counts: np.ndarray, bounds_s: Sequence[float] | np.ndarray = E2E_BUCKETS_S
                        ) -> np.ndarray:
    """`histogram_quantile` for each row of a (rows, buckets) array of per-bucket counts; NaN for empty rows."""
    c = np.asarray(counts, dtype=float)
    bounds = np.asarray(bounds_s, dtype=float)
    if c.ndim != 2 or c.shape[1] != len(bounds) + 1:
        raise ValueError(f"need rows of {len(bounds) + 1} bucket counts, got shape {c.shape}")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {q}")
    cum = np.cumsum(c, axis=1)
    total = cum[:, -1]
    rank = q * total
    b = (cum < rank[:, None]).sum(axis=1)  # first bucket whose cumulative count reaches the rank
    b = np.minimum(b, len(bounds))
    rows = np.arange(len(c))
    inner = np.minimum(b, len(bounds) - 1)
    start = np.where(b > 0, bounds[np.maximum(inner - 1, 0)], 0.0)
    start = np.where(b >= len(bounds), bounds[-1], start)
    below = np.where(b > 0, cum[rows, np.maximum(b - 1, 0)], 0.0)
    in_bucket = cum[rows, b] - below
    with np.errstate(invalid="ignore", divide="ignore"):
        frac = np.where(in_bucket > 0, (rank - below) / in_bucket, 1.0)
    out = start + (bounds[inner] - start) * frac
    out = np.where(b >= len(bounds), bounds[-1], out)
    return np.where(total > 0, out, np.nan)
