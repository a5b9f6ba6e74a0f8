"""HPA-CPU and HPA-Varga (Kanis 2023, ch. 4.4, 4.5, 6.7.3, 6.7.4) pinned with hand-built snapshots."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from autoscalers.base import History
from autoscalers.hpa import HPACPU, HPACPUConfig, HPAVarga, HPAVargaConfig
from harness.vocabulary import Metric
from tests.builders import chain, op, snapshot

TOPO = chain("src", "win", "sink")
NONE = History()


def warmed(scaler, snap):
    """Decide on `snap` after a first decision one window earlier at the same sizes and metrics.

    Kubernetes seeds the stabilisation window with the current size at the first reconcile, so a
    scale-down can only show once that entry is older than the window.
    """
    scaler.decide(replace(snap, t=snap.t - 301.0), NONE)
    return scaler.decide(snap, NONE)


def cpu_snap(t: float = 0.0, p: tuple[int, int, int] = (2, 2, 2), cpu: tuple[float, float, float] = (0.7,) * 3, **job):
    return snapshot(TOPO, t=t, **job)(src=op(p[0], cpu=cpu[0]), win=op(p[1], cpu=cpu[1]), sink=op(p[2], cpu=cpu[2]))


# --- HPA-CPU -----------------------------------------------------------------------------------


def test_cpu_desired_is_ceil_p_times_ratio_per_operator():
    hpa = HPACPU()
    d = warmed(hpa, cpu_snap(t=301, p=(2, 2, 4), cpu=(0.7, 0.9, 0.35)))
    assert d is not None
    # src at target: unchanged; win ceil(2 * 0.9/0.7) = 3; sink ceil(4 * 0.35/0.7) = 2
    assert d.parallelism == {"win": math.ceil(2 * 0.9 / 0.7), "sink": 2}
    assert "win 2->3" in d.reason and "sink 4->2" in d.reason
    assert d.details["operators"]["win"]["values"]["cpu"] == pytest.approx(0.9)


def test_cpu_at_target_is_no_decision():
    assert HPACPU().decide(cpu_snap(), NONE) is None


def test_tolerance_skips_small_deviations_and_is_a_parameter():
    snap = cpu_snap(p=(4, 4, 4), cpu=(0.7, 0.76, 0.7))  # ratio 1.086
    assert HPACPU(HPACPUConfig(tolerance=0.1)).decide(snap, NONE) is None  # within Kubernetes' 0.1
    d = HPACPU(HPACPUConfig(tolerance=0.05)).decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": math.ceil(4 * 0.76 / 0.7)}


def test_default_tolerance_is_the_thesis_zero():
    """The thesis' HPA applies eq. 4.3 as written (no tolerance in ch. 4.4 / tables 6.3, 6.4, nor its code)."""
    assert HPACPUConfig().tolerance == 0.0 and HPAVargaConfig().tolerance == 0.0
    d = HPACPU().decide(cpu_snap(p=(4, 4, 4), cpu=(0.7, 0.76, 0.7)), NONE)
    assert d is not None and d.parallelism == {"win": 5}  # ceil(4 * 1.086)


@pytest.mark.parametrize(("cpu", "expected"), [(0.55, 4), (0.45, 4), (0.56, 5), (0.35, 3)])
def test_tolerance_band_includes_both_ends(cpu, expected):
    """Kubernetes keeps the size while 1 - tol <= ratio <= 1 + tol: 0.55/0.5 = 1.1 and 0.45/0.5 = 0.9 stay."""
    hpa = HPACPU(HPACPUConfig(tolerance=0.1, cpu_target=0.5))
    d = warmed(hpa, cpu_snap(t=301, p=(4, 4, 4), cpu=(0.5, cpu, 0.5)))
    got = d.parallelism.get("win", 4) if d is not None else 4
    # outside the band: 0.56/0.5 = 1.12 -> ceil(4.48) = 5; 0.35/0.5 = 0.7 -> ceil(2.8) = 3
    assert got == expected


