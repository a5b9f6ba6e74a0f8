"""Every registered autoscaler whose module exists builds with its defaults and copes with a quiet job."""

from __future__ import annotations

from importlib.util import find_spec

import pytest

import autoscalers
from autoscalers.base import History
from harness.topology import load_topology
from tests.builders import op, snapshot

WRITTEN = [n for n, target in autoscalers.REGISTRY.items() if find_spec(target.split(":")[0]) is not None]


def quiet(query: str):
    topo = load_topology(query)
    ops = {
        name: op(1, rin=100.0, busy=50.0, cpu=0.1, input_rate=100.0 if s.is_source else None)
        for name, s in ((o.name, o) for o in topo.operators)
    }
    return snapshot(topo, t=60.0, input_rate=100.0 * len(topo.sources), throughput=100.0 * len(topo.sources))(**ops)


def test_the_thesis_autoscalers_are_registered_and_written():
    assert {"hpa-cpu", "hpa-varga", "dhalion", "ds2"} <= set(WRITTEN)


@pytest.mark.parametrize("name", WRITTEN)
@pytest.mark.parametrize("query", ["q1", "q3"])
def test_default_config_decides_on_a_quiet_snapshot(name, query):
    scaler = autoscalers.create(name)
    assert scaler.name == name
    decision = scaler.decide(quiet(query), History())
    if decision is not None:
        assert all(p >= 1 for p in decision.parallelism.values())
        assert decision.reason
