"""MEAD (Russo Russo et al. 2021): MAP fit, MAP/PH/1 solver, greedy over CPU levels, hand-built snapshots."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscalers.base import History
from autoscalers.config import RunContext
from autoscalers.mead import MEAD, MEADConfig, maps
from autoscalers.mead.mapph1 import convolve, erlang, exponential, solve_map_ph_1
from tests.builders import chain, op, snapshot

TOPO = chain("src", "map", "sink")
NONE = History()
BURSTY = maps.mmpp2(0.3, 3.0, 0.05, 0.2)  # SCV ~ 3.1, lag-1 autocorrelation ~ 0.27


def slo(latency_s: float) -> RunContext:
    """MEAD plans for the experiment's latency SLO (R_max), handed in by the runner."""
    return RunContext(slo_latency_s=latency_s)


def lindley_sojourn(ia: np.ndarray, service: np.ndarray) -> np.ndarray:
    """FCFS single-server sojourn times by Lindley's recursion W_k = max(0, W_(k-1) + S_(k-1) - A_k).

    Vectorised as a reflected random walk: W_k = X_k - min(0, min_(j<=k) X_j), X = cumsum(S - A).
    """
    x = np.concatenate([[0.0], np.cumsum(service[:-1] - ia[1:])])
    wait = x - np.minimum.accumulate(np.minimum(x, 0.0))
    return wait + service


# ---------------------------------------------------------------- MAP fitting


def test_map_fit_recovers_mean_scv_and_autocorrelation_of_a_bursty_trace():
    rng = np.random.default_rng(7)
    x = maps.sample(BURSTY.scale_to_rate(500.0), 40_000, rng)
    s = maps.trace_stats(x)
    assert s.mean == pytest.approx(1 / 500.0, rel=0.05)
    assert s.scv == pytest.approx(BURSTY.scv, rel=0.15)
    fits = maps.fit_map2(x, n_best=3)
    assert len(fits) == 3
    for m in fits:
        assert m.mean == pytest.approx(1.0)  # the shape, normalised to mean 1
        assert m.scv == pytest.approx(s.scv, rel=1e-6)
        assert m.acf(1) == pytest.approx(s.rho1, abs=1e-6)
        assert m.acf(1) > 0.15  # bursts persist
    # ranked by the third-moment error
    errs = [abs(m.moment(3) - s.m3) for m in fits]
    assert errs == sorted(errs)


def test_map_fit_of_poisson_arrivals_is_poisson():
    rng = np.random.default_rng(3)
    x = rng.exponential(1 / 800.0, size=40_000)
    fits = maps.fit_map2(x, n_best=5)
    assert len(fits) == 1 and fits[0].order == 1
    assert fits[0].scv == pytest.approx(1.0)


def test_map_fit_of_smooth_arrivals_is_a_renewal_hypoexponential():
    rng = np.random.default_rng(4)
    x = rng.gamma(1.6, 0.5, size=20_000)  # SCV 0.625
    (m,) = maps.fit_map2(x)
    assert m.scv == pytest.approx(maps.trace_stats(x).scv, rel=1e-6)
    assert abs(m.acf(1)) < 1e-9


def test_sampling_a_map_reproduces_its_descriptors():
    rng = np.random.default_rng(11)
    m = maps.correlated_h2(1.0, 6.0, 0.9, 0.3)
    x = maps.sample(m, 60_000, rng)
    s = maps.trace_stats(x)
    assert s.mean == pytest.approx(1.0, rel=0.05)
    assert s.scv == pytest.approx(6.0, rel=0.15)
    assert s.rho1 == pytest.approx(0.3, abs=0.05)


# ---------------------------------------------------------------- MAP/PH/1


def test_mm1_mean_and_p95_match_the_closed_form():
    q = solve_map_ph_1(maps.poisson(0.8), exponential(1.0))
    assert q.utilisation == pytest.approx(0.8)
    assert q.sojourn.mass == pytest.approx(1.0)
    assert q.mean_response == pytest.approx(1 / (1.0 - 0.8))
    assert q.sojourn.quantile(0.95) == pytest.approx(math.log(20) / 0.2, rel=2e-3)
    assert q.sojourn.cdf(3.0) == pytest.approx(1 - math.exp(-0.2 * 3.0))