def test_first_decision_seeds_the_window_with_the_current_size():
    """Kubernetes' first reconcile records the current size: no scale-down until it leaves the window."""
    hpa = HPACPU()
    snap = cpu_snap(t=0, p=(2, 2, 4), cpu=(0.7, 0.7, 0.35))  # sink wants ceil(4 * 0.5) = 2
    assert hpa.decide(snap, NONE) is None
    assert hpa.decide(replace(snap, t=300.0), NONE) is None  # the seed is exactly 300 s old: still counts
    d = hpa.decide(replace(snap, t=315.0), NONE)
    assert d is not None and d.parallelism == {"sink": 2}
    # a scale-up is not held back by the seed
    assert HPACPU().decide(cpu_snap(t=0, p=(2, 2, 4), cpu=(0.7, 0.9, 0.7)), NONE).parallelism == {"win": 3}


def test_result_is_clamped_to_one():
    d = warmed(HPACPU(), cpu_snap(t=301, p=(3, 3, 3), cpu=(0.0, 0.7, 0.7)))
    assert d is not None and d.parallelism == {"src": 1}


@pytest.mark.parametrize("target", [0.9, 1.0])
def test_cpu_targets_at_or_above_saturation_never_scale_up(target):
    """A task manager's CPU load tops out near 0.9 (ch. 7): a saturated operator is never grown."""
    for cpu in (0.5, 0.7, 0.85, 0.9):
        hpa = HPACPU(HPACPUConfig(cpu_target=target))
        d = hpa.decide(cpu_snap(p=(2, 10, 2), cpu=(cpu, cpu, cpu)), NONE)
        current = {"src": 2, "win": 10, "sink": 2}
        if d is not None:
            assert all(p <= current[n] for n, p in d.parallelism.items())
    # ... while target 0.7 does grow a saturated operator
    d = HPACPU().decide(cpu_snap(cpu=(0.9, 0.9, 0.9)), NONE)
    assert d is not None and all(p > 2 for p in d.parallelism.values())


def test_unmeasured_cpu_keeps_parallelism():
    nan = math.nan
    assert HPACPU().decide(cpu_snap(cpu=(nan, nan, nan)), NONE) is None
    # one operator unmeasured: it is left alone, the others still follow their CPU
    d = warmed(HPACPU(), cpu_snap(t=301, p=(2, 2, 2), cpu=(0.9, nan, 0.35)))
    assert d is not None and d.parallelism == {"src": 3, "sink": 1}
    assert d.details["operators"]["win"]["skipped"] == "no metric"


def test_cpu_signal_picks_the_jvm_gauge_or_the_quota_share():
    def snap(jvm: float, quota: float):
        return snapshot(TOPO)(src=op(2, cpu=quota, cpu_jvm=jvm), win=op(2, cpu=quota, cpu_jvm=jvm),
                              sink=op(2, cpu=quota, cpu_jvm=jvm))

    assert HPACPUConfig().cpu_signal == "jvm"  # the thesis read Status.JVM.CPU.Load
    assert HPACPU().needs().operators == {Metric.CPU_JVM}
    d = warmed(HPACPU(), replace(snap(jvm=0.35, quota=1.0), t=301.0))
    assert d is not None and set(d.parallelism.values()) == {1}
    quota = HPACPU(HPACPUConfig(cpu_signal="quota"))
    assert quota.needs().operators == {Metric.CPU}
    d = quota.decide(snap(jvm=0.35, quota=1.0), NONE)
    assert d is not None and set(d.parallelism.values()) == {3}


def test_stabilisation_window_keeps_max_of_last_300_s_then_forgets():
    hpa = HPACPU()
    up = hpa.decide(cpu_snap(t=0, p=(2, 4, 2), cpu=(0.7, 0.9, 0.7)), NONE)
    assert up is not None and up.parallelism == {"win": 6}  # ceil(4 * 0.9/0.7)
    # applied: now 6 subtasks with little load; the window still holds the 6 from t=0
    for t in range(15, 301, 15):  # an entry exactly 300 s old still counts
        assert hpa.decide(cpu_snap(t=t, p=(2, 6, 2), cpu=(0.7, 0.2, 0.7)), NONE) is None
    down = hpa.decide(cpu_snap(t=315, p=(2, 6, 2), cpu=(0.7, 0.2, 0.7)), NONE)
    assert down is not None and down.parallelism == {"win": math.ceil(6 * 0.2 / 0.7)}


