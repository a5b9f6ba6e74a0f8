"""Gesscale (Arkian et al. 2021) pinned rule by rule with hand-built snapshots."""

from __future__ import annotations

import math

import pytest

from autoscalers.base import AppliedAction, History
from autoscalers.gesscale import CalibrationSample, Gesscale, GesscaleConfig, fit_mst
from tests.builders import chain, op, snapshot

TOPO = chain("src", "map", "sink")
NONE = History()


def every_call(**params) -> Gesscale:
    return Gesscale(GesscaleConfig(period_s=0, **params))


def job(t: float = 0.0, *, src_bp=0.0, map_bp=0.0, map_p=2, map_rin=2000.0, lag_rate=0.0, input_rate=None):
    return snapshot(TOPO, t=t)(
        src=op(2, rin=map_rin, busy=300, bp=src_bp * 1000, lag_rate=lag_rate, input_rate=input_rate),
        map=op(map_p, rin=map_rin, busy=900, bp=map_bp * 1000),
        sink=op(1, rin=map_rin, rout=0, busy=200),
    )


def samples(alpha: float, beta: float, gamma: float, points: list[tuple[int, float]]) -> list[CalibrationSample]:
    return [CalibrationSample(n, nd, alpha * n**beta - gamma * nd) for n, nd in points]


# ---------------------------------------------------------------- the MST model


def test_one_sample_fits_alpha_only():
    m = fit_mst(samples(1000, 1.0, 0.0, [(2, 0.0)]))
    assert m is not None
    assert (m.alpha, m.beta, m.gamma) == (pytest.approx(1000), 1.0, 0.0)
    assert fit_mst([]) is None


def test_two_samples_fit_alpha_and_gamma_with_beta_one():
    m = fit_mst(samples(1000, 1.0, 2.0, [(2, 10.0), (4, 50.0)]))
    assert m is not None and m.samples == 2
    assert m.alpha == pytest.approx(1000, rel=1e-6)
    assert m.gamma == pytest.approx(2.0, rel=1e-5)
    assert m.beta == 1.0


def test_three_or_more_samples_fit_all_parameters():
    truth = (1200.0, 0.85, 3.0)
    m = fit_mst(samples(*truth, [(1, 0.0), (2, 20.0), (4, 40.0), (8, 10.0)]))
    assert m is not None and m.samples == 4
    assert (m.alpha, m.beta, m.gamma) == (
        pytest.approx(truth[0], rel=1e-3),
        pytest.approx(truth[1], rel=1e-3),
        pytest.approx(truth[2], rel=1e-2),
    )
    assert m.mst(6, 5.0) == pytest.approx(truth[0] * 6 ** truth[1] - truth[2] * 5.0, rel=1e-3)


# ---------------------------------------------------------------- scale-up


def test_root_of_backpressure_gets_one_more_replica_and_a_calibration_sample():
    a = every_call()
    d = a.decide(job(src_bp=0.8, map_bp=0.1, map_p=3, map_rin=4500.0), NONE)
    assert d is not None and d.parallelism == {"map": 4}
    assert a.samples["map"][3] == CalibrationSample(3, 0.0, 4500.0)
    assert d.details["operators"]["map"]["model"]["alpha"] == pytest.approx(1500)


def test_a_backpressured_operator_is_not_the_root():
    # src and map both backpressured: the sink (not backpressured, upstream is) is the root.
    snap = snapshot(TOPO)(src=op(2, rin=2000, bp=800), map=op(2, rin=2000, bp=700), sink=op(1, rin=2000, bp=0))
    d = every_call().decide(snap, NONE)
    assert d is not None and d.parallelism == {"sink": 2}
    # 0.5 itself is not "high" backpressure (Alg. 1: BP_{i-1} > 0.5).
    assert every_call().decide(job(src_bp=0.5, map_bp=0.0), NONE) is None


