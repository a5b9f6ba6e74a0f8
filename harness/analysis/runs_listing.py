"""`bench runs RESULTS`: what is in a results folder, one line per run record.

Reads run.yaml and the status file only. Status is one of completed / failed / interrupted /
flagged: `flagged` is a completed run during which a fault was recorded (a crash, a failed
rescale, an injected fault; METRICS.md "Failures") - kept and counted, but worth a look.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from harness.analysis.meta import parse_meta, read_status
from harness.analysis.selection import listed_status, parse_filter, read_run_yaml
from harness.record import find_run_dirs


class ListedStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"
    FLAGGED = "flagged"


@dataclass(frozen=True)
class RunLine:
    run_id: str  # the record's path under the results folder
    experiment: str
    matrix: str
    cell: str
    repetition: int
    seed: int
    backend: str
    status: ListedStatus
    why: str  # the status line's reason (failed / interrupted), else ""
    duration_s: float | None  # the run's planned length in run seconds
    wall_s: float | None  # how long it took (finished_at - started_at), None when not recorded
    config_hash: str
    faults: int  # fault events recorded during the run
    injected_faults: int  # of which scheduled by the experiment (`--fault`)

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["status"] = self.status.value
        return out


def _wall(raw: dict[str, Any]) -> float | None:
    try:
        start = dt.datetime.fromisoformat(str(raw["started_at"]))
        end = dt.datetime.fromisoformat(str(raw["finished_at"]))
    except (KeyError, ValueError, TypeError):
        return None
    return (end - start).total_seconds()


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def list_runs(results_dir: Path, filters: list[str] | None = None) -> tuple[list[RunLine], list[tuple[Path, str]]]:
    """Every run record under `results_dir` that every filter matches, and the unreadable ones (path, why)."""
    conditions = [c for f in filters or [] for c in parse_filter(f)]
    lines, unreadable = [], []
    for run_dir in find_run_dirs(Path(results_dir)):
        try:
            raw = read_run_yaml(run_dir)
            meta = parse_meta(raw, run_dir, Path(results_dir), read_status(run_dir))
        except Exception as exc:  # noqa: BLE001 - one garbled record is listed as such, the rest still are
            first = str(exc).splitlines()[0] if str(exc) else ""
            unreadable.append((run_dir, f"{type(exc).__name__}: {first}".rstrip(": ")))
            continue
        if not all(c.holds(meta) for c in conditions):
            continue
        faults = _int(raw.get("faults"))
        status = ListedStatus(listed_status(meta))
        if status == ListedStatus.COMPLETED and raw.get("flagged"):
            status = ListedStatus.FLAGGED
        lines.append(RunLine(
            run_id=meta.run_id, experiment=meta.experiment, matrix=meta.matrix, cell=meta.cell_id,
            repetition=meta.repetition, seed=meta.seed, backend=meta.backend, status=status, why=meta.status_reason,
            duration_s=meta.duration_s, wall_s=_wall(raw), config_hash=meta.config_hash, faults=faults,
            injected_faults=_int(raw.get("injected_faults")),
        ))
    return lines, unreadable