def test_map_e2_1_matches_a_lindley_simulation():
    rng = np.random.default_rng(5)
    arrivals = BURSTY.scale_to_rate(0.6)
    q = solve_map_ph_1(arrivals, erlang(2, 1.0))
    ia = maps.sample(arrivals, 300_000, rng)
    sojourn = lindley_sojourn(ia, rng.gamma(2.0, 0.5, size=len(ia)))[2000:]  # Erlang-2 with mean 1
    assert q.mean_response == pytest.approx(sojourn.mean(), rel=0.1)
    assert q.sojourn.quantile(0.95) == pytest.approx(np.quantile(sojourn, 0.95), rel=0.1)


def test_unstable_queue_has_infinite_response():
    q = solve_map_ph_1(maps.poisson(1.2), exponential(1.0))
    assert not q.stable and q.mean_response == math.inf


def test_response_time_grows_with_burstiness():
    service = erlang(2, 1.0)
    rates = 0.6
    means = [
        solve_map_ph_1(m.scale_to_rate(rates), service).mean_response
        for m in (maps.poisson(1.0), maps.correlated_h2(1.0, 4.0, 0.8, 0.0), maps.correlated_h2(1.0, 4.0, 0.8, 0.3))
    ]
    assert means[0] < means[1] < means[2]


def test_path_convolution_adds_means():
    a = solve_map_ph_1(maps.poisson(0.5), exponential(1.0)).sojourn
    b = solve_map_ph_1(maps.poisson(0.5), erlang(2, 0.5)).sojourn
    both = convolve([a, b])
    assert both.mass == pytest.approx(1.0)
    assert both.mean == pytest.approx(a.mean + b.mean)
    assert both.quantile(0.95) > max(a.quantile(0.95), b.quantile(0.95))


# ---------------------------------------------------------------- the autoscaler


def job(map_busy: float = 300.0, t: float = 100.0, shares=(1.0, 1.0, 1.0), ia: np.ndarray | None = None):
    """1,000 rec/s through src -> map -> sink, one subtask each; map is the heavy operator.

    Demand per record at share 1 = busy fraction x share / rate: src 0.1 ms, map 0.3 ms, sink 0.05 ms.
    """
    if ia is None:
        ia = np.random.default_rng(1).exponential(1e-3, size=20_000)
    return snapshot(TOPO, t=t, input_rate=1000.0, interarrival_s=ia)(
        src=op(1, rin=1000, busy=100 / shares[0], cpu_share=shares[0]),
        map=op(1, rin=1000, busy=map_busy / shares[1], cpu_share=shares[1]),
        sink=op(1, rin=1000, busy=50 / shares[2], cpu_share=shares[2]),
    )


def bursty_ia(n: int = 20_000, seed: int = 2) -> np.ndarray:
    return maps.sample(BURSTY.scale_to_rate(1000.0), n, np.random.default_rng(seed))


def test_loose_target_puts_every_operator_at_the_cheapest_level():
    d = MEAD(MEADConfig(), slo(1.0)).decide(job(), NONE)
    assert d is not None
    assert d.cpu_share == {"src": 0.4, "map": 0.4, "sink": 0.4}
    assert d.parallelism == {}
    assert d.details["violated_paths"] == []


def test_greedy_raises_only_the_slowest_operator_of_a_violating_path():
    cfg, ctx = MEADConfig(), slo(0.0025)
    d = MEAD(cfg, ctx).decide(job(), NONE)
    assert d is not None
    # At 0.4 the map queue has rho = 0.75 and dominates the path; raising it alone meets 2.5 ms.
    assert d.cpu_share["src"] == 0.4 and d.cpu_share["sink"] == 0.4
    assert d.cpu_share["map"] > 0.4
    assert d.details["predicted_response_s"]["src->map->sink"] <= 0.0025


