"""Dhalion (Kanis 2023, ch. 4.2, 6.7.1) pinned with hand-built snapshots."""

from __future__ import annotations

import math

import pytest

from autoscalers.base import History
from autoscalers.dhalion import Dhalion, DhalionConfig
from harness.topology import OperatorSpec, topology_from_ops
from tests.builders import chain, op, snapshot

TOPO = chain("src", "win", "sink")
NONE = History()


def test_scales_only_the_bottleneck_by_one_plus_b_over_one_minus_b():
    snap = snapshot(TOPO, kafka_lag=50_000, kafka_lag_rate=3000.0, throughput=10_000.0)(
        src=op(2, bp=450), win=op(4, busy=950), sink=op(2, busy=100)
    )
    d = Dhalion().decide(snap, NONE)
    assert d is not None
    factor = 1 + 0.45 / (1 - 0.45)
    assert d.parallelism == {"win": math.ceil(4 * factor)}  # only the bottleneck, 4 -> 8
    assert "bottleneck win backpressure b=0.45 -> x1.82" in d.reason
    assert d.details["bottleneck"] == "win" and d.details["factor"] == pytest.approx(factor)


def test_walks_through_backpressured_operators_to_the_first_that_is_not():
    snap = snapshot(TOPO)(src=op(2, bp=800), win=op(3, bp=200), sink=op(2, busy=990))
    d = Dhalion().decide(snap, NONE)
    assert d is not None
    # sink's only upstream is win: b = 0.2 -> x1.25
    assert d.parallelism == {"sink": math.ceil(2 * 1.25)}
    assert d.details["backpressured"] == "src"


def test_b_is_the_largest_upstream_backpressure():
    topo = topology_from_ops(
        "t",
        [
            OperatorSpec("a", topic="auctions"),
            OperatorSpec("p", topic="persons"),
            OperatorSpec("join", upstream=("a", "p")),
            OperatorSpec("sink", upstream=("join",)),
        ],
    )
    snap = snapshot(topo)(a=op(1, bp=200), p=op(1, bp=500), join=op(3, busy=1000), sink=op(1))
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"join": math.ceil(3 * (1 + 0.5 / 0.5))}


def test_b_is_capped_so_the_factor_stays_finite():
    snap = snapshot(TOPO)(src=op(1, bp=1000), win=op(1, busy=1000), sink=op(1))
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": 10}  # b capped at 0.9 -> x10
    assert d.details["b_capped"] is True
    d = Dhalion(DhalionConfig(max_backpressure=0.5)).decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": 2}


def test_source_bottleneck_uses_lag_rate_over_throughput():
    """A source with lag growing at 5,000 rec/s and throughput 20,000 rec/s is scaled by 1.25."""
    snap = snapshot(TOPO, kafka_lag=80_000, kafka_lag_rate=5000.0, throughput=20_000.0)(
        src=op(4, busy=990), win=op(4, busy=500), sink=op(2, busy=100)
    )
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"src": math.ceil(4 * 1.25)}
    assert "x1.25" in d.reason


def test_source_bottleneck_prefers_per_source_lag_and_blames_only_lagging_sources():
    topo = topology_from_ops(
        "t",
        [
            OperatorSpec("a", topic="auctions"),
            OperatorSpec("p", topic="persons"),
            OperatorSpec("join", upstream=("a", "p")),
        ],
    )
    snap = snapshot(topo, kafka_lag=1e6, kafka_lag_rate=6000.0, throughput=21_000.0)(
        a=op(2, rin=8000, lag_rate=6000.0), p=op(2, rin=13_000, lag_rate=0.0), join=op(4)
    )
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"a": math.ceil(2 * (1 + 6000 / 8000))}


def test_lag_growing_slower_than_threshold_is_healthy():
    snap = snapshot(TOPO, kafka_lag=0, kafka_lag_rate=999.0, throughput=20_000.0)(
        src=op(4, busy=990), win=op(4), sink=op(2)
    )
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.details["symptom"] == "none"
    assert "src" in d.parallelism  # scaled down, not up
    assert d.parallelism["src"] < 4


def test_healthy_scales_down_operators_without_lag_by_1_2():
    snap = snapshot(TOPO, kafka_lag=9_999)(src=op(6), win=op(5, buffer=0.19), sink=op(1))
    d = Dhalion().decide(snap, NONE)
    assert d is not None
    assert d.parallelism == {"src": math.floor(6 / 1.2), "win": math.floor(5 / 1.2)}  # 5, 4; sink stays 1
    assert d.details["no_lag"] == ["src", "win", "sink"]


def test_no_lag_thresholds_keep_operators_with_lag():
    snap = snapshot(TOPO, kafka_lag=10_000)(src=op(6), win=op(5, buffer=0.2), sink=op(3))
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"sink": 2}


def test_scale_down_factor_is_a_parameter():
    snap = snapshot(TOPO)(src=op(6), win=op(1), sink=op(1))
    d = Dhalion(DhalionConfig(scale_down_factor=2.0)).decide(snap, NONE)
    assert d is not None and d.parallelism == {"src": 3}


def test_healthy_at_minimum_is_no_decision():
    snap = snapshot(TOPO)(src=op(1), win=op(1), sink=op(1))
    assert Dhalion().decide(snap, NONE) is None


def test_source_factor_is_capped_and_zero_throughput_is_left_alone():
    snap = snapshot(TOPO, kafka_lag_rate=1e6, throughput=1000.0)(src=op(1, busy=990), win=op(1), sink=op(1))
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"src": 10}
    stalled = snapshot(TOPO, kafka_lag_rate=5000.0, throughput=0.0)(src=op(1), win=op(1), sink=op(1))
    assert Dhalion().decide(stalled, NONE) is None


def test_source_uses_its_own_lag_for_the_no_lag_rule_when_reported():
    snap = snapshot(TOPO, kafka_lag=50_000)(src=op(6, lag=5_000), win=op(1), sink=op(1))
    d = Dhalion().decide(snap, NONE)
    assert d is not None and d.parallelism == {"src": 5}
    snap = snapshot(TOPO, kafka_lag=0)(src=op(6, lag=20_000), win=op(1), sink=op(1))
    assert Dhalion().decide(snap, NONE) is None


def test_backpressure_flag_without_backpressured_time_changes_nothing():
    snap = snapshot(TOPO)(src=op(2, backpressured=True), win=op(2), sink=op(2))
    assert Dhalion().decide(snap, NONE) is None
