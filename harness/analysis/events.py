"""Metrics from a run's event log: scaling actions, convergence per stage, faults.

Event logs are tiny (a few hundred rows per run), so both engines share this
code; only the long-format timeseries needs Spark.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

import pandas as pd

from harness.analysis.meta import RunMeta
from harness.analysis.metrics import Stage, StageConvergence, amplitude, convergence
from harness.run_status import RunStatus
from harness.vocabulary import EventKind

# a run's events.parquet: a frame, or its rows as dicts (ts, kind, reason, data as JSON text)
Events: TypeAlias = pd.DataFrame | Sequence[Mapping[str, Any]]


@dataclass(frozen=True)
class EventFacts:
    action_ts: tuple[float, ...]
    changes: tuple[tuple[dict[str, float], dict[str, float]], ...]
    faults: int
    injected: int  # faults the experiment asked for (data.injected), and what the backend saw of them
    crashes: int
    failed_rescales: int
    recoveries: int
    phase_stages: tuple[Stage, ...]
    decisions_skipped: int = 0  # ticks the loop took no decision for want of a measured metric


def _rows(events: Events, kind: str) -> list[dict[str, Any]]:
    """The events of one kind, by time, with `data` parsed (a run has a few dozen: plain Python beats pandas)."""
    if events is None or len(events) == 0:
        return []
    records = events.to_dict("records") if isinstance(events, pd.DataFrame) else events
    out: list[dict[str, Any]] = []
    for r in records:
        if r["kind"] != kind:
            continue
        raw = r.get("data")
        try:
            data = json.loads(raw) if isinstance(raw, str) and raw else {}
        except json.JSONDecodeError:
            data = {}
        out.append({"ts": float(r["ts"]), "reason": str(r.get("reason") or ""),
                    "data": data if isinstance(data, dict) else {}})
    out.sort(key=lambda e: float(e["ts"]))  # stable, like the log's order for equal times
    return out


def _vector(data: dict[str, Any], par_key: str, cpu_key: str) -> dict[str, float]:
    """Configuration vector u: parallelism per operator, plus CPU share levels for vertical scaling."""
    vec = {str(k): float(v) for k, v in (data.get(par_key) or {}).items()}
    vec.update({f"cpu:{k}": float(v) for k, v in (data.get(cpu_key) or {}).items()})
    return vec


def phase_stages(events: Events, run_end: float) -> tuple[Stage, ...]:
    """Stages announced by `phase` events ("stage1 start", data {stage, start, end})."""
    found: list[tuple[str, float, float | None]] = []
    for row in _rows(events, EventKind.PHASE):
        data, reason = row["data"], row["reason"]
        name = data.get("stage")
        if name is None and reason.endswith(" start") and reason.startswith("stage"):
            name = reason.removesuffix(" start")
        if name is None:
            continue
        start = float(data.get("start", row["ts"]))
        end = data.get("end")
        found.append((str(name), start, float(end) if end is not None else None))
    found.sort(key=lambda s: s[1])
    stages = []
    for i, (name, start, end) in enumerate(found):
        if end is None:
            end = found[i + 1][1] if i + 1 < len(found) else run_end
        stages.append(Stage(name, start, end))
    return tuple(stages)


def event_facts(events: Events, run_end: float) -> EventFacts:
    actions = _rows(events, EventKind.ACTION)
    faults = _rows(events, EventKind.FAULT)
    return EventFacts(
        action_ts=tuple(a["ts"] for a in actions),
        changes=tuple(
            (_vector(a["data"], "before", "cpu_share_before"), _vector(a["data"], "after", "cpu_share_after"))
            for a in actions
        ),
        faults=len(faults),
        injected=sum(1 for f in faults if f["data"].get("injected")),
        crashes=sum(1 for f in faults if "crash" in f["reason"].lower() or f["data"].get("crash")),
        failed_rescales=sum(1 for f in faults if "rescale" in f["reason"].lower()),
        recoveries=len(_rows(events, EventKind.RECOVERY)),
        phase_stages=phase_stages(events, run_end),
        decisions_skipped=len(_rows(events, EventKind.DECISION_SKIPPED)),
    )


def stage_convergence(meta: RunMeta, facts: EventFacts) -> list[StageConvergence]:
    stages = facts.phase_stages or meta.stages
    return [convergence(s, facts.action_ts, meta.settle_s) for s in stages]


def event_metrics(meta: RunMeta, events: Events, run_end: float) -> tuple[dict[str, Any], list[StageConvergence]]:
    """Per-run columns derived from events, plus the per-stage convergence rows."""
    facts = event_facts(events, run_end)
    n_actions = len(facts.action_ts)
    out: dict[str, Any] = {
        "scale_count": n_actions,
        "decisions_skipped": facts.decisions_skipped,
        "faults": facts.faults,
        "injected_faults": facts.injected,
        "crashes": facts.crashes,
        "failed_rescales": facts.failed_rescales,
        "recoveries": facts.recoveries,
        "failed": meta.run_status == RunStatus.FAILED,
        "flagged": meta.run_status == RunStatus.FAILED or facts.faults > 0 or meta.yaml_faults > 0,
        # a crash: the run failed, or something broke that no one injected
        "crashed": meta.run_status == RunStatus.FAILED or facts.faults > facts.injected,
        "spec_reconfigurations": n_actions,
        "saso_reconfigurations": n_actions,
        "saso_amplitude": amplitude(facts.changes) if facts.changes else math.nan,
    }
    conv = stage_convergence(meta, facts)
    for c in conv:
        out[f"conv_{c.stage}_s"] = c.time_s
        out[f"conv_{c.stage}_actions"] = c.actions
        out[f"conv_{c.stage}_converged"] = c.converged
        out[f"conv_{c.stage}_length_s"] = c.end_s - c.start_s
    return out, conv
