"""MPC (De Matteis & Mencagli): B&B search, Kingman model, cost weights, Holt-Winters forecast."""

from __future__ import annotations

import numpy as np
import pytest

from autoscalers.base import History
from autoscalers.config import RunContext
from autoscalers.mpc import MPC, MPCConfig, OperatorModel, holt_winters_forecast, kingman_wait
from autoscalers.mpc.search import branch_and_bound, exhaustive, tree_size
from harness.vocabulary import Metric
from tests.builders import chain, op, snapshot

TOPO = chain("src", "map", "sink")
NONE = History()


def mpc(cfg: MPCConfig, **context) -> MPC:
    """The paper's setting: MPC may reconfigure at every control step (no cool-down)."""
    return MPC(cfg, RunContext(**({"cooldown_s": 0.0, "period_s": 15.0} | context)))


def job(input_rate: float = 10_000.0, latency_s: float = 0.0, kafka_lag: float = 0.0, **kw):
    """src reads 4,000 rec/s (2 subtasks at 20 % busy); map 2 subtasks at 80 % busy -> 4e-4 s per record."""
    return snapshot(TOPO, t=100.0, input_rate=input_rate, latency_s=latency_s, kafka_lag=kafka_lag, **kw)(
        src=op(2, rin=4000, busy=200, input_rate=input_rate),
        map=op(2, rin=4000, busy=800),
        sink=op(1, rin=4000, busy=100),
    )


def model(rates, demand=4e-4, current=(2, 1.0), max_p=12, delta=1.0) -> OperatorModel:
    return OperatorModel("map", np.asarray(rates, dtype=float), demand, current, max_p, delta)


# ---------------------------------------------------------------- branch & bound


@pytest.mark.parametrize("h", [1, 2, 3])
@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_bnb_finds_the_exhaustive_optimum_and_explores_fewer_states(h, objective):
    scaler = mpc(MPCConfig(objective=objective, horizon=h), slo_latency_s=0.01)
    m = model([9000.0, 12000.0, 7000.0][:h])
    stage = scaler.stage_costs(m, ca2=1.0, r=1.0)
    switch, start = scaler.switch_costs(m)
    bnb = branch_and_bound(stage, switch, start)
    full = exhaustive(stage, switch, start)
    assert bnb.optimum.cost == pytest.approx(full.optimum.cost, rel=1e-12)
    assert bnb.optimum.options == full.optimum.options
    assert full.states_explored == full.states_total == tree_size(12, h)
    assert bnb.states_total == full.states_total
    if h == 1:  # every child of the root must be evaluated (the paper's Tab. 5: 100 %)
        assert bnb.states_explored == bnb.states_total
    else:
        assert bnb.states_explored < bnb.states_total


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("lookahead", [False, True])
def test_bnb_matches_exhaustive_on_random_cost_tables(seed, lookahead):
    rng = np.random.default_rng(seed)
    h, omega = 3, 9
    stage = rng.uniform(0.1, 10.0, size=(h, omega))
    switch = rng.uniform(0.0, 3.0, size=(omega, omega))
    start = rng.uniform(0.0, 3.0, size=omega)
    bnb = branch_and_bound(stage, switch, start, lookahead=lookahead)
    full = exhaustive(stage, switch, start)
    assert bnb.optimum.cost == pytest.approx(full.optimum.cost)
    recomputed = start[bnb.optimum.options[0]] + sum(stage[i, o] for i, o in enumerate(bnb.optimum.options))
    recomputed += sum(switch[a, b] for a, b in zip(bnb.optimum.options, bnb.optimum.options[1:], strict=False))
    assert recomputed == pytest.approx(bnb.optimum.cost)
    assert bnb.states_explored < bnb.states_total


