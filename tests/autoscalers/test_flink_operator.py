"""The Flink Kubernetes Operator autoscaler pinned rule by rule with hand-built snapshots."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from pydantic import ValidationError

from autoscalers.base import AppliedAction, History
from autoscalers.flink_operator import (
    LEGACY_DEFAULTS,
    FlinkOperator,
    FlinkOperatorConfig,
    align_parallelism,
    parse_duration,
)
from harness.topology import OperatorSpec, topology_from_ops
from tests.builders import chain, op, snapshot

TOPO = chain("src", "map", "sink")
NONE = History()
# Decide on the first snapshot, scale down at once: isolates the per-vertex rules.
IMMEDIATE = {"metrics.window": 0, "stabilization.interval": 0, "scale-down.interval": 0}


def scaler(**params) -> FlinkOperator:
    return FlinkOperator(FlinkOperatorConfig(**(IMMEDIATE | params)))


def steady(t: float = 0.0, *, rin: float = 10_000, busy: float = 500, p: int = 4, lag: float = 0.0, lag_rate=0.0, **kw):
    """Every vertex processes `rin` rec/s at `busy` ms/s with parallelism `p`."""
    return snapshot(TOPO, t=t)(
        src=op(p, rin=rin, busy=busy, lag=lag, lag_rate=lag_rate, **kw),
        map=op(p, rin=rin, busy=busy),
        sink=op(p, rin=rin, rout=0, busy=busy),
    )


# ---------------------------------------------------------------- options and presets


def test_documented_keys_are_aliases_with_or_without_prefix():
    cfg = FlinkOperatorConfig(**{"metrics.window": "10 min", "job.autoscaler.restart.time": "1m"})
    assert cfg.metrics_window == 600 and cfg.restart_time == 60
    assert FlinkOperatorConfig(metrics_window=120).metrics_window == 120
    with pytest.raises(ValidationError):
        FlinkOperatorConfig(**{"metrics.windw": 5})
    assert parse_duration("1 h") == 3600 and parse_duration("30s") == 30 and parse_duration(2) == 2


def test_current_defaults_match_the_operator_docs():
    cfg = FlinkOperatorConfig()
    assert (cfg.metrics_window, cfg.stabilization_interval, cfg.scale_down_interval) == (900, 300, 3600)
    assert (cfg.utilization_target, cfg.target_utilization_boundary) == (0.7, 0.3)
    assert (cfg.catch_up_duration, cfg.restart_time) == (1800, 300)
    assert (cfg.scale_down_max_factor, cfg.scale_up_max_factor) == (0.6, 100000)
    assert (cfg.observed_tpr_lag_threshold, cfg.observed_tpr_switch_threshold) == (30, 0.15)
    assert cfg.busy_time_aggregator == "MAX" and cfg.scaling_effectiveness_detection_enabled is False


def test_legacy_preset_changes_only_unset_options_and_is_recorded():
    legacy = FlinkOperatorConfig(preset="legacy")
    assert legacy.metrics_window == 600 and legacy.target_utilization_boundary == 0.4
    assert legacy.catch_up_duration == 300 and legacy.restart_time == 180
    assert legacy.stabilization_interval == FlinkOperatorConfig().stabilization_interval
    assert set(LEGACY_DEFAULTS) == {
        "metrics_window",
        "target_utilization_boundary",
        "catch_up_duration",
        "restart_time",
    }
    assert FlinkOperatorConfig(preset="legacy", **{"catch-up.duration": 60}).catch_up_duration == 60
    d = FlinkOperator(FlinkOperatorConfig(preset="legacy", **IMMEDIATE)).decide(steady(busy=1000, lag_rate=2000), NONE)
    assert d is not None
    assert d.details["config"]["preset"] == "legacy" and d.details["config"]["restart.time"] == 180
    assert d.details["config"]["release"] == "1.6.1"
    assert FlinkOperatorConfig().effective()["release"] == "1.16-SNAPSHOT"


def test_legacy_preset_follows_release_1_6_behaviour():
    """Release 1.6.1: no lazy scale-down, a 1 h grace period after a scale-up, no observed TPR, 1.6 alignment."""
    legacy = FlinkOperatorConfig(preset="legacy")
    assert legacy.scale_down_interval == 0 and legacy.scale_up_grace_period == 3600
    assert legacy.observed_true_processing_rate is False and legacy.alignment() == "DIVISORS_UP_TO_HALF"
    assert FlinkOperatorConfig().scale_up_grace_period == 0 and FlinkOperatorConfig().scale_down_interval == 3600
    a = FlinkOperator(FlinkOperatorConfig(preset="legacy", **{"metrics.window": 0, "stabilization.interval": 0}))
    up = a.decide(steady(0, busy=1000, lag_rate=2000, p=2), NONE)
    assert up is not None and up.parallelism["map"] > 2
    after = {"src": 2, "map": 2, "sink": 2} | up.parallelism
    a.on_applied(AppliedAction(t=0, before={"src": 2, "map": 2, "sink": 2}, after=after))
    quiet = snapshot(TOPO, t=100)(src=op(after["src"], rin=1000, busy=10, lag=0.0, lag_rate=0.0),
                                  map=op(after["map"], rin=1000, busy=10), sink=op(after["sink"], rin=1000, busy=10))
    d = a.decide(quiet, NONE)
    assert d is None or "map" not in d.parallelism  # within the grace period: no scale-down of map
    late = a.decide(replace(quiet, t=3700.0), NONE)
    assert late is not None and late.parallelism["map"] < after["map"]


# ---------------------------------------------------------------- evaluation


def test_catch_up_target_is_lag_rate_plus_restart_budget_plus_input_at_target_utilisation():
    a = scaler()
    cfg = a.config
    lag = 900_000.0
    evals, _ = a.evaluate([steady(rin=10_000, busy=500, lag=lag)])
    src = evals["src"]
    expected = round(lag / cfg.catch_up_duration + 10_000 * cfg.restart_time / cfg.catch_up_duration + 10_000 / 0.7)
    assert src.target_capacity == expected
    assert src.catch_up_rate == pytest.approx(lag / 1800)
    # The catch-up and input rates flow downstream through the measured output ratio (1 here).
    assert evals["map"].target_capacity == expected


def test_target_rates_propagate_through_measured_output_ratio():
    snap = snapshot(TOPO)(
        src=op(2, rin=8000, busy=400, lag=0, lag_rate=2000.0),  # Kafka gets 10,000 rec/s
        map=op(2, rin=8000, rout=2000, busy=400),
        sink=op(1, rin=2000, rout=0, busy=100),
    )
    evals, _ = scaler().evaluate([snap])
    assert evals["src"].target_rate == pytest.approx(10_000)
    assert evals["map"].target_rate == pytest.approx(10_000)
    assert evals["sink"].target_rate == pytest.approx(2_500)
    assert evals["map"].tpr == pytest.approx(8000 / 0.4)


def test_busy_time_aggregator_max_uses_the_busiest_subtask():
    subs = [{"records_in_per_s": 3000, "busy_ms_per_s": 900}, {"records_in_per_s": 3000, "busy_ms_per_s": 300}]
    snap = snapshot(TOPO)(src=op(2, rin=6000, busy=600), map=op(2, rin=6000, busy=600, subtasks=subs),
                          sink=op(1, rin=6000, busy=100))  # fmt: skip
    assert scaler().evaluate([snap])[0]["map"].tpr == pytest.approx(6000 / 0.9)
    assert scaler(**{"metrics.busy-time.aggregator": "AVG"}).evaluate([snap])[0]["map"].tpr == pytest.approx(10_000)


def test_observed_true_processing_rate_replaces_busy_time_for_a_catching_up_source():
    # The source claims 10 % busy (TPR 100,000) but, with 200 s of lag and 50 % backpressure,
    # it can really read 10,000 / (1 - 0.5) = 20,000 rec/s.
    def snap(t):
        return steady(t, rin=10_000, busy=100, lag=2_000_000, bp=500)

    one = scaler().evaluate([snap(0)])[0]["src"]
    assert one.tpr_source == "busy-time" and one.tpr == pytest.approx(100_000)  # min-observations = 2
    two = scaler().evaluate([snap(0), snap(15)])[0]["src"]
    assert two.tpr_source == "observed" and two.tpr == pytest.approx(20_000)
    # Below the lag threshold (30 s of input) nothing is observed.
    low = scaler().evaluate([steady(0, busy=100, lag=100_000), steady(15, busy=100, lag=100_000)])[0]["src"]
    assert low.tpr_source == "busy-time"


# ---------------------------------------------------------------- planning


def test_utilisation_band_suppresses_scaling():
    # TPR = 2 x input; target capacity 0.80 x TPR -> p 10 -> 8 would be wanted, but TPR lies
    # inside [capacity at 100 %, capacity at 40 %] = [1.0, 2.67] x input: no rescale.
    a = scaler()
    snap = steady(rin=10_000, busy=500, p=10)
    ev = a.evaluate([snap])[0]["map"]
    assert ev.scale_up_threshold <= ev.tpr <= ev.scale_down_threshold
    assert a.compute_parallelism(snap.topology, "map", ev)[0] == 8
    assert a.decide(snap, NONE) is None
    # A narrower band (0.6..0.8) puts the same TPR outside: now it scales down.
    d = scaler(**{"target.utilization.boundary": 0.1}).decide(snap, NONE)
    assert d is not None and d.parallelism["map"] == 8 and d.details["vertices"]["map"]["outside_band"]


def test_scale_up_factor_is_target_capacity_over_tpr():
    a = scaler()
    snap = steady(rin=10_000, busy=1000, lag_rate=2000, p=2)  # saturated: TPR = input
    d = a.decide(snap, NONE)
    assert d is not None
    factor = (12_000 * 300 / 1800 + 12_000 / 0.7) / 10_000  # Kafka gets 10,000 + 2,000 rec/s
    assert d.parallelism["map"] == math.ceil(2 * factor)
    assert d.details["vertices"]["map"]["scale_factor"] == pytest.approx(factor, rel=1e-3)
    assert "map 2->" in d.reason


def test_scale_down_max_factor_clamps_the_step():
    snap = steady(rin=1000, busy=10, p=10)  # TPR 100,000 for 1,000 rec/s: factor ~0.016
    d = scaler().decide(snap, NONE)
    assert d is not None and d.parallelism["map"] == math.ceil(10 * (1 - 0.6)) == 4
    d = scaler(**{"scale-down.max-factor": 0.3}).decide(snap, NONE)
    assert d is not None and d.parallelism["map"] == 7


def test_min_and_max_parallelism_bound_the_result():
    d = scaler(**{"vertex.max-parallelism": 3}).decide(steady(rin=10_000, busy=1000, lag_rate=2000, p=2), NONE)
    assert d is not None and d.parallelism["map"] == 3
    d = scaler(**{"vertex.min-parallelism": 6}).decide(steady(rin=1000, busy=10, p=10), NONE)
    assert d is not None and d.parallelism["map"] == 6


def test_current_release_alignment_modes():
    """ParallelismAligner / BuiltInAlignmentMode of operator 1.16-SNAPSHOT; BALANCED is the default."""
    assert FlinkOperatorConfig().alignment() == "BALANCED"
    assert align_parallelism(4, 5, 128, 200) == 6  # BALANCED: 128 // 6 = 21 < 128 // 5 = 25
    assert align_parallelism(4, 5, 128, 200, "EVENLY_SPREAD") == 8  # first divisor of 128 from 5 up
    assert align_parallelism(10, 5, 128, 200, "EVENLY_SPREAD") == 8  # scale-down: within [target, current]
    assert align_parallelism(10, 5, 128, 200, "BALANCED") == 6
    assert align_parallelism(6, 5, 128, 200, "EVENLY_SPREAD") == 5  # [5, 6] has no divisor: keep the target
    assert align_parallelism(4, 5, 128, 200, "OFF") == 5
    assert align_parallelism(4, 5, 24, 24, "BALANCED") == 6  # 24 partitions: 24 // 5 = 4, 24 // 6 = 4, 6 divides
    assert align_parallelism(30, 70, 128, 100, "EVENLY_SPREAD") == 70  # no divisor in [70, 100]: keep, never block
    assert align_parallelism(30, 70, 128, 100, "BALANCED") == 70  # 128 // p = 1 all the way to 100


def test_deprecated_adjust_mode_falls_back_below_or_blocks():
    """`scaling.key-group.partitions.adjust.mode` keeps its old behaviour when the alignment mode is unset."""
    cfg = FlinkOperatorConfig(**{"scaling.key-group.partitions.adjust.mode": "EVENLY_SPREAD"})
    assert cfg.alignment() == "LEGACY_EVENLY_SPREAD"
    both = {"scaling.key-group.partitions.adjust.mode": "EVENLY_SPREAD", "scaling.parallelism-alignment.mode": "OFF"}
    assert FlinkOperatorConfig(**both).alignment() == "OFF"  # the new key wins
    mode = "LEGACY_EVENLY_SPREAD"
    assert align_parallelism(30, 70, 128, 100, mode) == 8 * 8  # nothing in [70, 100]: down to 64 (128 // 64 = 2 > 1)
    assert align_parallelism(65, 70, 128, 100, mode) == 65  # 64 would be a scale-down: blocked at the current 65
    assert align_parallelism(12, 11, 100, 200, mode) == 10  # scale-down: [11, 12] has none; 100 // 10 > 100 // 11
    assert align_parallelism(4, 5, 128, 200, "LEGACY_MAXIMIZE_UTILISATION") == 6  # found in the region: as BALANCED


def test_release_1_6_alignment_scans_divisors_up_to_half_the_key_groups():
    assert align_parallelism(4, 5, 128, 200, "DIVISORS_UP_TO_HALF") == 8
    assert align_parallelism(30, 70, 128, 200, "DIVISORS_UP_TO_HALF") == 70  # above 128 / 2: no scan
    assert align_parallelism(4, 5, 128, 6, "DIVISORS_UP_TO_HALF") == 5  # 8 is above the upper limit 6


def test_keyed_vertex_is_aligned_end_to_end():
    # A keyed (stateful) window operator wanting 5 of 128 key groups gets 6 (BALANCED), 8 (EVENLY_SPREAD).
    topo = topology_from_ops("t", [
        OperatorSpec("src", topic="bids"),
        OperatorSpec("window", upstream=("src",), state_bytes_per_record=100.0),
        OperatorSpec("sink", upstream=("window",)),
    ])  # fmt: skip
    # window: saturated at p=3 while Kafka gets 10,200 rec/s -> factor 10,200 * 1.595 / 10,000 -> p 5.
    snap = snapshot(topo)(src=op(4, rin=10_000, busy=500, lag_rate=200.0), window=op(3, rin=10_000, busy=1000),
                          sink=op(4, rin=10_000, busy=500))  # fmt: skip
    a = scaler()
    ev = a.evaluate([snap])[0]["window"]
    assert math.ceil(round(ev.target_capacity / ev.tpr * 3, 9)) == 5
    d = a.decide(snap, NONE)
    assert d is not None and d.parallelism["window"] == 6
    d = scaler(**{"scaling.parallelism-alignment.mode": "EVENLY_SPREAD"}).decide(snap, NONE)
    assert d is not None and d.parallelism["window"] == 8
    assert d.parallelism.get("src") == scaler().decide(snap, NONE).parallelism.get("src")


def test_sources_align_to_partitions_and_never_exceed_them():
    topo = topology_from_ops("t", [OperatorSpec("src", topic="bids"), OperatorSpec("sink", upstream=("src",))],
                             partitions=12)  # fmt: skip
    snap = snapshot(topo)(src=op(4, rin=10_000, busy=1000, lag_rate=2000.0), sink=op(4, rin=10_000, busy=500))
    d = scaler().decide(snap, NONE)  # wants ceil(4 * 1.914) = 8 -> next divisor of 12 = 12
    assert d is not None and d.parallelism["src"] == 12
    big = snapshot(topo)(src=op(10, rin=10_000, busy=1000, lag=5e6), sink=op(4, rin=10_000, busy=500))
    d = scaler().decide(big, NONE)
    assert d is not None and d.parallelism["src"] == 12


def test_backlog_widens_the_band_so_nothing_scales_down():
    # 1,000 rec/s at 1 % busy would scale down, but 400 s of lag is a backlog (> 300 s).
    snap = steady(rin=1000, busy=10, p=10, lag=400_000)
    evals, backlog = scaler().evaluate([snap])
    assert backlog and math.isinf(evals["map"].scale_down_threshold)
    d = scaler().decide(snap, NONE)
    assert d is None or all(p >= 10 for p in d.parallelism.values())
    assert scaler().evaluate([steady(rin=1000, busy=10, p=10, lag=200_000)])[1] is False


# ---------------------------------------------------------------- windows and time


def test_no_decision_during_stabilisation_or_before_the_window_is_full():
    a = FlinkOperator(FlinkOperatorConfig(**{"metrics.window": 60, "stabilization.interval": 30}))
    hot = [steady(t, busy=1000, lag_rate=2000, p=2) for t in range(0, 200, 15)]
    seen: list = []
    decided_at = None
    for s in hot:
        d = a.decide(s, History(snapshots=tuple(seen)))
        seen.append(s)
        if d is not None:
            decided_at = s.t
            break
    # First sample after stabilisation at t=30, window full at 30 + 60.
    assert decided_at == 90
    assert d is not None and d.details["window_samples"] == 5 and d.details["window_start"] == 30


def test_a_rescale_restarts_stabilisation_and_the_window():
    a = FlinkOperator(FlinkOperatorConfig(**{"metrics.window": 30, "stabilization.interval": 30}))
    action = AppliedAction(t=100, before={"src": 2, "map": 2, "sink": 2}, after={"src": 4, "map": 4, "sink": 4},
                           downtime_s=10)  # fmt: skip
    a.on_applied(action)
    hist = History(actions=(action,))
    assert a.decide(steady(150, busy=1000, lag_rate=2000, p=4), hist) is None  # stable from 140, window full at 170
    assert a.decide(steady(165, busy=1000, lag_rate=2000, p=4), hist) is None
    assert a.decide(steady(180, busy=1000, lag_rate=2000, p=4), hist) is not None


def test_lazy_scale_down_waits_for_the_interval_and_takes_the_highest_wish():
    a = scaler(**{"scale-down.interval": 60})
    assert a.decide(steady(0, rin=1000, busy=10, p=10), NONE) is None  # wish 4, first trigger t=0
    assert a.decide(steady(30, rin=5000, busy=333, p=10), NONE) is None  # wish 6 (still < 10)
    d = a.decide(steady(60, rin=1000, busy=10, p=10), NONE)
    assert d is not None
    wanted_at_30 = a.compute_parallelism(TOPO, "map", a.evaluate([steady(30, rin=5000, busy=333, p=10)])[0]["map"])[0]
    assert 4 < wanted_at_30 < 10 and d.parallelism["map"] == wanted_at_30
    # A scale-up wish cancels a pending scale-down.
    b = scaler(**{"scale-down.interval": 60})
    b.decide(steady(0, rin=1000, busy=10, p=10), NONE)
    assert b.decide(steady(30, busy=1000, lag_rate=2000, p=10), NONE) is not None
    assert b.decide(steady(60, rin=1000, busy=10, p=10), NONE) is None  # the clock started again


def test_ineffective_scale_up_is_reported_and_blocked_only_when_enabled():
    def run(enabled: bool):
        a = scaler(**{"scaling.effectiveness.detection.enabled": enabled})
        first = a.decide(steady(0, rin=10_000, busy=1000, lag_rate=2000, p=2), NONE)
        assert first is not None
        after = first.parallelism["map"]
        a.on_applied(AppliedAction(t=0, before={"src": 2, "map": 2, "sink": 2}, after=dict(first.parallelism)))
        # More subtasks, but they still process only 10,000 rec/s at full load: TPR did not grow.
        snap = snapshot(TOPO, t=30)(src=op(first.parallelism["src"], rin=10_000, busy=1000, lag_rate=2000.0),
                                    map=op(after, rin=10_000, busy=1000),
                                    sink=op(first.parallelism["sink"], rin=10_000, busy=1000))  # fmt: skip
        return a.decide(snap, NONE)

    d = run(False)
    assert d is not None and "map" in d.parallelism and "map" in d.details["ineffective_scaling"]
    d = run(True)
    assert d is None or "map" not in d.parallelism


def test_a_vertex_with_unmeasured_busy_time_is_left_alone_while_the_others_scale():
    """Issue 8.1: unknown busy time is a NaN true processing rate (as in the operator), not busy 0 and
    an infinite rate that would cut the vertex from 10 to 4."""
    snap = snapshot(TOPO, t=0.0)(
        src=op(10, rin=1000, busy=10), map=op(10, rin=1000, busy=math.nan), sink=op(10, rin=1000, rout=0, busy=10))
    a = scaler()
    ev = a.evaluate([snap])[0]
    assert math.isnan(ev["map"].tpr) and not math.isnan(ev["sink"].tpr)
    d = a.decide(snap, NONE)
    assert d is not None and d.parallelism.get("map", 10) == 10
    assert d.parallelism["sink"] == 4  # a measured vertex at 10 with the same load is cut as usual