def test_stabilisation_window_takes_the_max_of_what_remains():
    hpa = HPACPU()
    hpa.decide(cpu_snap(t=0, p=(2, 6, 2), cpu=(0.7, 0.9, 0.7)), NONE)  # desired 8 (not applied)
    hpa.decide(cpu_snap(t=150, p=(2, 6, 2), cpu=(0.7, 0.5, 0.7)), NONE)  # desired ceil(4.29) = 5
    d = hpa.decide(cpu_snap(t=301, p=(2, 6, 2), cpu=(0.7, 0.2, 0.7)), NONE)  # desired 2, t=0 forgotten
    assert d is not None and d.parallelism == {"win": 5}
    assert "max of last 300 s" in d.reason
    d = hpa.decide(cpu_snap(t=451, p=(2, 6, 2), cpu=(0.7, 0.2, 0.7)), NONE)
    assert d is not None and d.parallelism == {"win": 2}


def test_window_length_is_a_parameter():
    hpa = HPACPU(HPACPUConfig(scale_down_window_s=0))
    hpa.decide(cpu_snap(t=0, p=(2, 6, 2), cpu=(0.7, 0.9, 0.7)), NONE)
    d = hpa.decide(cpu_snap(t=15, p=(2, 6, 2), cpu=(0.7, 0.2, 0.7)), NONE)
    assert d is not None and d.parallelism == {"win": 2}


# --- HPA-Varga ---------------------------------------------------------------------------------


def varga_snap(busy=(700, 700, 700), bp=(0, 0, 0), flags=(False, False, False), p=(2, 4, 2), **job):
    """busy + backpressured ms/s give utilisation 1 - idle/1000 = (busy + bp)/1000."""
    ops = {n: op(p[i], busy=busy[i], bp=bp[i], backpressured=flags[i]) for i, n in enumerate(("src", "win", "sink"))}
    return snapshot(TOPO, **job)(**ops)


def test_varga_utilisation_alone_when_lag_grows_slowly():
    snap = varga_snap(t=301, busy=(700, 900, 350), kafka_lag_rate=999.0, throughput=1000.0)
    d = warmed(HPAVarga(), snap)
    assert d is not None
    assert d.parallelism == {"win": math.ceil(4 * 0.9 / 0.7), "sink": 1}
    rlc = {n: o["values"]["relative_lag_change"] for n, o in d.details["operators"].items()}
    assert rlc == {"src": -1.0, "win": -1.0, "sink": -1.0}


def test_varga_relative_lag_change_only_on_the_bottleneck():
    # lag +5000 rec/s over 20000 rec/s -> 1.25; src backpressured, win is the first one that is not
    snap = varga_snap(flags=(True, False, False), bp=(0, 0, 0), kafka_lag_rate=5000.0, throughput=20000.0)
    d = HPAVarga().decide(snap, NONE)
    assert d is not None
    assert d.parallelism == {"win": math.ceil(4 * 1.25)}
    assert d.details["bottleneck"] == ["win"]
    rlc = {n: o["values"]["relative_lag_change"] for n, o in d.details["operators"].items()}
    assert rlc == {"src": -1.0, "win": pytest.approx(1.25), "sink": -1.0}


def test_varga_follows_backpressure_to_the_first_operator_not_backpressured():
    snap = varga_snap(flags=(True, True, False), kafka_lag_rate=5000.0, throughput=20000.0)
    d = HPAVarga().decide(snap, NONE)
    assert d is not None and d.parallelism == {"sink": math.ceil(2 * 1.25)}