def test_lookahead_bound_prunes_at_least_as_much_as_the_paper_rule():
    scaler = mpc(MPCConfig(horizon=3))
    m = model([9000.0, 12000.0, 7000.0], max_p=24)
    stage = scaler.stage_costs(m, 1.0, 1.0)
    switch, start = scaler.switch_costs(m)
    paper = branch_and_bound(stage, switch, start)
    look = branch_and_bound(stage, switch, start, lookahead=True)
    assert look.optimum.options == paper.optimum.options
    assert look.states_explored <= paper.states_explored


# ---------------------------------------------------------------- models


def test_kingman_formula_numbers():
    # rho/(1-rho) * (ca2+cs2)/2 * T: 0.5/0.5 * 1 * 0.01 and 0.8/0.2 * 1.25 * 0.002
    assert kingman_wait(0.5, 1.0, 1.0, 0.01) == pytest.approx(0.01)
    assert kingman_wait(0.8, 2.0, 0.5, 0.002) == pytest.approx(0.01)
    assert kingman_wait(1.0, 1.0, 1.0, 0.01) == float("inf")


def test_operator_response_time_uses_replicas_share_and_correction():
    scaler = mpc(MPCConfig(service_scv=1.0))
    m = model([1500.0], demand=1e-3)
    # n=2, s=1: T = 1 ms, rho = 1500 * 1e-3 / 2 = 0.75, W = 3 * 1 * 0.5 ms = 1.5 ms, R = 2.5 ms
    assert scaler.response_s(m, 1500.0, 2, 1.0, 1.0, 1.0) == pytest.approx(0.0025)
    # correction r = 2 doubles the wait only
    assert scaler.response_s(m, 1500.0, 2, 1.0, 1.0, 2.0) == pytest.approx(0.004)
    # share 0.5 doubles T: rho = 1.5 / 2 ... -> with 4 replicas rho = 0.75, W = 3 * 0.5 ms, R = 2 ms + 1.5 ms
    assert scaler.response_s(m, 1500.0, 4, 0.5, 1.0, 1.0) == pytest.approx(0.0035)


def test_throughput_cost_is_alpha_max_one_rho_plus_beta_n():
    scaler = mpc(MPCConfig(alpha=200.0, beta=0.5))
    m = model([10_000.0], max_p=5)  # rho(n) = 4 / n
    stage = scaler.stage_costs(m, 1.0, 1.0)[0]
    expected = [200 * max(1.0, 4.0 / n) + 0.5 * n for n in range(1, 6)]
    assert stage == pytest.approx(expected)


# ---------------------------------------------------------------- decisions


def test_throughput_variant_picks_the_smallest_sustainable_parallelism():
    d = mpc(MPCConfig(objective="throughput")).decide(job(), NONE)
    assert d is not None
    # 10,000 rec/s arrive; map needs 4e-4 s per record -> rho = 4 / n -> 4 replicas
    assert d.parallelism["map"] == 4
    # src: 1e-4 s per record (20 % busy at 2,000 rec/s per subtask) -> rho = 1 / n: one replica
    # is just sustainable, and the throughput cost alpha max(1, rho) does not reward headroom
    assert d.parallelism["src"] == 1


def test_cost_weights_change_the_choice():
    base = mpc(MPCConfig()).decide(job(), NONE)
    assert base is not None and base.parallelism["map"] == 4
    # A high price per replica makes running overloaded cheaper than adding replicas.
    pricey = mpc(MPCConfig(beta=200.0)).decide(job(), NONE)
    assert pricey is None or pricey.parallelism["map"] < 4
    # A high switching cost keeps the current configuration (2 replicas).
    sticky = mpc(MPCConfig(gamma=500.0)).decide(job(), NONE)
    assert sticky is None or sticky.parallelism["map"] == 2


