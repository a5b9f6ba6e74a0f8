"""DS2 (Kanis 2023, ch. 4.3, 6.7.2) pinned with hand-built snapshots and hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from autoscalers.base import History
from autoscalers.ds2 import DS2, DS2Config, true_rates
from harness.topology import OperatorSpec, topology_from_ops
from tests.builders import chain, op, snapshot

TOPO = chain("src", "map", "sink")
NONE = History()


def three_ops(sink_busy: float = 200.0, **job):
    """External rate 10,000 rec/s; the job currently reads 4,000 rec/s.

    src:  2 subtasks, 2,000 rec/s each at 50 % busy -> true rate 4,000/instance, ratio 1
    map:  2 subtasks, 2,000 in / 500 out each at 80 % busy -> true rate 2,500/instance, ratio 0.25
    sink: 1 subtask, 1,000 rec/s at 20 % busy -> true rate 5,000/instance
    """
    job.setdefault("input_rate", 10_000.0)
    return snapshot(TOPO, **job)(
        src=op(2, rin=4000, busy=500, input_rate=10_000.0),
        map=op(2, rin=4000, rout=1000, busy=800),
        sink=op(1, rin=1000, rout=0, busy=sink_busy),
    )


def test_one_pass_target_propagation_without_overprovisioning():
    d = DS2(DS2Config(overprovisioning_factor=1.0)).decide(three_ops(), NONE)
    assert d is not None
    # src: 10,000 / 4,000 -> 3; map: 10,000 * 1 / 2,500 -> 4; sink: 10,000 * 0.25 / 5,000 -> 1 (unchanged)
    assert d.parallelism == {"src": 3, "map": 4}
    ops = d.details["operators"]
    assert ops["map"]["target_input"] == pytest.approx(10_000)
    assert ops["sink"]["target_input"] == pytest.approx(2_500)
    assert ops["map"]["true_rate_per_instance"] == pytest.approx(2_500)
    assert ops["map"]["ratio"] == pytest.approx(0.25)


def test_overprovisioning_multiplies_ds2s_answer():
    d = DS2().decide(three_ops(), NONE)  # default 1.2
    assert d is not None
    assert d.parallelism == {"src": math.ceil(3 * 1.2), "map": math.ceil(4 * 1.2), "sink": math.ceil(1 * 1.2)}
    d = DS2(DS2Config(overprovisioning_factor=1.4)).decide(three_ops(), NONE)
    assert d is not None and d.parallelism == {"src": 5, "map": 6, "sink": 2}


def test_rounding_ignores_float_noise():
    # 5 * 1.2 is 6.000000000000001 in floating point; DS2 must ask for 6, not 7
    snap = snapshot(chain("src", "sink"), input_rate=5000.0)(
        src=op(1, rin=1000, busy=1000, input_rate=5000.0), sink=op(6, rin=1000, busy=200)
    )
    d = DS2().decide(snap, NONE)
    assert d is not None and d.parallelism["src"] == 6


def test_true_rates_are_per_subtask_then_aggregated():
    m = op(
        2,
        subtasks=[
            {"records_in_per_s": 2500, "records_out_per_s": 500, "busy_ms_per_s": 500},
            {"records_in_per_s": 1500, "records_out_per_s": 500, "busy_ms_per_s": 750},
        ],
    )
    r = true_rates(m, is_source=False, min_busy_fraction=0.01)
    assert r is not None
    assert r.true_input == pytest.approx(2500 / 0.5 + 1500 / 0.75)  # 7,000
    assert r.true_output == pytest.approx(500 / 0.5 + 500 / 0.75)
    assert r.per_instance == pytest.approx(3_500)


def test_busy_time_near_zero_keeps_parallelism():
    """The thesis' q5 run divided by ~0 busy time and asked for 62 sink subtasks."""
    d = DS2(DS2Config(overprovisioning_factor=1.0)).decide(three_ops(sink_busy=0.0), NONE)
    assert d is not None and "sink" not in d.parallelism
    assert "busy time" in d.details["operators"]["sink"]["guard"]
    # below the floor (10 ms/s by default) counts as zero, too
    d = DS2(DS2Config(overprovisioning_factor=1.0)).decide(three_ops(sink_busy=5.0), NONE)
    assert d is not None and "sink" not in d.parallelism


def test_guarded_operator_still_passes_its_observed_ratio_downstream():
    snap = snapshot(TOPO, input_rate=8000.0)(
        src=op(1, rin=8000, busy=0, input_rate=8000.0),  # no busy time: src keeps 1
        map=op(2, rin=8000, rout=4000, busy=500),
        sink=op(1, rin=4000, busy=500),
    )
    d = DS2(DS2Config(overprovisioning_factor=1.0)).decide(snap, NONE)
    assert d is not None
    # map: 8,000 * (8,000/8,000 observed) / (4,000/0.5) -> 1; sink: 8,000 * 0.5 / 8,000 -> 1
    assert d.parallelism == {"map": 1}
    assert d.details["operators"]["sink"]["target_input"] == pytest.approx(4000)


def test_external_rate_falls_back_to_the_job_input_split_over_sources():
    topo = topology_from_ops(
        "t",
        [
            OperatorSpec("a", topic="auctions"),
            OperatorSpec("p", topic="persons"),
            OperatorSpec("join", upstream=("a", "p")),
        ],
    )
    # sources read 1,000 and 3,000 rec/s: the job's 8,000 rec/s splits 2,000 / 6,000
    snap = snapshot(topo, input_rate=8000.0)(
        a=op(1, rin=1000, busy=500), p=op(1, rin=3000, busy=500), join=op(1, rin=4000, busy=1000)
    )
    d = DS2(DS2Config(overprovisioning_factor=1.0)).decide(snap, NONE)
    assert d is not None
    assert d.details["external_rates"] == pytest.approx({"a": 2000, "p": 6000})
    # a: 2,000 / 2,000 -> 1; p: 6,000 / 6,000 -> 1; join: (2,000 + 6,000) / 4,000 -> 2
    assert d.parallelism == {"join": 2}


def test_per_topic_rate_wins_over_the_split():
    topo = topology_from_ops("t", [OperatorSpec("a", topic="auctions"), OperatorSpec("p", topic="persons")])
    snap = snapshot(topo, input_rate=9000.0)(
        a=op(1, rin=1000, busy=500, input_rate=1000.0), p=op(1, rin=1000, busy=500)
    )
    d = DS2(DS2Config(overprovisioning_factor=1.0)).decide(snap, NONE)
    assert d is not None and d.details["external_rates"] == pytest.approx({"a": 1000, "p": 8000})
    assert d.parallelism == {"p": 4}  # 8,000 / 2,000


def test_matching_configuration_is_no_decision():
    snap = snapshot(TOPO, input_rate=8000.0)(
        src=op(2, rin=4000, busy=500, input_rate=8000.0),  # 8,000 / 4,000 -> 2
        map=op(4, rin=4000, rout=1000, busy=500),  # 8,000 / 2,000 -> 4
        sink=op(1, rin=1000, busy=200),  # 2,000 / 5,000 -> 1
    )
    assert DS2(DS2Config(overprovisioning_factor=1.0)).decide(snap, NONE) is None
    d = DS2().decide(snap, NONE)
    assert d is not None and d.parallelism == {"src": 3, "map": 5, "sink": 2}