def test_bursty_input_needs_more_cpu_than_poisson_for_the_same_target():
    cfg, ctx = MEADConfig(), slo(0.0025)
    cheapest = (0.4, 0.4, 0.4)
    poisson_d = MEAD(cfg, ctx).decide(job(shares=cheapest), NONE)
    bursty_d = MEAD(cfg, ctx).decide(job(shares=cheapest, ia=bursty_ia()), NONE)
    assert poisson_d is not None and bursty_d is not None
    assert sum(bursty_d.cpu_share.values()) > sum(poisson_d.cpu_share.values())
    assert bursty_d.details["scv"] > 2.0


def test_p95_target_needs_at_least_the_cpu_of_the_mean_target():
    def decide(target: str):
        cfg, ctx = MEADConfig(target=target, fits_per_window=2), slo(0.0025)
        return MEAD(cfg, ctx).decide(job(shares=(0.4, 0.4, 0.4), ia=bursty_ia()), NONE)

    mean_d, p95_d = decide("mean"), decide("p95")
    assert mean_d is not None and p95_d is not None
    assert all(p95_d.cpu_share[o] >= mean_d.cpu_share[o] for o in TOPO.names)
    assert sum(p95_d.cpu_share.values()) > sum(mean_d.cpu_share.values())


def test_unreachable_target_raises_the_bottleneck_to_the_top_and_reports_the_violation():
    d = MEAD(MEADConfig(), slo(1e-4)).decide(job(shares=(0.4, 0.4, 0.4)), NONE)
    assert d is not None
    assert d.cpu_share["map"] == 1.0
    assert d.details["violated_paths"] == ["src->map->sink"]


def test_acts_at_most_once_per_period():
    scaler = MEAD(MEADConfig(period_s=60.0))
    assert scaler.decide(job(t=100.0), NONE) is not None
    assert scaler.decide(job(t=130.0), NONE) is None
    assert scaler.decide(job(t=160.0), NONE) is not None


def test_no_change_gives_no_decision():
    d = MEAD(MEADConfig(), slo(1.0)).decide(job(shares=(0.4, 0.4, 0.4)), NONE)
    assert d is None


def test_service_demand_accounts_for_the_current_share():
    # map measured at share 0.4 with 750 ms busy is the same 0.3 ms per record at share 1.
    throttled = MEAD(MEADConfig(), slo(0.0025)).decide(job(shares=(1.0, 0.4, 1.0)), NONE)
    full = MEAD(MEADConfig(), slo(0.0025)).decide(job(), NONE)
    assert throttled is not None and full is not None
    assert throttled.cpu_share == full.cpu_share


def test_scale_down_limit_of_one_level_per_decision():
    d = MEAD(MEADConfig(max_scale_down_levels=1), slo(1.0)).decide(job(), NONE)
    assert d is not None
    assert d.cpu_share == {"src": 0.85, "map": 0.85, "sink": 0.85}


def test_without_interarrival_times_mead_waits_unless_told_to_assume_poisson():
    snap = snapshot(TOPO, t=100.0, input_rate=1000.0)(
        src=op(1, rin=1000, busy=100), map=op(1, rin=1000, busy=300), sink=op(1, rin=1000, busy=50)
    )
    assert MEAD(MEADConfig(), slo(1.0)).decide(snap, NONE) is None  # the paper fits measured arrivals
    d = MEAD(MEADConfig(poisson_without_arrivals=True), slo(1.0)).decide(snap, NONE)
    assert d is not None and "Poisson" in d.reason


def test_buffer_spans_earlier_snapshots_up_to_its_capacity():
    scaler = MEAD(MEADConfig(buffer_events=25_000, buffer_snapshots=2))
    older = job(t=85.0, ia=np.full(20_000, 2e-3))
    buf = scaler.interarrival_buffer(job(t=100.0), History(snapshots=(older,)))
    assert len(buf) == 25_000
    assert (buf[:5000] == 2e-3).all()  # the oldest part comes from the earlier snapshot


# ---------------------------------------------------------------- MMPP in real time