def test_a_source_is_overloaded_when_its_lag_grows():
    d = every_call().decide(job(lag_rate=500.0), NONE)  # 25 % of its 2,000 rec/s
    assert d is not None and d.parallelism == {"src": 3}
    assert every_call().decide(job(lag_rate=50.0), NONE) is None  # within the 5 % noise margin


def test_scale_up_stops_at_n_max():
    assert every_call(n_max=3).decide(job(src_bp=0.8, map_p=3), NONE) is None


# ---------------------------------------------------------------- scale-down


def calibrated(**params) -> Gesscale:
    a = every_call(**params)
    a.samples["map"] = {2: CalibrationSample(2, 0.0, 2000.0)}  # alpha = 1000 rec/s per replica
    return a


@pytest.mark.parametrize("threshold", [20.0, 40.0, 60.0])
def test_multi_step_scale_down_keeps_the_headroom(threshold):
    d = calibrated(headroom_threshold=threshold).decide(job(map_p=8, map_rin=2000.0), NONE)
    # Smallest n with 100 (1000 n - 2000) / (1000 n) > threshold.
    expected = min(n for n in range(1, 9) if 100 * (1000 * n - 2000) / (1000 * n) > threshold)
    assert d is not None and d.parallelism == {"map": expected}
    assert expected < 7  # several replicas in one step


def test_scale_down_keeps_mst_above_the_input_rate():
    # map processes 2,000 rec/s but receives 3,500 rec/s (e.g. catching up): MST(n) >= 3,500 -> n >= 4.
    snap = snapshot(TOPO)(
        src=op(2, rin=3500, rout=3500, busy=300),
        map=op(8, rin=2000, busy=900),
        sink=op(1, rin=2000, rout=0, busy=200),
    )
    d = calibrated().decide(snap, NONE)
    assert d is not None and d.parallelism == {"map": 4}


def test_no_model_no_scale_down_and_no_change_within_threshold():
    assert every_call().decide(job(map_p=8), NONE) is None  # never calibrated
    assert calibrated().decide(job(map_p=3, map_rin=2000.0), NONE) is None  # 3 -> 2 would leave 0 % headroom


# ---------------------------------------------------------------- period


def test_acts_at_most_once_per_period_averaging_the_period():
    a = Gesscale()  # period 60 s
    hot = [job(t, src_bp=0.8) for t in (0, 15, 30, 45, 60)]
    assert a.decide(hot[0], NONE) is not None
    assert all(a.decide(s, History(snapshots=tuple(hot[:i]))) is None for i, s in enumerate(hot[1:4], 1))
    assert a.decide(hot[4], History(snapshots=tuple(hot[:4]))) is not None
    # The period average decides: one quiet snapshot among hot ones still shows BP 0.6 > 0.5.
    b = Gesscale()
    quiet = job(60, src_bp=0.0)
    assert b.decide(quiet, History(snapshots=tuple(hot[1:4]))) is not None
    assert math.isclose(b.monitor(quiet, History(snapshots=tuple(hot[1:4])))["src"].bp, 0.6)


def test_waits_while_the_job_restarts_and_learns_nothing_from_the_downtime():
    a = every_call()
    action = AppliedAction(t=100, before={"map": 2}, after={"map": 3}, downtime_s=50)
    down = job(140, lag_rate=5000.0, map_rin=0.0)  # during the savepoint restart nothing flows
    assert a.decide(down, History(actions=(action,))) is None
    assert a.samples == {}
    # 155 - 15 < 150: this window still overlaps the downtime.
    assert a.decide(job(155, src_bp=0.8), History(actions=(action,))) is None
    d = a.decide(job(165, src_bp=0.8), History(snapshots=(down,), actions=(action,)))
    assert d is not None and d.parallelism == {"map": 3}
    assert a.monitor(job(165, src_bp=0.8), History(snapshots=(down,), actions=(action,)))["map"].ct == 2000
    # A source with zero throughput is not "working at its maximum": no sample, no +1.
    assert every_call().decide(job(lag_rate=5000.0, map_rin=0.0), NONE) is None