def test_varga_blames_the_sources_when_nothing_is_backpressured():
    snap = varga_snap(kafka_lag_rate=10000.0, throughput=20000.0)
    d = HPAVarga().decide(snap, NONE)
    assert d is not None and d.parallelism == {"src": math.ceil(2 * 1.5)}
    assert d.details["bottleneck"] == ["src"]


def test_varga_threshold_is_a_parameter():
    snap = varga_snap(kafka_lag_rate=5000.0, throughput=20000.0)
    assert HPAVarga(HPAVargaConfig(lag_rate_backpressure_threshold=6000)).decide(snap, NONE) is None
    assert HPAVarga().decide(snap, NONE) is not None


def test_varga_takes_the_max_of_both_metrics():
    # bottleneck win: utilisation 1.0 -> ceil(4/0.7) = 6 beats lag 1.25 -> 5
    snap = varga_snap(busy=(700, 1000, 700), flags=(True, False, False), kafka_lag_rate=5000.0, throughput=20000.0)
    d = HPAVarga().decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": math.ceil(4 / 0.7)}
    assert "utilisation" in d.reason


def test_varga_without_throughput_ignores_the_lag():
    snap = varga_snap(kafka_lag_rate=5000.0, throughput=0.0)
    assert HPAVarga().decide(snap, NONE) is None


# --- Kubernetes semantics: failed metrics, behavior, min/max -------------------------------------


def test_a_failed_metric_blocks_scale_down_but_not_scale_up():
    """Kubernetes: if any metric failed and the others propose less than the current size, keep it."""
    nan = math.nan
    # relative lag change cannot be computed (lag rate unmeasured); utilisation alone would shrink win
    snap = varga_snap(t=301, busy=(700, 350, 700), kafka_lag_rate=nan, throughput=20000.0)
    hpa = HPAVarga()
    assert warmed(hpa, snap) is None
    assert hpa.decide(replace(snap, t=1000.0), NONE) is None  # not a matter of the window: never
    # ... while utilisation 0.9 still grows it: ceil(4 * 0.9/0.7) = 6
    up = HPAVarga().decide(varga_snap(busy=(700, 900, 700), kafka_lag_rate=nan, throughput=20000.0), NONE)
    assert up is not None and up.parallelism == {"win": 6}
    # with every metric measured the same utilisation does shrink it: ceil(4 * 0.35/0.7) = 2
    ok = warmed(HPAVarga(), varga_snap(t=301, busy=(700, 350, 700), kafka_lag_rate=0.0, throughput=20000.0))
    assert ok is not None and ok.parallelism == {"win": 2}


def test_a_failed_metric_is_named_in_the_decision_details():
    nan = math.nan
    snap = varga_snap(busy=(700, 900, 350), kafka_lag_rate=nan, throughput=20000.0)
    d = HPAVarga().decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": 6}
    sink = d.details["operators"]["sink"]
    assert sink["skipped"] == "a metric failed: no scale-down" and sink["failed"] == ["relative_lag_change"]
    assert d.details["lag"] == "not measured"


def behaviour(**rules) -> HPACPU:
    return HPACPU(HPACPUConfig.model_validate({"behavior": rules, "tolerance": 0.1}))


def test_behavior_defaults_limit_scale_up_to_max_of_4_pods_or_double_per_15_s():
    # 2 subtasks at 1.0 CPU / 0.1 target want 20; Pods 4 -> 6, Percent 100 -> 4; selectPolicy Max -> 6
    snap = cpu_snap(p=(2, 2, 2), cpu=(0.7, 7.0, 0.7))
    assert behaviour().decide(snap, NONE).parallelism == {"win": 6}
    assert behaviour(scaleUp={"selectPolicy": "Min"}).decide(snap, NONE).parallelism == {"win": 4}
    assert behaviour(scaleUp={"selectPolicy": "Disabled"}).decide(snap, NONE) is None