SLOW_BURSTS = maps.mmpp2(100.0, 250.0, 1 / 50, 1 / 10)  # quiet 100/s for ~50 s, bursts of 250/s for ~10 s


def test_mmpp_at_rate_scales_arrivals_and_keeps_the_burst_clock():
    m = maps.mmpp_at_rate(SLOW_BURSTS, 10_000.0)
    assert m.rate == pytest.approx(10_000.0)
    Q0, Q1 = SLOW_BURSTS.D0 + SLOW_BURSTS.D1, m.D0 + m.D1
    assert np.allclose(Q0, Q1)  # same modulating chain: bursts still last ~10 s
    assert np.diag(m.D1)[1] / np.diag(m.D1)[0] == pytest.approx(2.5)


def test_mmpp_fit_of_a_thinned_sample_recovers_the_burst_time_scale():
    rng = np.random.default_rng(0)
    x = maps.sample(SLOW_BURSTS, 20_000, rng)  # ~160 s of a thinned 100k rec/s stream, in real time
    fits = maps.fit_mmpp2(x, n_best=2)
    assert fits
    m, _ = fits[0]
    assert m.rate == pytest.approx(1.0 / x.mean())
    switching = -np.diag(m.D0 + m.D1)
    # mean sojourns of the fitted modulating chain are seconds (truth: 50 s and 10 s), not milliseconds
    assert 1.0 < 1.0 / switching.max() and 1.0 / switching.min() < 500.0
    # Carried to the full stream, the queue sees the bursts; a shape rescaled in time does not.
    rate, service = 100_000.0, erlang(2, 0.8 / 100_000.0 * (SLOW_BURSTS.rate / SLOW_BURSTS.rate))
    truth = solve_map_ph_1(maps.mmpp_at_rate(SLOW_BURSTS, rate), service).mean_response
    fitted = max(solve_map_ph_1(maps.mmpp_at_rate(f, rate), service).mean_response for f, _ in fits)
    shape = solve_map_ph_1(maps.fit_map2(x)[0].scale_to_rate(rate), service).mean_response
    assert truth / 10 < fitted < truth * 10
    assert shape < truth / 100


def test_mead_on_a_thinned_bursty_sample_needs_more_cpu_than_on_poisson():
    rng = np.random.default_rng(9)
    thinned = maps.sample(maps.mmpp_at_rate(SLOW_BURSTS, 100.0), 6000, rng)
    cfg, ctx = MEADConfig(fits_per_window=2), slo(0.5)

    def decide(ia):
        snap = snapshot(TOPO, t=100.0, input_rate=1000.0, interarrival_s=ia)(
            src=op(1, rin=1000, busy=100), map=op(1, rin=1000, busy=300), sink=op(1, rin=1000, busy=50)
        )
        return MEAD(cfg, ctx).decide(snap, NONE)

    bursty_d = decide(thinned)
    poisson_d = decide(np.random.default_rng(1).exponential(1e-2, size=6000))
    assert bursty_d is not None and poisson_d is not None
    assert bursty_d.details["modulated"] is True
    assert poisson_d.cpu_share == {"src": 0.4, "map": 0.4, "sink": 0.4}
    # bursts of 2.5x the mean for ~10 s overload the map at 0.4 (rho 0.75 on average): MEAD raises it
    assert bursty_d.cpu_share["map"] > 0.4


def test_mead_plans_for_the_experiments_slo():
    """R_max is the SLO the run is judged by (RunContext), not a MEAD parameter of its own."""
    assert "max_response_s" not in MEADConfig.model_fields
    tight = MEAD(MEADConfig(), slo(0.0025)).decide(job(), NONE)
    loose = MEAD(MEADConfig(), slo(5.0)).decide(job(), NONE)
    assert tight is not None and loose is not None
    assert tight.details["max_response_s"] == 0.0025 and loose.details["max_response_s"] == 5.0
    assert sum(tight.cpu_share.values()) > sum(loose.cpu_share.values())
    assert MEAD(MEADConfig()).context.slo_latency_s == 5.0  # harness.config's default SLO
