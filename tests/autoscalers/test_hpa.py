"""HPA-CPU and HPA-Varga (Kanis 2023, ch. 4.4, 4.5, 6.7.3, 6.7.4) pinned with hand-built snapshots."""

from __future__ import annotations

import math

import pytest

from autoscalers.base import History
from autoscalers.hpa import HPACPU, HPACPUConfig, HPAVarga, HPAVargaConfig
from harness.vocabulary import Metric
from tests.builders import chain, op, snapshot

TOPO = chain("src", "win", "sink")
NONE = History()


def cpu_snap(t: float = 0.0, p: tuple[int, int, int] = (2, 2, 2), cpu: tuple[float, float, float] = (0.7,) * 3, **job):
    return snapshot(TOPO, t=t, **job)(src=op(p[0], cpu=cpu[0]), win=op(p[1], cpu=cpu[1]), sink=op(p[2], cpu=cpu[2]))


# --- HPA-CPU -----------------------------------------------------------------------------------


def test_cpu_desired_is_ceil_p_times_ratio_per_operator():
    hpa = HPACPU()
    d = hpa.decide(cpu_snap(p=(2, 2, 4), cpu=(0.7, 0.9, 0.35)), NONE)
    assert d is not None
    # src at target: unchanged; win ceil(2 * 0.9/0.7) = 3; sink ceil(4 * 0.35/0.7) = 2
    assert d.parallelism == {"win": math.ceil(2 * 0.9 / 0.7), "sink": 2}
    assert "win 2->3" in d.reason and "sink 4->2" in d.reason
    assert d.details["operators"]["win"]["values"]["cpu"] == pytest.approx(0.9)


def test_cpu_at_target_is_no_decision():
    assert HPACPU().decide(cpu_snap(), NONE) is None


def test_tolerance_skips_small_deviations_and_is_a_parameter():
    snap = cpu_snap(p=(4, 4, 4), cpu=(0.7, 0.76, 0.7))  # ratio 1.086, within 0.1
    assert HPACPU().decide(snap, NONE) is None
    d = HPACPU(HPACPUConfig(tolerance=0.05)).decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": math.ceil(4 * 0.76 / 0.7)}


def test_result_is_clamped_to_one():
    d = HPACPU().decide(cpu_snap(p=(3, 3, 3), cpu=(0.0, 0.7, 0.7)), NONE)
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
    d = HPACPU().decide(cpu_snap(p=(2, 2, 2), cpu=(0.9, nan, 0.35)), NONE)
    assert d is not None and d.parallelism == {"src": 3, "sink": 1}
    assert d.details["operators"]["win"]["skipped"] == "no metric"


def test_cpu_signal_picks_the_jvm_gauge_or_the_quota_share():
    def snap(jvm: float, quota: float):
        return snapshot(TOPO)(src=op(2, cpu=quota, cpu_jvm=jvm), win=op(2, cpu=quota, cpu_jvm=jvm),
                              sink=op(2, cpu=quota, cpu_jvm=jvm))

    assert HPACPUConfig().cpu_signal == "jvm"  # the thesis read Status.JVM.CPU.Load
    assert HPACPU().needs().operators == {Metric.CPU_JVM}
    d = HPACPU().decide(snap(jvm=0.35, quota=1.0), NONE)
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
    snap = varga_snap(busy=(700, 900, 350), kafka_lag_rate=999.0, throughput=1000.0)
    d = HPAVarga().decide(snap, NONE)
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
