"""Run every cell of a matrix, resumably, in a process pool sized to the machine.

A cell whose run record is complete is skipped, so a killed matrix picks up
where it stopped. `local` and `k8s` cells share one real stack and run one at
a time; `sim` cells run in parallel.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from harness.config import Cell, Experiment
from harness.record import is_complete


@dataclass(frozen=True)
class CellOutcome:
    run_id: str
    run_dir: Path
    status: str  # completed | skipped | failed: ...


def run_dir_for(results_dir: Path, matrix_name: str, cell: Cell) -> Path:
    return Path(results_dir) / matrix_name / cell.run_id


def _run_one(experiment_json: str, run_dir: str) -> str:
    """Process-pool entry point (plain arguments pickle cheaply)."""
    from harness.runner import run_experiment

    exp = Experiment.model_validate_json(experiment_json)
    path = run_experiment(exp, Path(run_dir))
    return (path / "status").read_text().strip()


def isolate(cell: Cell) -> Cell:
    """Cells that run at once must not share a k8s namespace (nor what is named after it)."""
    if cell.experiment.backend != "k8s":
        return cell
    from harness.backends.k8s.config import cell_namespace

    k8s = cell.experiment.k8s.model_copy(update={"namespace": cell_namespace(cell.experiment.k8s.namespace,
                                                                             cell.run_id)})
    return cell.model_copy(update={"experiment": cell.experiment.model_copy(update={"k8s": k8s})})


def default_workers(cells: list[Cell]) -> int:
    if any(c.experiment.backend != "sim" for c in cells):
        return 1
    return max(1, min(os.cpu_count() or 1, len(cells)))


def run_cells(
    cells: list[Cell],
    results_dir: Path,
    matrix_name: str,
    workers: int | None = None,
    on_done: Callable[[CellOutcome], None] | None = None,
) -> list[CellOutcome]:
    outcomes: list[CellOutcome] = []
    todo: list[tuple[Cell, Path]] = []
    for cell in cells:
        run_dir = run_dir_for(results_dir, matrix_name, cell)
        if is_complete(run_dir):
            outcome = CellOutcome(cell.run_id, run_dir, "skipped")
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
        else:
            todo.append((cell, run_dir))
    workers = workers or default_workers([c for c, _ in todo] or cells)
    if workers > 1:
        todo = [(isolate(cell), run_dir) for cell, run_dir in todo]
    if workers == 1:
        for cell, run_dir in todo:
            status = _run_one(cell.experiment.model_dump_json(), str(run_dir))
            outcome = CellOutcome(cell.run_id, run_dir, status)
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
        return outcomes
    with ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {
            pool.submit(_run_one, cell.experiment.model_dump_json(), str(run_dir)): (cell, run_dir)
            for cell, run_dir in todo
        }
        for fut in as_completed(futures):
            cell, run_dir = futures[fut]
            try:
                status = fut.result()
            except Exception as exc:  # the worker died before writing a record
                status = f"failed: {type(exc).__name__}: {exc}"
            outcome = CellOutcome(cell.run_id, run_dir, status)
            outcomes.append(outcome)
            if on_done:
                on_done(outcome)
    return outcomes
