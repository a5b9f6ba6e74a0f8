"""Flink-ER pinned rule by rule with hand-built snapshots."""

from __future__ import annotations

import pytest

from autoscalers.base import AppliedAction, History
from autoscalers.flink_er import FlinkER, FlinkERConfig
from harness.topology import OperatorSpec, topology_from_ops
from tests.builders import chain, op, snapshot

TOPO = chain("src", "map", "sink")
NONE = History()
LAGGING = 200_000.0  # 100,000 per source subtask = 50 s of the 2,000 rec/s it receives: above phi = 30 s


def er(**params) -> FlinkER:
    return FlinkER(FlinkERConfig(**({"period_s": 0} | params)))


def pipeline(
    map_busy: float, *, lag: float = LAGGING, latency: float = 40.0, src_busy: float = 300.0, t=0.0, buffer=0.9
):
    """src (2) -> map (2) -> sink (1), 4,000 rec/s flowing; Kafka gets 4,000 rec/s; map's input queue full."""
    return snapshot(TOPO, t=t, latency_s=latency)(
        src=op(2, rin=4000, busy=src_busy, lag=lag, lag_rate=0.0, input_rate=4000.0),
        map=op(2, rin=4000, busy=map_busy, buffer=buffer),
        sink=op(1, rin=4000, rout=0, busy=200),
    )


def test_saturated_middle_operator_gets_one_more_subtask():
    d = er(latency_feedback=False).decide(pipeline(map_busy=1000), NONE)
    assert d is not None and d.parallelism == {"map": 3}
    # The min cut sits in front of map: 4,000 rec/s of capacity, all of it used.
    assert d.details["cut_capacity"] == pytest.approx(4000)
    assert d.details["cut_flow"] == pytest.approx(4000)


def test_every_operator_behind_a_partition_meeting_eq_11_is_enlarged():
    """Alg. 2: "enlarge the parallelism of each operator that meets the criterion of equation (11)"."""
    snap = snapshot(TOPO, t=0.0, latency_s=40.0)(
        src=op(2, rin=4000, busy=300, lag=LAGGING, lag_rate=0.0, input_rate=4000.0),
        map=op(2, rin=4000, busy=1000, buffer=0.9),  # capacity 4,000: f = c
        sink=op(1, rin=4000, rout=0, busy=900),  # capacity 4,444: f = 0.9 c >= 0.85 c
    )
    d = er(latency_feedback=False).decide(snap, NONE)
    assert d is not None and d.parallelism == {"map": 3, "sink": 2}
    assert d.details["bottlenecks"]["sink"]["capacity"] == pytest.approx(4000 / 0.9)
    assert d.details["bottlenecks"]["map"]["flow"] == pytest.approx(4000)
    # `enlarge: first` keeps the old reading: only the operator after the minimum cut
    first = er(latency_feedback=False, enlarge="first").decide(snap, NONE)
    assert first is not None and first.parallelism == {"map": 3}
    # the source at 30 % busy (capacity 13,333 for 4,000) is not a bottleneck either way
    assert "src" not in d.parallelism


def test_latency_constraint_is_the_experiments_slo():
    from autoscalers.config import RunContext

    loose = FlinkER(FlinkERConfig(period_s=0), RunContext(slo_latency_s=100.0))
    loose.decide(pipeline(map_busy=1000, latency=40.0), NONE)  # 40 s < 0.5 x 100 s: raise capacities
    tight = FlinkER(FlinkERConfig(period_s=0), RunContext(slo_latency_s=5.0))
    tight.decide(pipeline(map_busy=1000, latency=40.0), NONE)  # 40 s > 5 s: lower where tuples wait
    assert loose.capacity_factor.get("map", 1.0) > 1.0 > tight.capacity_factor.get("map", 1.0)


def test_saturated_source_is_the_bottleneck_itself():
    d = er(latency_feedback=False).decide(pipeline(map_busy=300, src_busy=1000), NONE)
    assert d is not None and d.parallelism == {"src": 3}


def test_nothing_happens_below_phi():
    a = er(latency_feedback=False)
    assert a.decide(pipeline(map_busy=1000, lag=100_000), NONE) is None  # 50,000 per subtask = 25 s < 30 s
    assert er(latency_feedback=False, phi_s=20).decide(pipeline(map_busy=1000, lag=100_000), NONE) is not None
    assert er(latency_feedback=False, phi_records=60_000).decide(pipeline(map_busy=1000, lag=100_000), NONE) is None


def test_lambda_threshold_is_respected():
    # map at 80 % busy: the min cut (map's 5,000 rec/s) carries 4,000 = 0.8 c < 0.85 c.
    assert er(latency_feedback=False).decide(pipeline(map_busy=800), NONE) is None
    d = er(latency_feedback=False, **{"lambda": 0.8}).decide(pipeline(map_busy=800), NONE)
    assert d is not None and d.parallelism == {"map": 3}
    assert d.details["utilisation"] == pytest.approx(0.8)
    assert er(latency_feedback=False).decide(pipeline(map_busy=860), NONE) is not None


