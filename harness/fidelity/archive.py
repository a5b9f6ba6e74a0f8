"""Keep a fidelity check's local run records where they outlive the machine: compact, without machine paths.

A local cell costs about ten minutes of a quiet host; its record is what every later rebuild of the report
(`--sim-only` after a model change) compares against. `results/` is per machine, so an archive copies each
complete local record's data (run.yaml, status, the time series, events and Prometheus series; not the raw TSDB
snapshot, which run.yaml's `artifacts` still names, nor the log) into `<archive>/<matrix>/local/<cell>-r<k>/`, the
layout `--local-results` reads. Every path under the stack's working directory becomes `WORKDIR_MARK` + the rest
of the path. The record's configuration hash is kept as written, so the archived run still counts as its cell;
a matrix that set `local.workdir` itself sees that field as `WORKDIR_MARK` in a stale run's field list.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness import yamlio
from harness.fidelity.runner import FidelityRun
from harness.matrix import CellState
from harness.record import install_dir

KEPT_FILES = ("run.yaml", "status", "timeseries.parquet", "events.parquet", "prometheus-series.parquet")
WORKDIR_MARK = "<workdir>"  # stands for the machine's stack directory in an archived run.yaml


class ArchiveError(RuntimeError):
    """An archived record would still name the machine's working directory."""


def archived_dir(run: FidelityRun, archive: Path) -> Path:
    """Where `run`'s record goes in the archive: the same <matrix>/<backend>/<cell>-r<k> as under results."""
    return archive / run.run_dir.parent.parent.name / run.backend / run.run_dir.name


def archive_local(runs: Sequence[FidelityRun], archive: Path) -> list[Path]:
    """Copy every complete local record of `runs` into `archive`, replacing one archived before (a re-run of a
    stale cell must not leave its old record behind). Each record is written beside its place under a hidden
    name and renamed in, the old one moved aside first: a kill leaves the old record or the new, never half of
    one. Returns the archived directories."""
    out = []
    for run in runs:
        if run.backend != "local" or run.plan().state != CellState.DONE:
            continue
        dest = archived_dir(run, archive)
        if dest.resolve() == run.run_dir.resolve():
            raise ArchiveError(f"{dest}: the record is the archive's own; --archive must name another directory")
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f".{dest.name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        try:
            for name in KEPT_FILES:
                src = run.run_dir / name
                if src.exists():
                    shutil.copy2(src, tmp / name)
            scrub_workdir(tmp / "run.yaml")
            install_dir(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        out.append(dest)
    return out


def scrub_workdir(run_yaml: Path) -> None:
    """Rewrite run.yaml with every path under the stack's working directory (`backend.workdir`) starting at
    `WORKDIR_MARK` instead: whole path segments only (`/tmp/b` is not a prefix of `/tmp/bench`), in any string
    of the record. ArchiveError if the directory is still named afterwards."""
    meta = yamlio.load(run_yaml.read_text())
    workdir = (meta.get("backend") or {}).get("workdir") if isinstance(meta, dict) else None
    if not workdir or not str(workdir).startswith("/"):
        return
    root = str(workdir).rstrip("/")
    pattern = re.compile(re.escape(root) + r"(?=/|$|[^\w.-])")
    clean = _replace_strings(meta, lambda s: pattern.sub(WORKDIR_MARK, s))
    text = yamlio.dump(clean, sort_keys=False) or ""
    if pattern.search(text):
        raise ArchiveError(f"{run_yaml}: still names {root} after scrubbing")
    run_yaml.write_text(text)


def _replace_strings(value: Any, fix: Any) -> Any:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, dict):
        return {(fix(k) if isinstance(k, str) else k): _replace_strings(v, fix) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_strings(v, fix) for v in value]
    return value
