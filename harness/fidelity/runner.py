"""The runs of a fidelity check: every cell of a matrix once (or more) on `local` and N times on `sim`.

A fidelity file is an ordinary matrix file; its `repetitions` are ignored in favour of `--reps`
(sim) and `--local-reps`. The sim repetitions keep the experiment's seed, so the pattern and the
arrivals are the local run's, and vary only `sim.noise_seed` (the readings' noise, and with several
calibrated cold starts which one the run's task managers warm up like): the sim answers "the same
experiment", its spread is the measurement model's. Run records land in
`<results>/<name>/local/<cell>-r<k>` and `<results>/<name>/sim/<cell>-r<k>`; complete ones are
skipped (resumable) if their record has the run's configuration hash (`harness.identity`: for a sim
run that includes the calibrated profile), as in `bench matrix`: a record made with another
configuration is stale and is never counted or silently replaced. Local cells run one at a time,
each under the machine-wide lock if given.
"""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.config import Cell, Experiment, Matrix, matrix_cells
from harness.matrix import CellPlan, CellState, classify


@dataclass(frozen=True)
class FidelityRun:
    cell_id: str
    backend: str  # local | sim
    repetition: int
    experiment: Experiment
    run_dir: Path

    @property
    def run_id(self) -> str:
        return f"{self.backend}/{self.cell_id}-r{self.repetition}"

    def plan(self) -> CellPlan:
        """What its record says: done, to do, failed, interrupted, or stale (another configuration)."""
        return classify(Cell(cell_id=f"{self.backend}/{self.cell_id}", repetition=self.repetition,
                             experiment=self.experiment),
                        self.run_dir)


def stale_runs(runs: list[FidelityRun]) -> list[CellPlan]:
    """The runs whose record was made with another configuration (fields named, old -> new)."""
    return [p for p in (r.plan() for r in runs) if p.state == CellState.STALE]


def fidelity_runs(matrix: Matrix, source: str, results: Path, reps: int, local_reps: int,
                  local_results: Path | None = None) -> list[FidelityRun]:
    """The runs of `matrix`; local records under `local_results` (an archive, `harness.fidelity.archive`) if
    given, else beside the sim's under `results`."""
    single = matrix.model_copy(update={"repetitions": 1, "seeds": None})
    cells: list[Cell] = matrix_cells(single, source)
    out: list[FidelityRun] = []
    root = results / matrix.name
    local_root = (local_results or results) / matrix.name
    for cell in cells:
        base = cell.experiment
        for r in range(local_reps):
            exp = base.model_copy(update={"backend": "local"})
            out.append(FidelityRun(cell.cell_id, "local", r, exp, local_root / "local" / f"{cell.cell_id}-r{r}"))
        for r in range(reps):
            sim_cfg = base.sim.model_copy(update={"noise_seed": r + 1})
            exp = base.model_copy(update={"backend": "sim", "sim": sim_cfg})
            out.append(FidelityRun(cell.cell_id, "sim", r, exp, root / "sim" / f"{cell.cell_id}-r{r}"))
    return out


@contextlib.contextmanager
def machine_lock(path: Path | None) -> Iterator[None]:
    """flock(2) on `path` for one local run (the shared machine's rule), or nothing."""
    if path is None:
        yield
        return
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def run_all(runs: list[FidelityRun], lock: Path | None, on_done: Callable[[FidelityRun, str], None],
            on_progress: Callable[[FidelityRun, float, float], None] | None = None) -> None:
    """Sim runs first (a second or two each), then the local runs one at a time. A run done with the same
    configuration is skipped; everything else runs (the caller decides about stale records first)."""
    from harness.runner import run_experiment

    for r in sorted(runs, key=lambda r: r.backend != "sim"):
        if r.plan().state == CellState.DONE:
            on_done(r, "skipped")
            continue
        progress = (lambda t, total, r=r: on_progress(r, t, total)) if on_progress else None
        with machine_lock(lock if r.backend == "local" else None):
            path = run_experiment(r.experiment, r.run_dir, on_progress=progress)
        on_done(r, (path / "status").read_text().strip())