def test_latency_variant_needs_more_replicas_for_a_tighter_threshold():
    def decide(threshold: float):
        cfg = MPCConfig(objective="latency", correction=False, gamma=0.0)
        return mpc(cfg, slo_latency_s=threshold).decide(job(), NONE)

    loose, tight = decide(10.0), decide(0.0015)
    assert loose is not None and tight is not None
    # map: T = 0.4 ms, 10,000 rec/s. Loose: rho < 1 needs n >= 5 and R ~ 0 << delta, so 5.
    assert loose.parallelism["map"] == 5
    # Tight (delta = 0.5 ms per operator): n = 5 gives R = 0.72 ms, cost 2 e^1.44 + 2.5 = 10.9;
    # n = 7 gives rho = 0.57, R = 0.48 ms, 2 e^0.95 + 3.5 = 8.7 (n = 6: 8.8, n = 8: 8.9).
    assert tight.parallelism["map"] == 7


def test_measured_latency_above_the_prediction_raises_the_correction_and_the_parallelism():
    cfg = MPCConfig(objective="latency", alpha=2.0)
    calm = mpc(cfg).decide(job(input_rate=4000.0, latency_s=0.0), NONE)
    lagging = mpc(cfg).decide(job(input_rate=4000.0, latency_s=3.0), NONE)
    assert lagging is not None
    assert lagging.details["correction"] > 1.0
    calm_map = calm.parallelism["map"] if calm is not None else 2
    assert lagging.parallelism["map"] > calm_map


def test_vertical_dimension_lowers_the_cpu_share_of_a_lightly_loaded_operator():
    cfg = MPCConfig(cpu_levels=(0.4, 0.7, 1.0), gamma=0.0)
    d = mpc(cfg).decide(job(input_rate=4000.0), NONE)
    assert d is not None
    # sink: 2.5e-5 s per record at share 1 -> at 0.4 rho = 4000 * 6.25e-5 = 0.25: one replica at 0.4 is cheapest
    assert d.cpu_share["sink"] == 0.4
    assert d.parallelism["sink"] == 1
    assert set(d.cpu_share) == set(TOPO.names)


def test_without_vertical_dimension_no_cpu_share_is_decided():
    d = mpc(MPCConfig()).decide(job(), NONE)
    assert d is not None and d.cpu_share == {}


def test_decision_reports_states_and_horizon_trajectory():
    d = mpc(MPCConfig(horizon=2)).decide(job(), NONE)
    assert d is not None
    assert d.details["states_total"] == 3 * tree_size(32, 2)
    assert 0 < d.details["states_explored"] < d.details["states_total"]
    assert len(d.details["trajectories"]["map"]) == 2


# ---------------------------------------------------------------- forecast


def test_holt_forecast_extrapolates_a_linear_ramp():
    series = 1000.0 + 50.0 * np.arange(20)
    fc, _ = holt_winters_forecast(series, 3, MPCConfig())
    assert fc == pytest.approx([2000.0, 2050.0, 2100.0], rel=0.01)


def test_short_history_repeats_the_last_value():
    fc, _ = holt_winters_forecast(np.array([100.0, 300.0]), 3, MPCConfig(min_history=4))
    assert fc.tolist() == [300.0, 300.0, 300.0]


def test_forecast_never_goes_negative():
    series = 1000.0 - 100.0 * np.arange(10)
    fc, _ = holt_winters_forecast(series, 3, MPCConfig())
    assert (fc >= 0).all() and fc[-1] == 0.0


def test_mpc_uses_the_history_to_scale_ahead_of_a_ramp():
    snaps = []
    for k in range(12):
        rate = 2000.0 + 500.0 * k
        snaps.append(
            snapshot(TOPO, t=15.0 * k, input_rate=rate)(
                src=op(4, rin=rate, busy=100, input_rate=rate),
                map=op(3, rin=rate, busy=rate * 0.4 / 3),  # 4e-4 s per record over 3 subtasks
                sink=op(1, rin=rate, busy=rate * 0.025),
            )
        )
    current, history = snaps[-1], History(snapshots=tuple(snaps[:-1]))
    last_value = mpc(MPCConfig(min_history=100, horizon=1)).decide(current, history)
    ahead = mpc(MPCConfig(horizon=1)).decide(current, history)
    assert ahead is not None
    # 7,500 rec/s now -> rho = 3 / n, 3 replicas suffice; Holt predicts 8,000 -> rho = 3.2 / n -> 4
    assert ahead.details["forecast"][0] == pytest.approx(8000.0, rel=0.01)
    assert ahead.parallelism["map"] == 4
    assert last_value is None or last_value.parallelism["map"] == 3


