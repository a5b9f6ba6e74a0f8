"""What a running experiment is doing now: one small JSON file per run in progress.

The runner updates the file after every monitoring step (`LiveFile.update`), the `bench run` console
draws it as a live panel, and `bench status` in another shell reads the same file (`running`), so both
show the same numbers: input rate, throughput, task managers, both latencies and the last decision.
A file whose process is gone (a run killed with SIGKILL) is not shown and is removed when read.
Values that were not measured stay NaN here and are shown as "n/a", never as 0.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from harness.vocabulary import EventKind

if TYPE_CHECKING:
    from harness.config import Experiment
    from harness.metrics.snapshot import MetricsSnapshot
    from harness.record import EventLog

LIVE_DIR = "live"  # under the backend's work directory (`.bench/live/<pid>.json`)
_DECISION_KINDS = (EventKind.DECISION, EventKind.ACTION, EventKind.NOT_APPLIED, EventKind.DECISION_SKIPPED)


class LastDecision(BaseModel):
    """The newest decision-related event: what the autoscaler (or the loop) decided, and when."""

    t: float
    kind: str
    reason: str
    target: dict[str, int] | None = None


class LiveStatus(BaseModel):
    """One run in progress, as of its last monitoring step (rates in records/s, latencies in seconds)."""

    model_config = ConfigDict(ser_json_inf_nan="constants")  # NaN stays NaN in the file (Python's json reads it)

    pid: int
    run_dir: str
    experiment: str
    backend: str
    autoscaler: str
    query: str
    started_at: str
    updated_at: str
    phase: str = "starting"
    t: float = 0.0
    duration_s: float = 0.0
    input_rate: float = math.nan
    throughput: float = math.nan
    taskmanagers: int | None = None
    parallelism: dict[str, int] = {}
    latency_kafka_s: float = math.nan
    latency_e2e_s: float = math.nan
    latency_e2e_p95_s: float = math.nan
    decisions: int = 0
    last_decision: LastDecision | None = None
    not_measured: list[str] = []


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def last_decision(events: EventLog) -> LastDecision | None:
    """The newest decision, action, change refused by the scale manager, or skipped decision."""
    for row in reversed(events.rows):
        if row["kind"] in _DECISION_KINDS:
            data = row["data"]
            target = data.get("after") or data.get("target")
            return LastDecision(t=row["ts"], kind=str(row["kind"]), reason=row["reason"],
                                target=dict(target) if isinstance(target, dict) else None)
    return None


class LiveFile:
    """The live status of this process' run, rewritten atomically so a reader never sees half a file."""

    def __init__(self, directory: Path, status: LiveStatus) -> None:
        self.path = directory / LIVE_DIR / f"{status.pid}.json"
        self.status = status
        self._write()

    @classmethod
    def for_run(cls, directory: Path, experiment: Experiment, run_dir: Path) -> LiveFile:
        """The live file of this process' run of `experiment` (its record goes to `run_dir`)."""
        now = _now()
        return cls(directory, LiveStatus(
            pid=os.getpid(), run_dir=str(run_dir), experiment=experiment.name, backend=experiment.backend,
            autoscaler=experiment.autoscaler.name, query=experiment.query, started_at=now, updated_at=now))

    def update(self, snapshot: MetricsSnapshot | None = None, events: EventLog | None = None,
               phase: str | None = None, t: float | None = None, duration_s: float | None = None) -> LiveStatus:
        changes: dict[str, Any] = {"updated_at": _now()}
        if duration_s is not None:
            changes["duration_s"] = duration_s
        if phase is not None:
            changes["phase"] = phase
        if t is not None:
            changes["t"] = t
        if snapshot is not None:
            changes.update(
                t=snapshot.t, input_rate=snapshot.input_rate, throughput=snapshot.throughput,
                taskmanagers=snapshot.taskmanagers, parallelism=snapshot.parallelism,
                latency_kafka_s=snapshot.latency_s, latency_e2e_s=snapshot.latency_e2e_s,
                latency_e2e_p95_s=snapshot.latency_e2e_p95_s,
                not_measured=sorted(snapshot.why_missing),
            )
        if events is not None:
            changes["decisions"] = len(events.of_kind(EventKind.DECISION))
            changes["last_decision"] = last_decision(events)
        self.status = self.status.model_copy(update=changes)
        self._write()
        return self.status

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(self.status.model_dump_json())
        os.replace(tmp, self.path)

    def remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def running(directory: Path) -> list[LiveStatus]:
    """The runs in progress that write under `directory`; files of dead processes are removed."""
    out: list[LiveStatus] = []
    for path in sorted((directory / LIVE_DIR).glob("*.json")):
        try:
            status = LiveStatus.model_validate(json.loads(path.read_text()))
        except (OSError, ValueError, ValidationError):
            continue  # being replaced right now, or not ours: skip it this time
        if _alive(status.pid):
            out.append(status)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return out
