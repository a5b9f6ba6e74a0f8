"""The sim's fog nodes (Gesscale sec. V-A): node choice, ND_max and the capacity it costs, end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.backends.sim.network import NetworkConfig, Placement
from harness.config import LoopConfig, ScaleManagerConfig
from harness.mape import MapeLoop
from harness.metrics.snapshot import MetricsSnapshot
from harness.record import EventLog
from harness.scaling import ScaleManager
from harness.topology import OperatorSpec, topology_from_ops
from harness.vocabulary import EventKind, Metric, NodeChoice
from tests.sim.conftest import constant
from workloads.arrivals import ArrivalConfig

ONE = topology_from_ops("one", [OperatorSpec(name="worker", topic="bids", capacity=1000.0, selectivity=0.0)])


def net(delays=(0.0, 10.0, 50.0, 100.0), loss=0.0, slots=1) -> NetworkConfig:
    return NetworkConfig(node_delays_ms=delays, mst_loss_per_ms=loss, slots_per_node=slots)


def test_nd_max_is_the_largest_round_trip_among_the_nodes_used():
    cfg = net()
    assert cfg.nd_max([2]) == 0.0  # one node: nothing crosses the network
    assert cfg.nd_max([0, 2, 2]) == 50.0  # RTT(i, j) = d_i + d_j
    assert cfg.nd_max([0, 1, 3]) == 110.0


def test_latency_aware_choice_adds_the_nearest_node_and_removes_the_farthest():
    p = Placement(net(), {"worker": 1}, np.random.default_rng(0))
    assert p.nodes["worker"] == [0]  # the initial deployment is nearest-first for everyone
    p.apply({"worker": 3}, NodeChoice.NEAREST)
    assert p.nodes["worker"] == [0, 1, 2] and p.nd_max("worker") == 60.0
    p.apply({"worker": 2}, NodeChoice.NEAREST)
    assert sorted(p.nodes["worker"]) == [0, 1] and p.nd_max("worker") == 10.0


def test_latency_unaware_choice_picks_free_nodes_at_random():
    draws = []
    for seed in range(200):
        p = Placement(net(), {"worker": 1}, np.random.default_rng(seed))
        p.apply({"worker": 2}, NodeChoice.ANY)
        draws.append(p.nodes["worker"][1])
    assert set(draws) == {1, 2, 3}  # never the taken node 0, each free one sometimes
    assert all(25 < draws.count(k) < 110 for k in (1, 2, 3))
    # seeded: the same seed makes the same choices
    a, b = (Placement(net(), {"worker": 1}, np.random.default_rng(7)) for _ in range(2))
    for p in (a, b):
        p.apply({"worker": 4}, NodeChoice.ANY)
        p.apply({"worker": 2}, NodeChoice.ANY)
    assert a.nodes == b.nodes


def test_a_full_pool_puts_extra_subtasks_on_the_least_loaded_node():
    p = Placement(net(delays=(0.0, 20.0), slots=2), {"worker": 4}, np.random.default_rng(0))
    assert sorted(p.nodes["worker"]) == [0, 0, 1, 1]
    p.apply({"worker": 5}, NodeChoice.NEAREST)
    assert len(p.nodes["worker"]) == 5 and p.used() in ([3, 2], [2, 3])


def start(network: NetworkConfig | None, rate: float, parallelism: int) -> SimBackend:
    b = SimBackend()
    b.start_with(ONE, constant(rate, 900), SimConfig(network=network, rescale_downtime_s=10.0), parallelism,
                 seed=1, arrivals=ArrivalConfig(kind="deterministic"))
    return b


def test_the_network_takes_gamma_nd_max_off_the_operators_capacity():
    # 3 replicas on nodes 0, 100, 200 ms: ND_max 300 ms; gamma/alpha 0.004 per ms = 1.2 replicas lost
    b = start(net(delays=(0.0, 100.0, 200.0), loss=0.004), 2500.0, 3)
    b.advance_to(120)
    snap = b.snapshot(15)
    worker = snap.op("worker")
    assert worker.network_delay_max_ms == 300.0
    assert snap.throughput == pytest.approx(3 * 1000 - 1.2 * 1000, rel=1e-6)  # MST = alpha n - gamma ND_max
    assert worker.busy_ms_per_s == pytest.approx(1000.0, rel=1e-6)  # saturated, as the papers' CPU showed
    assert snap.kafka_lag_rate == pytest.approx(700.0, rel=0.01)
    # the latency-aware scale-down frees the farthest node: ND_max 100 ms, MST 2000 - 400
    b.choose_nodes(NodeChoice.NEAREST)
    result = b.rescale({"worker": 2}, None)
    assert result.method == "sim:in_place:nearest" and result.downtime_s == 10.0
    b.advance_to(200)
    snap = b.snapshot(15)
    assert snap.op("worker").network_delay_max_ms == 100.0
    assert snap.throughput == pytest.approx(1600.0, rel=1e-6)
    assert b.facts()["nodes"] == {"worker": [0, 1]}
    ts = b.timeseries().to_pandas()
    nd = ts[(ts.metric == Metric.NETWORK_DELAY_MAX) & (ts.operator == "worker")].sort_values("ts")
    assert nd["value"].iloc[0] == 300.0 and nd["value"].iloc[-1] == 100.0


def test_the_network_loss_multiplies_the_cost_models_capacity_at_the_task_managers_cpu():
    # 2-CPU task managers: the cost model gives 2000 records/s per subtask (first guess: 1000 at 1 CPU);
    # ND_max 300 ms at gamma/alpha 0.004 per ms costs 1.2 of the 3 subtasks' worth: 3 x 2000 x (1 - 1.2 / 3)
    b = SimBackend()
    b.start_with(ONE, constant(5000.0, 900), SimConfig(network=net(delays=(0.0, 100.0, 200.0), loss=0.004),
                                                       taskmanager_cpu=2.0), 3,
                 seed=1, arrivals=ArrivalConfig(kind="deterministic"))
    b.advance_to(120)
    snap = b.snapshot(15)
    assert b.facts()["costs"]["capacity_per_subtask"] == {"worker": 2000.0}  # the cost model's, before the loss
    assert snap.throughput == pytest.approx(3 * 2000 * 0.6, rel=1e-6)
    assert snap.op("worker").busy_ms_per_s == pytest.approx(1000.0, rel=1e-6)


@pytest.mark.parametrize(("burns_cpu", "cpu"), [(True, 1.0), (False, 0.03 + 0.97 * 0.6)])
def test_the_network_loss_reads_as_cpu_time_or_as_waiting_that_burns_none(burns_cpu, cpu):
    # ND_max 300 ms costs 1.2 of 3 subtasks (as above): the operator is at its MST either way (busy 1000);
    # waiting on the delayed links burns no CPU, so the CPU gauge shows the cost model's work only:
    # idle 0.03 + (1.0 - 0.03) x the 0.6 of the capacity the network leaves (Gesscale sec. IV-C: "low CPU
    # utilization is a poor predictor")
    cfg = NetworkConfig(node_delays_ms=(0.0, 100.0, 200.0), mst_loss_per_ms=0.004, loss_burns_cpu=burns_cpu)
    b = SimBackend()
    b.start_with(ONE, constant(2500.0, 900), SimConfig(network=cfg, rescale_downtime_s=10.0, readings="exact"), 3,
                 seed=1, arrivals=ArrivalConfig(kind="deterministic"))
    b.advance_to(120)
    snap = b.snapshot(15)
    assert snap.throughput == pytest.approx(1800.0, rel=1e-6)
    assert snap.op("worker").busy_ms_per_s == pytest.approx(1000.0, rel=1e-6)
    assert snap.op("worker").cpu_load == pytest.approx(cpu, rel=1e-6)
    ts = b.timeseries().to_pandas()
    recorded = ts[(ts.metric == Metric.CPU) & (ts.operator == "worker")].sort_values("ts")["value"]
    assert recorded.iloc[-1] == pytest.approx(cpu, rel=1e-6)


@pytest.mark.parametrize(("method", "override", "expected"),
                         [("in_place", None, 6.0), ("savepoint", None, 12.0), ("savepoint", 120.0, 120.0)])
def test_rescale_downtime_is_the_methods_model_unless_the_experiment_states_one(method, override, expected):
    # ONE has no calibrated profile: the first guess' per-method downtimes (in place 6 s, savepoint 12 s)
    b = SimBackend()
    b.start_with(ONE, constant(1000.0, 900), SimConfig(network=net(), rescale_downtime_s=override), 2,
                 seed=1, method=method, arrivals=ArrivalConfig(kind="deterministic"))
    b.advance_to(60)
    b.choose_nodes(NodeChoice.NEAREST)
    result = b.rescale({"worker": 3}, None)
    assert result.downtime_s == pytest.approx(expected)
    assert result.method == f"sim:{method}:nearest"
    assert b.now() == pytest.approx(60 + expected)  # the call blocks for the downtime, as on local
    assert b.facts()["rescales"][-1]["node_choice"] == "nearest"


def test_far_apart_nodes_keep_a_floor_of_capacity():
    b = start(net(delays=(0.0, 500.0), loss=0.01), 2500.0, 2)  # 5 replicas' worth lost out of 2
    b.advance_to(60)
    assert b.snapshot(15).throughput == pytest.approx(0.25 * 1000, rel=1e-6)


def test_without_a_network_model_nd_max_is_unknown_and_capacity_untouched():
    b = start(None, 2500.0, 3)
    b.advance_to(60)
    snap = b.snapshot(15)
    assert math.isnan(snap.op("worker").network_delay_max_ms)
    assert snap.throughput == pytest.approx(2500.0)
    assert Metric.NETWORK_DELAY_MAX not in set(b.timeseries()["metric"])
    assert "nodes" not in b.facts()


class GrowNearest(Autoscaler):
    """Asks for one more replica, latency-aware, every time."""

    name = "grow-nearest"
    Config = AutoscalerConfig

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        p = snapshot.op("worker").parallelism
        return ScalingDecision(parallelism={"worker": p + 1}, reason="grow", placement=NodeChoice.NEAREST)


def test_the_loop_hands_the_autoscalers_node_choice_to_the_backend():
    b = start(net(delays=(300.0, 0.0, 10.0, 40.0, 5.0)), 1000.0, 1)
    events = EventLog()
    loop = MapeLoop(b, GrowNearest(), ScaleManager(ScaleManagerConfig()),
                    LoopConfig(period_s=15, metrics_window_s=15, cooldown_s=0), events)
    loop.run(100.0)
    actions = events.of_kind(EventKind.ACTION)
    assert len(actions) >= 3
    assert {a["data"]["placement"] for a in actions} == {NodeChoice.NEAREST}
    # the first replica goes to the 0 ms node (1); each next one to the node that keeps ND_max lowest:
    # 4 (5 ms), 2 (10 ms), 3 (40 ms) - never node 0, 300 ms from everyone
    assert b.facts()["nodes"]["worker"][:4] == [1, 4, 2, 3]
