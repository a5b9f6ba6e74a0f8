"""The registry: every autoscaler builds with its defaults, configs resolve without implementations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import autoscalers
from autoscalers.base import History
from harness.config import AutoscalerSpec, LoopConfig, SLOConfig
from harness.topology import load_topology
from tests.builders import op, snapshot

ROOT = Path(__file__).resolve().parents[2]
NAMES = autoscalers.available()


def quiet(query: str):
    topo = load_topology(query)
    ops = {
        name: op(1, rin=100.0, busy=50.0, cpu=0.1, input_rate=100.0 if s.is_source else None)
        for name, s in ((o.name, o) for o in topo.operators)
    }
    return snapshot(topo, t=60.0, input_rate=100.0 * len(topo.sources), throughput=100.0 * len(topo.sources))(**ops)


def test_the_thesis_autoscalers_are_registered():
    assert {"hpa-cpu", "hpa-varga", "dhalion", "ds2"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("query", ["q1", "q3"])
def test_default_config_decides_on_a_quiet_snapshot(name, query):
    scaler = autoscalers.create(name)
    assert scaler.name == name
    assert isinstance(scaler.config, autoscalers.config_class(name))
    decision = scaler.decide(quiet(query), History())
    if decision is not None:
        assert all(p >= 1 for p in decision.parallelism.values())
        assert decision.reason


def test_validating_every_experiment_imports_no_autoscaler_implementation():
    """`import harness.config` + validating experiments/ must not pay for scipy, statsmodels, networkx."""
    code = f"""
import json, sys
from pathlib import Path
import harness.config as hc
cells = 0
for path in sorted(Path({str(ROOT / 'experiments')!r}).glob('*.yaml')):
    cells += len(hc.load_any(path)[1])
heavy = sorted(m for m in sys.modules
               if m.split('.')[0] in ('scipy', 'statsmodels', 'networkx')
               or m in ('autoscalers.mead.maps', 'autoscalers.mead.mapph1', 'autoscalers.mpc.search',
                        'autoscalers.mpc.forecast', 'autoscalers.gesscale.scaler', 'autoscalers.flink_er.scaler'))
print(json.dumps({{"cells": cells, "heavy": heavy}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["cells"] > 20  # the experiments were really expanded and validated
    assert result["heavy"] == []


def test_an_autoscaler_that_fails_to_import_is_an_error_that_says_so(monkeypatch):
    monkeypatch.setitem(autoscalers.REGISTRY, "broken",
                        autoscalers.Entry("autoscalers.static:StaticConfig", "autoscalers.no_such_module:Broken"))
    assert "broken" in autoscalers.available()
    assert autoscalers.config_class("broken").__name__ == "StaticConfig"  # validation still works
    with pytest.raises(autoscalers.AutoscalerImportError, match="'broken'.*no_such_module"):
        autoscalers.create("broken")
    monkeypatch.setitem(autoscalers.REGISTRY, "broken",
                        autoscalers.Entry("autoscalers.no_such_config:C", "autoscalers.static:Static"))
    with pytest.raises(autoscalers.AutoscalerImportError, match="'broken'.*config"):
        AutoscalerSpec(name="broken")


def test_the_registry_names_every_implementation_with_its_own_name_and_config():
    """REGISTRY (names -> "module:Class" strings, read without importing) is the one list of autoscalers: each
    entry's implementation carries that name and that config, and every concrete autoscaler in the package
    is registered."""
    import importlib
    import inspect
    import pkgutil

    from autoscalers.base import Autoscaler
    from harness.listing import module_docstring

    for name in NAMES:
        cls = autoscalers.autoscaler_class(name)
        assert (cls.name, cls.Config) == (name, autoscalers.config_class(name)), name
        # `bench list --details` reads the reference from the source: the same docstring the module has
        assert module_docstring(cls.__module__) == sys.modules[cls.__module__].__doc__, name
    for info in pkgutil.walk_packages(autoscalers.__path__, "autoscalers."):
        importlib.import_module(info.name)

    def concrete(cls: type) -> list[type]:
        subs = [c for sub in cls.__subclasses__() for c in [sub, *concrete(sub)]]
        return [c for c in subs if c.__module__.startswith("autoscalers.") and not inspect.isabstract(c)]

    implemented = {c.name for c in concrete(Autoscaler) if "name" in vars(c)}
    assert implemented == set(NAMES)


def test_reading_a_docstring_from_source_needs_no_import(tmp_path, monkeypatch):
    from harness.listing import module_docstring

    source = '"""Paper (2024), sec. 3.\n\nMore."""\nraise RuntimeError("imported")\n'
    (tmp_path / "lean_probe_mod.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    assert module_docstring("lean_probe_mod") == "Paper (2024), sec. 3.\n\nMore."
    assert "lean_probe_mod" not in sys.modules


def test_an_unknown_name_lists_the_valid_ones():
    with pytest.raises(autoscalers.UnknownAutoscaler, match="unknown autoscaler 'dhalon'; valid choices: hpa-cpu"):
        autoscalers.create("dhalon")
    with pytest.raises(ValueError, match="unknown autoscaler 'dhalon'"):
        AutoscalerSpec(name="dhalon")


def test_run_context_defaults_are_the_experiment_defaults():
    ctx, slo, loop = autoscalers.RunContext(), SLOConfig(), LoopConfig()
    assert (ctx.slo_latency_s, ctx.slo_throughput_ratio) == (slo.latency_s, slo.throughput_ratio)
    assert (ctx.period_s, ctx.cooldown_s) == (loop.period_s, loop.cooldown_s)


def test_the_runner_hands_the_slo_and_loop_to_the_autoscaler():
    ctx = autoscalers.RunContext(slo_latency_s=0.5, period_s=60.0, cooldown_s=120.0)
    mead = autoscalers.create("mead", {"target": "p95"}, ctx)
    assert mead.context.slo_latency_s == 0.5
    with pytest.raises(ValueError, match="max_response_s"):  # one target: the SLO, not a MEAD parameter
        AutoscalerSpec(name="mead", params={"max_response_s": 1.0})
