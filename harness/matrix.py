"""Run the cells of a matrix, resumably, in a process pool sized to the machine.

Each run of a cell has one directory, `<results>/<matrix>/<cell>-r<rep>/`. Before anything runs,
every run is classified (`CellState`) from its record: done (completed with the cell's config
hash), failed, interrupted, stale (a record of another configuration) or to do. A plain rerun
runs what is to do or interrupted; stale records stop the command unless they are to be replaced;
failed runs are data and are rerun only on request. `local` and `k8s` cells share one real stack
and run one at a time; `sim` cells run in parallel. A first Ctrl-C stops scheduling and lets the
runs in flight finish or record themselves as interrupted (`harness.interrupts`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

import yaml

from harness import interrupts, yamlio
from harness.config import Cell, Experiment, _matches, get_path
from harness.identity import differing_fields, experiment_hash, model_inputs, recorded_hash, recorded_model
from harness.run_status import RunStatus

GRACE_S = 2.0  # after a first interrupt, in-flight sim runs may finish for this long ...
INTERRUPT_DEADLINE_S = 4.5  # ... and are marked interrupted (or stopped) within this


class CellState(StrEnum):
    DONE = "done"
    TODO = "to do"
    STALE = "stale"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class CellPlan:
    """One run of a matrix and what its record says about it."""

    cell: Cell
    run_dir: Path
    state: CellState
    why: str = ""
    differences: tuple[tuple[str, Any, Any], ...] = ()

    @property
    def run_id(self) -> str:
        return self.cell.run_id


@dataclass(frozen=True)
class CellOutcome:
    run_id: str
    run_dir: Path
    status: str  # completed | failed: ... | interrupted: ...

    @property
    def run_status(self) -> RunStatus:
        return RunStatus.parse(self.status)


@dataclass
class MatrixRun:
    outcomes: list[CellOutcome] = field(default_factory=list)
    interrupted: bool = False


def run_dir_for(results_dir: Path, matrix_name: str, cell: Cell) -> Path:
    return Path(results_dir) / matrix_name / cell.run_id


# ---------------------------------------------------------------- planning


def classify(cell: Cell, run_dir: Path) -> CellPlan:
    """The state of one run from its record (no record: to do)."""
    status_file = run_dir / "status"
    if not status_file.exists():
        return CellPlan(cell, run_dir, CellState.TODO)
    try:
        meta = yamlio.load((run_dir / "run.yaml").read_text())
        if not isinstance(meta, dict):
            raise ValueError("not a mapping")
        text = status_file.read_text()
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return CellPlan(cell, run_dir, CellState.STALE, f"unreadable record: {type(exc).__name__}")
    want = experiment_hash(cell.experiment)
    have = recorded_hash(meta)
    if have != want:
        config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
        new = cell.experiment.model_dump(mode="json")
        diffs = tuple(differing_fields(config, new, old_model=recorded_model(meta), new_model=model_inputs(new)))
        return CellPlan(cell, run_dir, CellState.STALE, f"config hash {have} != {want}", diffs)
    status = RunStatus.parse(text)
    state = {RunStatus.COMPLETED: CellState.DONE, RunStatus.FAILED: CellState.FAILED,
             RunStatus.INTERRUPTED: CellState.INTERRUPTED}[status]
    return CellPlan(cell, run_dir, state, text.strip() if state != CellState.DONE else "")


def plan_cells(cells: list[Cell], results_dir: Path, matrix_name: str) -> list[CellPlan]:
    return [classify(c, run_dir_for(results_dir, matrix_name, c)) for c in cells]


def parse_only(items: list[str]) -> list[tuple[str, Any]]:
    """`--only FIELD=VALUE` items -> (dotted field, YAML value); ValueError names the bad one."""
    out = []
    for item in items:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise ValueError(f"--only {item!r}: expected FIELD=VALUE, e.g. autoscaler=ds2 or loop.cooldown_s=60")
        key, value = item.split("=", 1)
        out.append((key.strip(), yamlio.load(value)))
    return out


def check_only_fields(cells: list[Cell], only: list[tuple[str, Any]]) -> None:
    """An `--only` field that names nothing in the experiment is an error, not an empty selection."""
    if not cells:
        return
    sample = cells[0].experiment.model_dump(mode="json")
    for key, _ in only:
        if get_path(sample, key) is None and not _known_path(sample, key):
            raise ValueError(f"--only {key}=...: no such field; top-level fields: {', '.join(sample)}")


def _known_path(d: dict[str, Any], path: str) -> bool:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return False
        cur = cur[part]
    return True


def select(plans: list[CellPlan], only: list[tuple[str, Any]]) -> list[CellPlan]:
    """Plans whose experiment matches every `--only` (dotted field = value; `autoscaler=ds2` matches by name)."""
    if not only:
        return plans
    out = []
    for p in plans:
        dump = p.cell.experiment.model_dump(mode="json")
        if all(_matches(get_path(dump, k), v) for k, v in only):
            out.append(p)
    return out


def runnable(plans: list[CellPlan], rerun_stale: bool = False, retry_failed: bool = False) -> list[CellPlan]:
    states = {CellState.TODO, CellState.INTERRUPTED}
    if rerun_stale:
        states.add(CellState.STALE)
    if retry_failed:
        states.add(CellState.FAILED)
    return [p for p in plans if p.state in states]


def describe_stale(plans: list[CellPlan], limit: int = 20) -> list[str]:
    """One line per stale run: its id and the fields that differ (old -> new)."""
    lines = []
    for p in [p for p in plans if p.state == CellState.STALE][:limit]:
        if p.differences:
            diffs = "; ".join(f"{k}: {_short(a)} -> {_short(b)}" for k, a, b in p.differences[:6])
            more = f" (+{len(p.differences) - 6} more)" if len(p.differences) > 6 else ""
            lines.append(f"  {p.run_id}: {diffs}{more}")
        else:
            lines.append(f"  {p.run_id}: {p.why}")
    extra = sum(p.state == CellState.STALE for p in plans) - limit
    if extra > 0:
        lines.append(f"  ... and {extra} more")
    return lines


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, str) else value
    return text if len(text) <= 60 else text[:57] + "..."


# ---------------------------------------------------------------- housekeeping


def clean_leftovers(matrix_dir: Path) -> list[Path]:
    """Remove temp/aside directories of record writers that are no longer running (a killed matrix)."""
    removed: list[Path] = []
    if not matrix_dir.is_dir():
        return removed
    for d in matrix_dir.iterdir():
        if not (d.name.startswith(".") and d.is_dir()):
            continue
        for marker in (".tmp-", ".old-"):
            if marker in d.name:
                pid = d.name.rsplit(marker, 1)[1]
                if pid.isdigit() and not _alive(int(pid)):
                    shutil.rmtree(d, ignore_errors=True)
                    removed.append(d)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class MatrixBusy(RuntimeError):
    """Another `bench matrix` writes into the same matrix directory."""


@contextlib.contextmanager
def matrix_lock(matrix_dir: Path) -> Iterator[None]:
    """One writer per matrix directory (the kernel drops the lock if the holder is killed)."""
    matrix_dir.mkdir(parents=True, exist_ok=True)
    with open(matrix_dir / ".lock", "w") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise MatrixBusy(f"another `bench matrix` is running on {matrix_dir}") from None
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


# ---------------------------------------------------------------- running


def _run_one(experiment_json: str, run_dir: str) -> str:
    """Run one experiment; returns its status line (process-pool entry point: plain arguments)."""
    from harness.runner import run_experiment

    exp = Experiment.model_validate_json(experiment_json)
    try:
        path = run_experiment(exp, Path(run_dir))
    except (interrupts.Interrupted, KeyboardInterrupt):
        status = Path(run_dir) / "status"
        return status.read_text().strip() if status.exists() else "interrupted"
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
    plans: list[CellPlan],
    workers: int | None = None,
    on_done: Callable[[CellOutcome], None] | None = None,
) -> MatrixRun:
    """Run the given plans; stops scheduling at the first interrupt (`MatrixRun.interrupted`)."""
    out = MatrixRun()
    cells = [p.cell for p in plans]
    workers = workers or default_workers(cells)
    if workers > 1:  # cells that run at once get their own k8s namespace
        plans = [dataclasses.replace(p, cell=isolate(p.cell)) for p in plans]

    def done(plan: CellPlan, status: str) -> None:
        outcome = CellOutcome(plan.run_id, plan.run_dir, status)
        out.outcomes.append(outcome)
        if on_done:
            on_done(outcome)

    if workers == 1 or len(plans) <= 1:
        for plan in plans:
            if interrupts.requested():
                out.interrupted = True
                break
            status = _run_one(plan.cell.experiment.model_dump_json(), str(plan.run_dir))
            done(plan, status)
            if RunStatus.parse(status) == RunStatus.INTERRUPTED:
                out.interrupted = True
                break
        out.interrupted = out.interrupted or interrupts.requested()
        return out
    _run_pool(plans, workers, done, out)
    return out


def _run_pool(plans: list[CellPlan], workers: int, done: Callable[[CellPlan, str], None], out: MatrixRun) -> None:
    """At most `workers` runs in flight (nothing queued that an interrupt could not cancel)."""
    queue = list(plans)
    import harness.runner  # noqa: F401 - loaded once here, inherited by the forked workers
    pool = ProcessPoolExecutor(max_workers=workers, initializer=interrupts.worker_init)
    in_flight: dict[Future[str], CellPlan] = {}
    try:
        while queue or in_flight:
            while queue and len(in_flight) < workers and not interrupts.requested():
                plan = queue.pop(0)
                in_flight[pool.submit(_run_one, plan.cell.experiment.model_dump_json(), str(plan.run_dir))] = plan
            if interrupts.requested():
                out.interrupted = True
                break
            finished, _ = wait(in_flight, timeout=0.1, return_when=FIRST_COMPLETED)
            for fut in finished:
                done(in_flight.pop(fut), _result(fut))
        if in_flight:
            _wind_down(pool, in_flight, done)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _result(fut: Future[str]) -> str:
    try:
        return fut.result()
    except Exception as exc:  # noqa: BLE001 - the worker died before writing a record: its status says why
        return f"failed: {type(exc).__name__}: {exc}"


def _wind_down(pool: ProcessPoolExecutor, in_flight: dict[Future[str], CellPlan],
               done: Callable[[CellPlan, str], None]) -> None:
    """Let runs in flight finish for GRACE_S, then SIGTERM them (they record `interrupted`), kill at the deadline."""
    t0 = time.monotonic()
    termed = False
    while in_flight:
        finished, _ = wait(in_flight, timeout=0.05, return_when=FIRST_COMPLETED)
        for fut in finished:
            done(in_flight.pop(fut), _result(fut))
        elapsed = time.monotonic() - t0
        if not termed and elapsed >= GRACE_S:
            _signal_workers(pool, signal.SIGTERM)
            termed = True
        if elapsed >= INTERRUPT_DEADLINE_S and in_flight:
            _signal_workers(pool, signal.SIGKILL)
            for fut, plan in list(in_flight.items()):
                done(plan, "interrupted: stopped before it could write its record")
                del in_flight[fut]


def _signal_workers(pool: ProcessPoolExecutor, sig: signal.Signals) -> None:
    for proc in list(getattr(pool, "_processes", {}).values()):
        with contextlib.suppress(ProcessLookupError, PermissionError, AttributeError, TypeError):
            os.kill(proc.pid, sig)
