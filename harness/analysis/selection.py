"""Which runs of a results folder a user means: `autoscaler=ds2,query=q11`, a matrix, a cell, a folder.

Shared by `bench runs` (filters) and `bench compare` (one selection per side). Reads only run.yaml
and the status file of each record (no timeseries), so listing a large folder stays quick.

A side is, in this order:
- a filter `FIELD=VALUE[,FIELD=VALUE...]` (all must hold; `params.NAME=VALUE` for an autoscaler
  parameter; values compare as YAML, so `params.overprovisioning_factor=1.2` matches 1.2;
  `status=flagged` selects completed runs with recorded faults, which `status=completed` also does);
- a folder holding run records (a matrix's or a cell's folder under the results);
- a matrix name, or a cell as `CELL_ID` or `MATRIX/CELL_ID`.
Anything else is an error naming what there is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness import yamlio
from harness.analysis.meta import RunMeta, parse_meta, read_status
from harness.record import find_run_dirs
from harness.run_status import RunStatus

# filterable fields: name -> how to read it from a run
FIELDS: dict[str, Callable[[RunMeta], Any]] = {
    "matrix": lambda m: m.matrix,
    "cell": lambda m: m.cell_id,
    "cell_id": lambda m: m.cell_id,
    "experiment": lambda m: m.experiment,
    "backend": lambda m: m.backend,
    "query": lambda m: m.query,
    "pattern": lambda m: m.pattern,
    "autoscaler": lambda m: m.autoscaler,
    "seed": lambda m: m.seed,
    "repetition": lambda m: m.repetition,
    "status": lambda m: m.status,
    "config_hash": lambda m: m.config_hash,
}


class SelectionError(ValueError):
    """A side or filter that names no runs or an unknown field (one line; the CLI exits 2)."""


@dataclass(frozen=True)
class Condition:
    field: str
    value: str

    def holds(self, meta: RunMeta) -> bool:
        if self.field == "status":  # `flagged` is a completed run with faults: both words select it
            return self.value in (meta.status, listed_status(meta))
        if self.field.startswith("params."):
            key = self.field.removeprefix("params.")
            return key in meta.params and _same(meta.params[key], self.value)
        return _same(FIELDS[self.field](meta), self.value)


def listed_status(meta: RunMeta) -> str:
    """completed / failed / interrupted, or `flagged`: completed, but faults were recorded (METRICS.md "Failures")."""
    if meta.status == RunStatus.COMPLETED and meta.yaml_faults > 0:
        return "flagged"
    return meta.status


def _same(actual: Any, wanted: str) -> bool:
    import yaml

    if str(actual) == wanted:
        return True
    try:
        parsed = yaml.safe_load(wanted)
    except yaml.YAMLError:
        return False
    return bool(parsed == actual) and not isinstance(parsed, str)


def is_filter(text: str) -> bool:
    return "=" in text


def parse_filter(text: str) -> list[Condition]:
    """`autoscaler=ds2,query=q11` -> conditions; unknown fields are an error listing the valid ones."""
    conditions = []
    for part in text.split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise SelectionError(f"{text!r}: {part!r} is not FIELD=VALUE")
        field, value = (s.strip() for s in part.split("=", 1))
        if field not in FIELDS and not (field.startswith("params.") and len(field) > len("params.")):
            raise SelectionError(f"{text!r}: unknown field {field!r}; valid: {', '.join(FIELDS)}, params.NAME")
        conditions.append(Condition(field, value))
    if not conditions:
        raise SelectionError(f"{text!r}: an empty filter")
    return conditions


def read_run_yaml(run_dir: Path) -> dict[str, Any]:
    """A record's run.yaml as a mapping, parsed with libyaml when it is there (10x the pure-Python parser:
    listing a folder reads every run.yaml)."""
    with (Path(run_dir) / "run.yaml").open() as fh:
        raw = yamlio.load(fh) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"run.yaml holds a {type(raw).__name__}, not a mapping")
    return raw


def read_metas(results_dir: Path, within: Path | None = None) -> tuple[list[RunMeta], list[tuple[Path, str]]]:
    """Every run record's metadata under `results_dir` (or only under its sub-folder `within`), and the
    records whose run.yaml cannot be read."""
    metas, unreadable = [], []
    for run_dir in find_run_dirs(Path(within) if within is not None else Path(results_dir)):
        try:
            metas.append(parse_meta(read_run_yaml(run_dir), run_dir, Path(results_dir), read_status(run_dir)))
        except Exception as exc:  # noqa: BLE001 - one garbled record must not hide the rest
            unreadable.append((run_dir, f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"))
    return metas, unreadable


def matching(metas: list[RunMeta], filters: list[str]) -> list[RunMeta]:
    """Runs for which every filter holds (each filter: comma-separated conditions, all of which hold)."""
    conditions = [c for f in filters for c in parse_filter(f)]
    return [m for m in metas if all(c.holds(m) for c in conditions)]


def select_side(spec: str, metas: list[RunMeta], results_dir: Path) -> list[RunMeta]:
    """The runs one `bench compare` side names (see the module docstring)."""
    if is_filter(spec):
        chosen = matching(metas, [spec])
        if not chosen:
            raise SelectionError(f"side {spec!r}: no run under {results_dir} matches")
        return chosen
    folder = Path(spec)
    if folder.is_dir():
        inside = folder.resolve()
        chosen = [m for m in metas if m.path.resolve() == inside or inside in m.path.resolve().parents]
        if not chosen:
            raise SelectionError(f"side {spec!r}: a folder, but it holds no run record under {results_dir} "
                                 "(--results names the results folder)")
        return chosen
    by_matrix = [m for m in metas if m.matrix == spec]
    if by_matrix:
        return by_matrix
    if "/" in spec:
        matrix, cell = spec.rsplit("/", 1)
        chosen = [m for m in metas if m.matrix == matrix and m.cell_id == cell]
    else:
        chosen = [m for m in metas if m.cell_id == spec]
    if chosen:
        cells = {(m.matrix, m.cell_id) for m in chosen}
        if len(cells) > 1:
            names = ", ".join(sorted(f"{a}/{b}" for a, b in cells))
            raise SelectionError(f"side {spec!r}: the cell id is in several matrices ({names}); write MATRIX/CELL")
        return chosen
    matrices = sorted({m.matrix for m in metas})
    known = sorted({f"{m.matrix}/{m.cell_id}" for m in metas})
    shown = ", ".join(known[:8]) + (f", ... ({len(known)} cells)" if len(known) > 8 else "")
    raise SelectionError(f"side {spec!r}: not a filter (FIELD=VALUE), a folder, a matrix or a cell under "
                         f"{results_dir}; matrices: {', '.join(matrices) or 'none'}; cells: {shown or 'none'}")


def side_folder(spec: str, results_dir: Path) -> Path | None:
    """The sub-folder of `results_dir` that holds every run a side can name, when the side says which:
    `bench matrix` writes a matrix's runs to RESULTS/MATRIX/, so a matrix or MATRIX/CELL side whose
    folder exists is looked up there (a folder side: in that folder). None: the whole results folder."""
    if is_filter(spec):
        return None
    root = Path(results_dir).resolve()
    folder = Path(spec)
    if folder.is_dir():
        inside = folder.resolve()
        return inside if root in inside.parents else None
    matrix = spec.rsplit("/", 1)[0] if "/" in spec else spec
    candidate = root / matrix
    return candidate if matrix and candidate.is_dir() and root in candidate.resolve().parents else None