def test_behavior_policies_count_what_was_added_within_their_period():
    from autoscalers.base import AppliedAction

    hpa = behaviour()
    d = hpa.decide(cpu_snap(t=0, p=(2, 2, 2), cpu=(0.7, 7.0, 0.7)), NONE)
    assert d.parallelism == {"win": 6}
    hpa.on_applied(AppliedAction(t=0.0, before={"src": 2, "win": 2, "sink": 2}, after={"src": 2, "win": 6, "sink": 2}))
    # 10 s later the period started at 6 - 4 = 2: Pods allows 6, Percent 4 -> nothing more yet
    assert hpa.decide(cpu_snap(t=10, p=(2, 6, 2), cpu=(0.7, 7.0, 0.7)), NONE) is None
    # 16 s later the event left the 15 s period: from 6, Pods 10, Percent 12 -> 12
    assert hpa.decide(cpu_snap(t=16, p=(2, 6, 2), cpu=(0.7, 7.0, 0.7)), NONE).parallelism == {"win": 12}


def test_behavior_scale_down_policies_and_window():
    snap = cpu_snap(t=0, p=(2, 6, 2), cpu=(0.7, 0.1, 0.7))  # win wants ceil(6 / 7) = 1
    pods = behaviour(scaleDown={"stabilizationWindowSeconds": 0,
                                "policies": [{"type": "Pods", "value": 1, "periodSeconds": 60}]})
    assert pods.decide(snap, NONE).parallelism == {"win": 5}
    percent = behaviour(scaleDown={"stabilizationWindowSeconds": 0,
                                   "policies": [{"type": "Percent", "value": 50, "periodSeconds": 60}]})
    assert percent.decide(snap, NONE).parallelism == {"win": 3}  # int(6 * 0.5)
    # the default scale-down window is the controller's 300 s, and it starts with the seed (6)
    held = behaviour()
    assert held.decide(snap, NONE) is None
    assert held.decide(replace(snap, t=299.0), NONE) is None
    # with behavior an entry exactly a window old no longer counts (Kubernetes: newer than the cut-off)
    assert held.decide(replace(snap, t=300.0), NONE).parallelism == {"win": 1}


def test_behavior_scale_up_window_takes_the_lowest_recent_recommendation():
    hpa = behaviour(scaleUp={"stabilizationWindowSeconds": 60})
    snap = cpu_snap(t=0, p=(2, 2, 2), cpu=(0.7, 0.84, 0.7))  # win wants ceil(2 * 1.2) = 3
    assert hpa.decide(snap, NONE) is None  # the seed (2) is within the last 60 s: min(3, 2) = 2
    assert hpa.decide(replace(snap, t=61.0), NONE).parallelism == {"win": 3}


def test_per_direction_tolerance():
    hpa = behaviour(scaleUp={"tolerance": 0.2}, scaleDown={"tolerance": 0.0, "stabilizationWindowSeconds": 0})
    assert hpa.decide(cpu_snap(p=(4, 4, 4), cpu=(0.7, 0.805, 0.7)), NONE) is None  # 1.15 <= 1 + 0.2
    down = hpa.decide(cpu_snap(p=(4, 4, 4), cpu=(0.7, 0.665, 0.7)), NONE)  # 0.95 < 1 - 0: ceil(3.8) = 4
    assert down is None
    down = hpa.decide(cpu_snap(p=(4, 4, 4), cpu=(0.7, 0.42, 0.7)), NONE)  # 0.6: ceil(2.4) = 3
    assert down.parallelism == {"win": 3}


def test_min_and_max_replicas():
    d = HPACPU(HPACPUConfig(maxReplicas=5)).decide(cpu_snap(p=(2, 4, 2), cpu=(0.7, 1.4, 0.7)), NONE)
    assert d.parallelism == {"win": 5} and "max replicas 5" in d.reason  # wanted 8
    d = warmed(HPACPU(HPACPUConfig(min_replicas=3)), cpu_snap(t=301, p=(2, 6, 2), cpu=(0.7, 0.1, 0.7)))
    assert d.parallelism == {"win": 3, "src": 3, "sink": 3}  # below the minimum: raised to it
