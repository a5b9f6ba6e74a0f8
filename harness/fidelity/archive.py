"""Keep a fidelity check's local run records where they outlive the machine: compact, without machine paths.

A local cell costs about ten minutes of a quiet host; its record is what every later rebuild of the report
(`--sim-only` after a model change) compares against. `results/` is per machine, so an archive copies each
complete local record's data (run.yaml, status, the time series, events and Prometheus series; not the raw TSDB
snapshot or the log) into `<archive>/<matrix>/local/<cell>-r<k>/`, the layout `--local-results` reads. The
stack's working directory, which run.yaml names in its Flink settings and paths, becomes `WORKDIR_MARK`: the
configuration the record's hash covers is untouched, so the archived run still counts as its cell.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from harness import yamlio
from harness.fidelity.runner import FidelityRun
from harness.matrix import CellState

KEPT_FILES = ("run.yaml", "status", "timeseries.parquet", "events.parquet", "prometheus-series.parquet")
WORKDIR_MARK = "<workdir>"  # stands for the machine's stack directory in an archived run.yaml


def archived_dir(run: FidelityRun, archive: Path) -> Path:
    """Where `run`'s record goes in the archive: the same <matrix>/<backend>/<cell>-r<k> as under results."""
    return archive / run.run_dir.parent.parent.name / run.backend / run.run_dir.name


def archive_local(runs: Sequence[FidelityRun], archive: Path) -> list[Path]:
    """Copy every complete local record of `runs` into `archive`; an already archived one is replaced (a re-run
    of a stale cell must not leave its old record behind). Returns the archived directories."""
    out = []
    for run in runs:
        if run.backend != "local" or run.plan().state != CellState.DONE:
            continue
        dest = archived_dir(run, archive)
        if dest.resolve() == run.run_dir.resolve():
            out.append(dest)  # reading and writing the archive itself: nothing to copy
            continue
        tmp = dest.with_name(dest.name + ".partial")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for name in KEPT_FILES:
            src = run.run_dir / name
            if src.exists():
                shutil.copy2(src, tmp / name)
        _scrub_workdir(tmp / "run.yaml")
        shutil.rmtree(dest, ignore_errors=True)
        tmp.rename(dest)
        out.append(dest)
    return out


def _scrub_workdir(run_yaml: Path) -> None:
    """Replace the stack's absolute working directory in run.yaml by `WORKDIR_MARK`."""
    text = run_yaml.read_text()
    meta = yamlio.load(text)
    workdir = (meta.get("backend") or {}).get("workdir") if isinstance(meta, dict) else None
    if workdir and str(workdir).startswith("/"):
        run_yaml.write_text(text.replace(str(workdir), WORKDIR_MARK))