def test_reused_smoothing_parameters_still_follow_the_ramp():
    series = 1000.0 + 50.0 * np.arange(20)
    _, used = holt_winters_forecast(series, 1, MPCConfig())
    assert used is not None and 0.0 <= used.params["smoothing_level"] <= 1.0
    longer = 1000.0 + 50.0 * np.arange(24)
    fc, again = holt_winters_forecast(longer, 2, MPCConfig(), reuse=used)
    assert again == used
    assert fc == pytest.approx([2200.0, 2250.0], rel=0.01)


# ---------------------------------------------------------------- cool-down and backlog


def test_a_change_is_held_for_the_cooldown_in_the_search():
    """Stage costs: option 1 is cheap for two steps, then dear. Free to switch back (gamma 0) the best is
    1, 1, 0 (cost 2); when a change holds for the next two steps, staying at 0 (cost 10) wins."""
    stage = np.array([[5.0, 1.0], [5.0, 1.0], [0.0, 10.0]])
    switch, start = np.zeros((2, 2)), np.zeros(2)
    free = branch_and_bound(stage, switch, start, current=0)
    assert free.optimum.options == (1, 1, 0) and free.optimum.cost == 2.0
    held = branch_and_bound(stage, switch, start, hold=2, current=0)
    assert held.optimum.options == (0, 0, 0) and held.optimum.cost == 10.0
    # trajectories 000, 001, 011, 111: 2 + 3 + 4 nodes
    assert tree_size(2, 3, hold=2, current=0) == 9
    full = exhaustive(stage, switch, start, hold=2, current=0)
    assert full.optimum == held.optimum and full.states_total == 9


def test_planning_steps_cover_the_cooldown():
    cfg = MPCConfig(horizon=1)
    assert mpc(cfg).planning_steps == 1  # no cool-down: the paper's horizon
    held = mpc(cfg, period_s=60.0, cooldown_s=300.0)
    assert (held.steps_in_force, held.planning_steps) == (5, 5)
    d = held.decide(job(), NONE)
    assert d is not None and d.details["planning_steps"] == 5 and len(d.details["forecast"]) == 5
    assert mpc(MPCConfig(horizon=3), period_s=60.0, cooldown_s=60.0).planning_steps == 3


def test_backlog_in_kafka_is_served_within_the_horizon():
    """map: 4e-4 s per record. 10,000 rec/s alone -> rho = 4 / n -> 4 replicas. With 1.2 M records waiting and
    one 60 s step, the step's load is 10,000 + 20,000 -> rho = 12 / n -> 12 replicas
    (cost 200 + 6 + 0.4 x 10^2 = 246 beats 11: 218 + 5.5 + 32.4, and 13: 200 + 6.5 + 48.4)."""
    snap = job(kafka_lag=1_200_000.0)
    d = mpc(MPCConfig(), period_s=60.0).decide(snap, NONE)
    assert d is not None and d.parallelism["map"] == 12
    assert d.details["forecast"][0] == pytest.approx(30_000.0)
    ignored = mpc(MPCConfig(backlog="ignore"), period_s=60.0).decide(snap, NONE)
    assert ignored is not None and ignored.parallelism["map"] == 4
    assert MPC(MPCConfig()).needs().job >= {Metric.LAG}


def test_latency_threshold_is_the_experiments_slo():
    d = mpc(MPCConfig(objective="latency"), slo_latency_s=2.5).decide(job(), NONE)
    assert d is not None and d.details["latency_threshold_s"] == 2.5
