"""A scripted backend for loop and runner tests (no model, no services)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from harness.backends.base import BackendEvent, RescaleResult
from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from tests.builders import op


class FakeBackend:
    name = "fake"

    def __init__(self, downtime_s: float = 2.0, fail_rescale: bool = False, crash_at: float | None = None) -> None:
        self.t = 0.0
        self.parallelism: dict[str, int] = {}
        self.share: dict[str, float] = {}
        self.rescales: list[dict[str, int]] = []
        self.snapshots_taken = 0
        self.downtime_s = downtime_s
        self.fail_rescale = fail_rescale
        self.crash_at = crash_at
        self.events: list[BackendEvent] = []
        self.stopped = False

    def start(self, experiment: Any, pattern: Any, topology: Topology) -> None:
        self.topology = topology
        self.parallelism = experiment.initial_parallelism_map()
        self.share = {k: 1.0 for k in self.parallelism}

    def now(self) -> float:
        return self.t

    def advance_to(self, t: float) -> None:
        if self.crash_at is not None and self.t < self.crash_at <= t:
            self.events.append(BackendEvent(self.crash_at, "fault", "taskmanager died", {"tm": "tm-1"}))
            self.events.append(BackendEvent(self.crash_at + 1, "recovery", "taskmanager restarted"))
        self.t = max(self.t, t)

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        self.snapshots_taken += 1
        ops = {n: op(p, rin=100.0 * p, cpu_share=self.share[n]) for n, p in self.parallelism.items()}
        return MetricsSnapshot(t=self.t, window_s=window_s, topology=self.topology, operators=ops,
                               taskmanagers=sum(self.parallelism.values()))

    def rescale(self, parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        if self.fail_rescale:
            return RescaleResult(parallelism=self.parallelism, ok=False, error="boom")
        self.rescales.append(dict(parallelism))
        self.parallelism = dict(parallelism)
        self.share = dict(cpu_share or self.share)
        self.t += self.downtime_s
        return RescaleResult(parallelism=dict(parallelism), cpu_share=self.share, downtime_s=self.downtime_s,
                             method="fake")

    def drain_events(self) -> list[BackendEvent]:
        out, self.events = self.events, []
        return out

    def timeseries(self) -> pd.DataFrame:
        ts = [i * 5.0 for i in range(int(self.t // 5) + 1)]
        rows = [{"ts": t, "metric": "taskmanagers", "operator": "", "subtask": -1, "value": 3.0} for t in ts]
        rows += [{"ts": t, "metric": "latency_kafka", "operator": "", "subtask": -1, "value": 1.0} for t in ts]
        return pd.DataFrame(rows)

    def save_artifacts(self, run_dir: Path) -> dict[str, Any]:
        (run_dir / "fake-artifact.txt").write_text("x")
        return {"fake": True}

    def facts(self) -> dict[str, Any]:
        return {"backend": "fake"}

    def stop(self) -> None:
        self.stopped = True
