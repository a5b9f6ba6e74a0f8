"""The in-process engine: batches of runs analysed one after another in this process.

No start-up cost and no copies: the right engine below `engine.SPARK_MIN_RUNS` runs
(2,000, measured). Memory stays bounded: one batch of `BATCH_RUNS` runs'
samples is in memory at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness.analysis.assembly import RunRows, analyse, analyse_dirs
from harness.analysis.loader import RunRef
from harness.analysis.summary import AnalysisResult

# runs per batch: ~25 k samples each for a 140-minute run at 5 s, so ~3 M samples (~150 MB) at a time
BATCH_RUNS = 128


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def summarise(refs: Sequence[RunRef], progress: Callable[[int], Any] | None = None,
              batch_runs: int = BATCH_RUNS) -> AnalysisResult:
    """The per-run summary of every run in `refs`, `batch_runs` runs at a time."""
    rows = RunRows()
    for batch in _batches(refs, batch_runs):
        rows.extend(analyse(batch))
        if progress is not None:
            progress(len(batch))
    return rows.result()


def summarise_dirs(run_dirs: Sequence[Path], results_dir: Path, progress: Callable[[int], Any] | None = None,
                   batch_runs: int = BATCH_RUNS) -> AnalysisResult:
    """`summarise` of run directories, reading each batch's run.yaml and events only when it is its turn."""
    rows = RunRows()
    for batch in _batches(run_dirs, batch_runs):
        rows.extend(analyse_dirs(batch, results_dir))
        if progress is not None:
            progress(len(batch))
    return rows.result()
