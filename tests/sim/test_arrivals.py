"""Arrival processes: bursty MMPP input is burstier than Poisson, keeps the mean, is seeded."""

from __future__ import annotations

import numpy as np
import pytest

from workloads.arrivals import ArrivalConfig, arrival_counts, coefficient_of_variation, interarrival_sample


def _sample(kind: str, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    cfg = ArrivalConfig(kind=kind)  # type: ignore[arg-type]
    rng = np.random.default_rng(seed)
    counts = arrival_counts(np.full(3_600, 10_000.0), cfg, rng)
    return counts, interarrival_sample(counts, cfg, rng, size=5_000)


def test_bursty_interarrivals_have_higher_cv_than_poisson() -> None:
    _, poisson = _sample("poisson")
    _, bursty = _sample("map")
    _, det = _sample("deterministic")
    assert coefficient_of_variation(poisson) == pytest.approx(1.0, abs=0.05)
    assert coefficient_of_variation(bursty) > coefficient_of_variation(poisson) + 0.1
    assert coefficient_of_variation(det) < 0.05
    for s in (poisson, bursty, det):
        assert 0 < len(s) <= 5_000
        # thinned gaps stay in real time: the sample spans the hour it was drawn from
        assert s.sum() == pytest.approx(3_600, rel=0.1)


def test_bursty_counts_keep_the_mean_rate_and_vary_more() -> None:
    poisson, _ = _sample("poisson")
    bursty, _ = _sample("map")
    assert bursty.mean() == pytest.approx(10_000, rel=0.1)
    assert bursty.std() > 10 * poisson.std()
    quiet, burst = ArrivalConfig(kind="map").multipliers()
    assert set(np.unique(np.round(bursty / 10_000, 1))) >= {round(quiet, 1), round(burst, 1)}


def test_arrivals_are_seeded() -> None:
    a, sa = _sample("map", seed=5)
    b, sb = _sample("map", seed=5)
    c, _ = _sample("map", seed=6)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(sa, sb)
    assert not np.array_equal(a, c)