def test_source_is_the_subtask_with_the_largest_partition_lag():
    subs = [
        {"records_in_per_s": 2000, "records_out_per_s": 2000, "busy_ms_per_s": 300, "lag": 1000.0},
        {"records_in_per_s": 2000, "records_out_per_s": 2000, "busy_ms_per_s": 300, "lag": 90_000.0},
    ]
    snap = snapshot(TOPO)(
        src=op(2, rin=4000, busy=300, lag=1.0, input_rate=4000.0, subtasks=subs),
        map=op(2, rin=4000, busy=1000),
        sink=op(1, rin=4000, rout=0, busy=200),
    )
    d = er(latency_feedback=False).decide(snap, NONE)
    assert d is not None and d.details["source_subtask"] == "src#1"
    assert d.details["source_lag_s"] == pytest.approx(90_000 / 2000)


def test_join_capacity_used_by_the_other_input_counts_against_the_lagging_source():
    topo = topology_from_ops("t", [
        OperatorSpec("a", topic="bids"),
        OperatorSpec("b", topic="persons"),
        OperatorSpec("join", upstream=("a", "b")),
        OperatorSpec("sink", upstream=("join",)),
    ])  # fmt: skip

    def snap(join_busy: float):
        return snapshot(topo, latency_s=40.0)(
            a=op(2, rin=4000, busy=300, lag=LAGGING, input_rate=4000.0),
            b=op(1, rin=4000, busy=300, lag=0.0, input_rate=4000.0),
            join=op(2, rin=8000, busy=join_busy),
            sink=op(1, rin=8000, rout=0, busy=100),
        )

    # join processes 8,000 rec/s at 100 % busy: 4,000 of it is b's, 4,000 remain for a.
    d = er(latency_feedback=False).decide(snap(1000), NONE)
    assert d is not None and d.parallelism == {"join": 3}
    assert "b" not in d.details["operator_capacity"]
    assert d.details["operator_capacity"]["join"] == pytest.approx(4000)
    # At 60 % busy the join could take 13,333 - 4,000 = 9,333 rec/s of a's data: no bottleneck.
    assert er(latency_feedback=False).decide(snap(600), NONE) is None


def test_latency_feedback_shifts_capacities():
    # map at 80 % busy is below lambda ...
    assert er(latency_feedback=False).decide(pipeline(map_busy=800, latency=10.0), NONE) is None
    # ... but 10 s latency against a 5 s constraint means the capacities were over-estimated:
    # eq. 14's relative step |1 - 10/5| = 1, capped at 0.5, halves them and map becomes the bottleneck.
    a = er()
    d = a.decide(pipeline(map_busy=800, latency=10.0), NONE)
    assert d is not None and d.parallelism == {"map": 3}
    assert a.capacity_factor["map"] == pytest.approx(0.5)
    assert d.details["operator_capacity"]["map"] == pytest.approx(5000 * 0.5)
    # Only vertices where tuples wait are lowered: not the idle sink, not the source.
    assert "sink" not in a.capacity_factor and "src" not in a.capacity_factor
    # With map's input buffers empty nothing points at map: no capacity change, no scaling.
    e = er()
    assert e.decide(pipeline(map_busy=800, latency=10.0, buffer=0.1), NONE) is None
    assert e.capacity_factor == {}
    # Far below the constraint with map close to its capacity: capacities grow, no bottleneck.
    b = er(phi_s=0.0)
    assert b.decide(pipeline(map_busy=900, latency=1.0), NONE) is None
    assert b.capacity_factor["map"] == pytest.approx(1 + min(0.5, 1 - 1.0 / 5))
    assert "src" not in b.capacity_factor  # src at 30 % busy is not near its capacity
    # A fixed step replaces eq. 14.
    c = er(eta=0.1)
    c.decide(pipeline(map_busy=800, latency=10.0), NONE)
    assert c.capacity_factor["map"] == pytest.approx(0.9)


def test_acts_at_most_once_per_period():
    a = FlinkER(FlinkERConfig(latency_feedback=False))  # 60 s
    assert a.decide(pipeline(map_busy=1000, t=0), NONE) is not None
    assert a.decide(pipeline(map_busy=1000, t=30), NONE) is None
    assert a.decide(pipeline(map_busy=1000, t=60), NONE) is not None


def test_respects_the_maximum_parallelism():
    assert er(latency_feedback=False, n_max=2).decide(pipeline(map_busy=1000), NONE) is None


def test_waits_while_the_job_restarts():
    action = AppliedAction(t=100, before={"map": 2}, after={"map": 3}, downtime_s=50)
    a = er(latency_feedback=False)
    assert a.decide(pipeline(map_busy=1000, t=155), History(actions=(action,))) is None  # window from 140
    assert a.decide(pipeline(map_busy=1000, t=170), History(actions=(action,))) is not None
    b = er(latency_feedback=False)
    b.on_applied(action)
    assert b.decide(pipeline(map_busy=1000, t=155), NONE) is None
