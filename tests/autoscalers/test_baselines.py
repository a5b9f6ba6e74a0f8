"""The seed papers' baselines, rule by rule, with hand-built snapshots and hand-computed values.

THR-NLUnaware / THR-NLAware (Gesscale sec. V-A), MDL-NLUnaware (ibid.), the MPC paper's
rule-based scaler (sec. 5.4), MEAD's M/G/1, GI/G/1 (Kingman) and threshold policies (sec. VII),
and `static`, the papers' fixed allocation (MEAD sec. VII-A, MPC sec. 5.3.2, Flink-ER sec. 4.2).
The SPL strategy (MPC sec. 5.4) has its own file, test_spl_strategy.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from pydantic import ValidationError

from autoscalers.base import AppliedAction, History
from autoscalers.baselines.config import (
    KingmanConfig,
    MDLNLUnawareConfig,
    MEADThresholdConfig,
    MG1Config,
    RuleBasedConfig,
    THRConfig,
)
from autoscalers.baselines.gesscale_model import MDLNLUnaware
from autoscalers.baselines.mead_models import MEADMG1, KingmanModel, MEADKingman
from autoscalers.baselines.thresholds import MEADThreshold, RuleBased, THRNLAware, THRNLUnaware
from autoscalers.config import RunContext
from autoscalers.gesscale.config import GesscaleConfig
from autoscalers.gesscale.scaler import CalibrationSample, Gesscale
from autoscalers.mead import maps
from autoscalers.mead.config import MEADConfig
from autoscalers.mead.mapph1 import exponential
from autoscalers.mead.network import Model, OperatorLoad, Workload
from autoscalers.mead.scaler import MEAD
from autoscalers.static import Static, StaticConfig
from harness.vocabulary import NodeChoice
from tests.builders import chain, op, snapshot

ONE = chain("worker")  # Gesscale's single stateless operator
TOPO = chain("src", "map", "sink")
NONE = History()


def single(cpu: float, p: int = 3, t: float = 60.0, busy: float = 500.0):
    return snapshot(ONE, t=t)(worker=op(p, rin=1000.0, busy=busy, cpu=cpu, input_rate=1000.0))


# ---------------------------------------------------------------- THR-NLUnaware / THR-NLAware


@pytest.mark.parametrize(("cpu", "expected"), [(0.95, 4), (0.91, 4), (0.9, None), (0.7, None), (0.5, None),
                                               (0.49, 2), (0.1, 2)])
def test_thr_adds_one_above_90_and_removes_one_below_50_percent_cpu(cpu, expected):
    d = THRNLUnaware().decide(single(cpu), NONE)
    if expected is None:
        assert d is None
    else:
        assert d is not None and d.parallelism == {"worker": expected} and d.cpu_share == {}


def test_thr_node_choice_is_random_for_nlunaware_and_nearest_for_nlaware():
    assert THRNLUnaware().decide(single(0.95), NONE).placement == NodeChoice.ANY
    assert THRNLAware().decide(single(0.95), NONE).placement == NodeChoice.NEAREST
    assert THRNLAware().decide(single(0.2), NONE).placement == NodeChoice.NEAREST


def test_thr_keeps_within_n_min_and_n_max():
    assert THRNLUnaware(THRConfig(n_min=3)).decide(single(0.1, p=3), NONE) is None
    assert THRNLUnaware(THRConfig(n_max=3)).decide(single(0.99, p=3), NONE) is None
    # a source cannot use more subtasks than its topic has partitions (24)
    assert THRNLUnaware().decide(single(0.99, p=24), NONE) is None


def test_thr_acts_once_per_period_on_the_mean_cpu_of_the_period():
    scaler = THRNLUnaware()  # period 60 s
    assert scaler.decide(single(0.95, t=60.0), NONE) is not None
    assert scaler.decide(single(0.95, t=75.0), NONE) is None  # within the period
    # the period's snapshots average 0.86 (0.82, 0.86, 0.88, 0.88): no threshold crossed at t = 120
    past = History(snapshots=tuple(single(c, t=t) for c, t in ((0.82, 75.0), (0.86, 90.0), (0.88, 105.0))))
    assert scaler.decide(single(0.88, t=120.0), past) is None
    past = History(snapshots=tuple(single(c, t=t) for c, t in ((0.92, 135.0), (0.9, 150.0), (0.93, 165.0))))
    d = scaler.decide(single(0.93, t=180.0), past)  # mean 0.92 > 0.9
    assert d is not None and d.details["operators"]["worker"]["signal"] == pytest.approx(0.92)


def test_thr_waits_until_its_window_no_longer_overlaps_a_restart():
    scaler = THRNLUnaware(THRConfig(period_s=0))
    scaler.on_applied(AppliedAction(t=100.0, before={"worker": 3}, after={"worker": 4}, downtime_s=120.0))
    # the restart ends at 220 s; a 15 s window ending at 230 s overlaps it: its low CPU is the restart's
    assert scaler.decide(single(0.05, t=230.0), NONE) is None
    d = scaler.decide(single(0.05, t=240.0), NONE)
    assert d is not None and d.parallelism == {"worker": 2}


def test_thr_leaves_an_operator_with_unmeasured_cpu_alone():
    snap = snapshot(TOPO, t=60.0)(src=op(2, cpu=math.nan), map=op(2, cpu=0.97), sink=op(1, cpu=0.6))
    d = THRNLAware().decide(snap, NONE)
    assert d is not None and d.parallelism == {"map": 3}
    assert "unknown" in d.details["operators"]["src"]


def test_thr_thresholds_must_be_ordered():
    with pytest.raises(ValidationError, match="scale_down_below"):
        THRConfig(scale_up_above=0.5, scale_down_below=0.6)


# ---------------------------------------------------------------- MPC's rule-based scaler


@pytest.mark.parametrize(("busy", "expected"), [(950.0, 4), (901.0, 4), (900.0, None), (850.0, None),
                                                (800.0, None), (790.0, 2)])
def test_rule_based_reads_the_utilisation_factor_against_theta_max_and_min(busy, expected):
    d = RuleBased().decide(single(0.1, busy=busy), NONE)  # CPU is not its signal
    if expected is None:
        assert d is None
    else:
        assert d is not None and d.parallelism == {"worker": expected}


def test_rule_based_acts_every_control_step_and_has_the_tab7_variant():
    scaler = RuleBased()
    assert scaler.decide(single(0.5, busy=950.0, t=4.0), NONE) is not None
    assert scaler.decide(single(0.5, busy=950.0, t=8.0), NONE) is not None
    strict = RuleBased(RuleBasedConfig(scale_up_above=0.95))
    assert strict.decide(single(0.5, busy=930.0), NONE) is None


# ---------------------------------------------------------------- MEAD's threshold policy


@pytest.mark.parametrize(("share", "cpu", "expected"), [
    (0.55, 0.8, 0.7), (0.4, 0.71, 0.55), (1.0, 0.95, None),  # up one level; the top stays
    (0.85, 0.3, 0.7), (0.4, 0.1, None),  # down one level; the bottom stays
    (0.7, 0.6, None),  # between U_L and U_H
])
def test_mead_threshold_moves_the_cpu_share_one_level(share, cpu, expected):
    snap = snapshot(ONE, t=10.0)(worker=op(2, cpu=cpu, cpu_share=share))
    d = MEADThreshold().decide(snap, NONE)
    if expected is None:
        assert d is None
    else:
        assert d is not None and d.cpu_share == {"worker": expected} and d.parallelism == {}


def test_mead_threshold_runs_every_10_s():
    scaler = MEADThreshold()
    assert MEADThresholdConfig().period_s == 10.0
    assert scaler.decide(snapshot(ONE, t=10.0)(worker=op(1, cpu=0.9, cpu_share=0.4)), NONE) is not None
    assert scaler.decide(snapshot(ONE, t=15.0)(worker=op(1, cpu=0.9, cpu_share=0.55)), NONE) is None
    assert scaler.decide(snapshot(ONE, t=20.0)(worker=op(1, cpu=0.9, cpu_share=0.55)), NONE) is not None


# ---------------------------------------------------------------- MDL-NLUnaware


def test_mdl_nlunaware_uses_eq2_whatever_the_samples_and_picks_nodes_at_random():
    scaler = MDLNLUnaware(MDLNLUnawareConfig(period_s=0))
    # MST(n) = alpha n through the origin: alpha = (2*2000 + 4*3600) / (4 + 16) = 920
    scaler.samples["worker"] = {2: CalibrationSample(2, 0.0, 2000.0), 4: CalibrationSample(4, 150.0, 3600.0)}
    m = scaler.model("worker")
    assert m is not None
    assert (m.alpha, m.beta, m.gamma) == (pytest.approx(920.0), 1.0, 0.0)
    overloaded = snapshot(ONE, t=60.0)(worker=op(2, rin=2000.0, busy=990.0, lag_rate=500.0, input_rate=2500.0))
    d = scaler.decide(overloaded, NONE)
    assert d is not None and d.parallelism == {"worker": 3} and d.placement == NodeChoice.ANY


def test_gesscale_is_latency_aware_and_calibrates_with_the_measured_nd_max():
    scaler = Gesscale(GesscaleConfig(period_s=0, nd_max_ms=0.0))
    worker = op(2, rin=2000.0, busy=990.0, lag_rate=500.0, input_rate=2500.0)
    snap = snapshot(ONE, t=60.0)(worker=replace(worker, network_delay_max_ms=120.0))
    d = scaler.decide(snap, NONE)
    assert d is not None and d.parallelism == {"worker": 3} and d.placement == NodeChoice.NEAREST
    assert scaler.samples["worker"][2] == CalibrationSample(2, 120.0, 2000.0)


# ---------------------------------------------------------------- MEAD's M/G/1 and GI/G/1 planners


def job(shares=(0.4, 0.4, 0.4), ia: np.ndarray | None = None, t: float = 100.0):
    """1,000 rec/s through src -> map -> sink, one subtask each; demand per record at share 1:
    src 0.1 ms, map 0.3 ms, sink 0.05 ms (busy fraction x share / rate)."""
    if ia is None:
        ia = np.random.default_rng(1).exponential(1e-3, size=20_000)
    return snapshot(TOPO, t=t, input_rate=1000.0, interarrival_s=ia)(
        src=op(1, rin=1000, busy=100 / shares[0], cpu_share=shares[0]),
        map=op(1, rin=1000, busy=300 / shares[1], cpu_share=shares[1]),
        sink=op(1, rin=1000, busy=50 / shares[2], cpu_share=shares[2]),
    )


def bursty_ia(n: int = 20_000, seed: int = 2) -> np.ndarray:
    return maps.sample(maps.mmpp2(0.3, 3.0, 0.05, 0.2).scale_to_rate(1000.0), n, np.random.default_rng(seed))


def test_kingman_response_times_match_the_formula_by_hand():
    cfg = KingmanConfig()  # cs^2 0.5 (Erlang-2), levels 0.4 .. 1.0
    model = KingmanModel(1.0, MEADKingman(cfg).loads(job()), cfg)
    # map at share 0.4: S = 0.3 / 0.4 = 0.75 ms, rho = 0.75, W = 0.75/0.25 * (1 + 0.5)/2 * 0.75 ms = 1.6875 ms
    assert model.op_response("map", 0) == pytest.approx(0.75e-3 + 1.6875e-3)
    # src: S = 0.25 ms, rho 0.25, W = 1/3 * 0.75 * 0.25 ms; sink: S = 0.125 ms, rho 0.125, W = 1/7 * 0.75 * S
    src = 0.25e-3 * (1 + 0.25)
    sink = 0.125e-3 * (1 + 0.75 / 7)
    r, _ = model.path_response(("src", "map", "sink"), {"src": 0, "map": 0, "sink": 0})
    assert r == pytest.approx(src + 2.4375e-3 + sink)
    # ca^2 = 3 for the same load: the map waits (3 + 0.5)/2 / 0.75 = 2.33 times longer
    bursty = KingmanModel(3.0, MEADKingman(cfg).loads(job()), cfg)
    assert bursty.op_response("map", 0) - 0.75e-3 == pytest.approx(1.6875e-3 * 3.5 / 1.5)
    # 1,500 rec/s at share 0.4: rho = 1.125, no steady state
    saturated = KingmanModel(1.0, {"map": OperatorLoad(rate_per_subtask=1500.0, demand_s=0.3e-3)}, cfg)
    assert saturated.op_response("map", 0) == math.inf and saturated.op_response("map", 1) < math.inf


def test_kingman_refuses_a_p95_target():
    with pytest.raises(ValidationError, match="sec. VII-B"):
        KingmanConfig(target="p95")
    MG1Config(target="p95")  # the M/G/1 queue has a response-time distribution


def test_mg1_is_m_ph_1_mean_and_p95_by_hand():
    # exponential service (SCV 1): M/M/1 at rho 0.75, S = 0.75 ms -> mean S/(1-rho) = 3 ms,
    # sojourn ~ Exp(mu - lambda) -> p95 = ln(20) / (1333.3 - 1000)
    for target, expected in (("mean", 3e-3), ("p95", math.log(20) / (1000 / 0.75 - 1000))):
        cfg = MG1Config(service_scv=1.0, target=target)
        loads = MEADMG1(cfg).loads(job())
        model = Model([Workload(maps.poisson(1.0), False)], {"map": loads["map"]}, cfg)
        r, _ = model.path_response(("map",), {"map": 0})
        assert r == pytest.approx(expected, rel=1e-4)  # the p95 is solved numerically
    assert exponential(1.0).mean == 1.0


def test_mg1_plans_without_interarrival_times_and_says_so():
    assert "interarrival_s" not in {str(m) for m in MEADMG1().needs().all()}
    d = MEADMG1(MG1Config(), RunContext(slo_latency_s=0.0025)).decide(job(ia=bursty_ia()), NONE)
    assert d is not None and "Poisson input assumed" in d.reason
    assert d.details["interarrivals"] == 0


def test_under_bursty_input_the_map_model_asks_for_more_cpu_than_kingman_and_m_g_1():
    """Sec. II, Fig. 3: M/G/1 ignores burstiness, Kingman sees its variance only, MAPs its correlation too."""
    target = RunContext(slo_latency_s=0.0025)
    snap = job(ia=bursty_ia())
    mead = MEAD(MEADConfig(), target).decide(snap, NONE)
    gig1 = MEADKingman(KingmanConfig(), target).decide(snap, NONE)
    mg1 = MEADMG1(MG1Config(), target).decide(snap, NONE)
    totals = {name: sum(d.cpu_share.values()) if d is not None else 1.2 for name, d in
              (("mead", mead), ("gig1", gig1), ("mg1", mg1))}
    assert totals["mead"] > totals["gig1"] >= totals["mg1"]
    # Poisson input at the same rate: M/G/1 raises the map to 0.55 (by hand: 0.3125 + 1.04 + 0.138 ms)
    mg1_poisson = MEADMG1(MG1Config(), target).decide(job(), NONE)
    assert mg1_poisson is not None and mg1_poisson.cpu_share == {"src": 0.4, "map": 0.55, "sink": 0.4}


# ---------------------------------------------------------------- static (the papers' fixed allocation)


@pytest.mark.parametrize("cpu", [0.0, 0.5, 1.0])
def test_static_never_decides_whatever_the_load(cpu):
    """The fixed allocation keeps the initial one: no decision at an idle, a half-busy or a saturated operator,
    after a restart or with a history of actions."""
    scaler = Static(StaticConfig())
    overloaded = snapshot(TOPO, t=60.0)(src=op(1, rin=1e5, busy=1000.0, cpu=cpu, input_rate=1e6, lag=1e7),
                                         map=op(1, rin=1e5, busy=1000.0, cpu=cpu), sink=op(1, rin=1e5, cpu=cpu))
    assert scaler.decide(overloaded, NONE) is None
    assert scaler.decide(single(cpu), NONE) is None
    with pytest.raises(ValidationError):
        StaticConfig(step=1)  # no parameters to set
