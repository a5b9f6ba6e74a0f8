"""Vertical scaling with bursty arrivals on the real stack, through the runner and the MAPE loop.

q1 at a small mean rate with MMPP (map) arrivals; a tiny scripted autoscaler lowers the map's Metric.CPU
share once the snapshot carries an inter-arrival sample. Checks: the map's task manager's cgroup
quota changed (read from the cgroup files), the run record's `action` event has
cpu_share_before/after, the timeseries has `cpu_share` per operator, and the generator's timestamps
gave a non-empty `interarrival_s`. Port offset 4000; work directory `$BENCH_IT_VERTICAL_WORKDIR` or
/tmp/bench-vertical-it (installs are shared through the install cache).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest

import autoscalers
from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from harness.config import Experiment
from harness.metrics.snapshot import MetricsSnapshot
from harness.record import read_run_record
from harness.vocabulary import Metric
from tests.stacks import purged_after_module

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_IT_VERTICAL_WORKDIR", "/tmp/bench-vertical-it"))
PORT_OFFSET = int(os.environ.get("BENCH_TEST_PORT_OFFSET", "4000"))
_purge_stack_dir = purged_after_module(WORKDIR, PORT_OFFSET)  # the test cleans its own stack directory

LOWER_TO = 0.4  # the map's CPU share: 0.4 of the stack's task-manager quota (MEAD's lowest level)


class LowerShareConfig(AutoscalerConfig):
    """No parameters."""


class LowerShare(Autoscaler):
    """Lowers the map's CPU share once an inter-arrival sample arrived; remembers the samples' sizes."""

    name = "test-lower-share"
    Config = LowerShareConfig
    samples: ClassVar[list[int]] = []

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        ia = snapshot.interarrival_s
        LowerShare.samples.append(0 if ia is None else len(ia))
        if ia is None or len(ia) == 0 or history.actions:
            return None
        assert np.all(ia >= 0)
        return ScalingDecision(cpu_share={"map": LOWER_TO}, reason="scripted: lower the map's CPU share")


def _quota_files(backend, tm: str) -> str:
    """The task manager's raw cgroup CPU quota (v1 `cpu.cfs_quota_us` or v2 `cpu.max`)."""
    path = backend.stack.cgroups.group(tm).path
    for name in ("cpu.cfs_quota_us", "cpu.max"):
        if (path / name).exists():
            return (path / name).read_text().strip()
    raise AssertionError(f"no CPU quota file under {path}")


def test_mead_style_cpu_share_change_on_the_real_stack(tmp_path: Path, monkeypatch) -> None:
    from harness.backends.local.backend import LocalBackend
    from harness.runner import run_experiment

    seen: dict[str, dict[str, str]] = {}

    class Probe(LocalBackend):
        def rescale(self, parallelism, cpu_share):  # noqa: ANN001, ANN202 - reads the cgroups around it
            hosts = self.rescaler.busy_taskmanagers(self.state)["map"]
            seen["before"] = {tm: _quota_files(self, tm) for tm in hosts}
            result = super().rescale(parallelism, cpu_share)
            seen["after"] = {tm: _quota_files(self, tm) for tm in hosts}
            return result

    monkeypatch.setitem(autoscalers.REGISTRY, LowerShare.name,
                        autoscalers.Entry(f"{__name__}:LowerShareConfig", f"{__name__}:LowerShare"))
    LowerShare.samples.clear()
    exp = Experiment.model_validate({
        "name": "it-vertical", "backend": "local", "query": "q1", "duration_s": 100,
        "pattern": {"name": "constant", "params": {"rate": 800, "duration_min": 10},
                    "arrivals": {"kind": "map", "burst_factor": 4, "mean_burst_s": 4, "mean_quiet_s": 12}},
        "autoscaler": {"name": LowerShare.name},
        "loop": {"period_s": 15, "metrics_window_s": 15, "cooldown_s": 0},
        "local": {"workdir": str(WORKDIR), "port_offset": PORT_OFFSET, "cpu_cgroups": "required"},
    })
    backend = Probe()
    run_dir = tmp_path / "run"
    try:
        run_experiment(exp, run_dir, backend=backend)
    finally:
        backend.stop()
    rec = read_run_record(run_dir)
    assert rec.status.startswith("completed"), rec.events[rec.events.kind == "fault"].to_dict("records")

    # the generator played a 100 ms MMPP schedule and its timestamps reached the snapshots
    schedule = (WORKDIR / "generator" / "generator-schedule.txt").read_text().split()
    assert len(schedule) == 10 * 600
    assert max(LowerShare.samples) > 0

    # the map's task manager quota went from the default to the lowered share, in the cgroup files
    assert seen["after"], "the map had no task manager"
    for tm, raw in seen["after"].items():
        quota = int(raw.split()[0])
        assert quota == round(LOWER_TO * exp.local.taskmanager_cpu_quota * 100_000), raw
        assert seen["before"][tm] != raw

    actions = rec.events[rec.events.kind == "action"]
    assert len(actions) == 1
    data = json.loads(actions.iloc[0]["data"])
    assert data["cpu_share_after"]["map"] == pytest.approx(LOWER_TO)
    assert data["cpu_share_before"]["map"] == pytest.approx(1.0)
    assert data["before"] == data["after"]  # vertical only

    share = rec.timeseries[rec.timeseries.metric == Metric.CPU_SHARE]
    assert set(share.operator) == {"bids_source", "map", "sink"}
    last = share.sort_values("ts").groupby("operator").value.last()
    assert last["map"] == pytest.approx(LOWER_TO) and last["sink"] == pytest.approx(1.0)
