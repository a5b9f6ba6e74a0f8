"""The seam between the MAPE loop and whatever runs the job.

A backend owns the clock: `sim` advances a model in fixed steps, `local` and
`k8s` sleep in wall time while the generator drives Kafka. The loop only ever
calls these methods, so every autoscaler meets every backend the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from harness.vocabulary import EventKind, Metric, NodeChoice

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from harness.config import Experiment
    from workloads.patterns import LoadPattern


@dataclass(frozen=True)
class RescaleResult:
    """What a backend did for one scaling action."""

    parallelism: dict[str, int]  # now in effect
    cpu_share: dict[str, float] = field(default_factory=dict)
    downtime_s: float = 0.0  # time the job could not process
    method: str = ""  # in_place | savepoint | reactive | sim
    ok: bool = True
    error: str = ""


@dataclass(frozen=True)
class BackendEvent:
    """Something the backend noticed on its own: a crash, a recovery, a phase change."""

    t: float
    kind: EventKind
    reason: str
    data: dict[str, Any] = field(default_factory=dict)


class Backend(Protocol):
    name: str

    def start(self, experiment: Experiment, pattern: LoadPattern, topology: Topology) -> None:
        """Bring the job up at the experiment's initial parallelism; t = 0 afterwards."""

    def now(self) -> float:
        """Seconds since the run started (simulated or wall time)."""

    def advance_to(self, t: float) -> None:
        """Let the system run until `t` (sim: step the model; real: sleep)."""

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        """Metrics averaged over the last `window_s` seconds."""

    def rescale(self, parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        """Apply a configuration and return what is now in effect."""

    def drain_events(self) -> list[BackendEvent]:
        """Events noticed since the last call (faults, recoveries, warnings)."""

    def timeseries(self) -> pa.Table | pd.DataFrame:
        """The run's series in the run record's long format (see harness.record): a pyarrow Table
        (`record.timeseries_table`; what `sim` returns, so a sim run never imports pandas) or a
        pandas DataFrame."""

    def save_artifacts(self, run_dir: Path) -> dict[str, Any]:
        """Write backend-specific artifacts (e.g. Prometheus snapshot); return facts for run.yaml."""

    def facts(self) -> dict[str, Any]:
        """Versions and settings to record in run.yaml."""

    def stop(self) -> None:
        """Stop everything this run started (idempotent)."""


@runtime_checkable
class PlacesReplicas(Protocol):
    """A backend whose nodes differ in network delay (the sim's network model): it honours the
    autoscaler's node choice for the next rescale. Backends without it have one kind of node."""

    def choose_nodes(self, choice: NodeChoice) -> None:
        """Use `choice` when the next `rescale` adds or removes subtasks."""


@runtime_checkable
class PureSnapshots(Protocol):
    """A backend whose `snapshot` may only read (the sim): the loop may then leave out one that no one would
    read. Not the local and k8s backends: each of their snapshots also samples the job's parallelism, task
    managers and CPU into the run's time series."""

    def snapshot_is_pure(self) -> bool:
        """Whether taking a snapshot now changes nothing the run records or draws."""


@runtime_checkable
class MeasuresOnDemand(Protocol):
    """A backend that can leave out readings no one reads (the sim's inter-arrival sample, about 7 % of a
    DS2 run's simulation time). Left out, a reading is absent from the snapshot and `why_missing` says so."""

    def measure_only(self, metrics: frozenset[Metric]) -> None:
        """The run's autoscaler reads only `metrics` (`Autoscaler.reads`); called before the first snapshot."""
