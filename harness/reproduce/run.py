"""`bench reproduce PAPER`: run a seed paper's experiments, analyse them, score its claims.

The paper's experiment files (`catalogue.PAPERS`) are run as matrices - on the chosen backend,
resumably, under `<results>/reproduce-<backend>/<matrix>/` - the runs are summarised with the
pandas engine, and every claim is evaluated on the runs it names (`claims`). The claims table is
written as Markdown and CSV next to a per-cell table, with the command and the environment that
made them.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
import math
import platform
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from harness import yamlio
from harness.analysis import pandas_engine
from harness.analysis.aggregate import aggregate_cells
from harness.analysis.loader import RunRef, read_events
from harness.analysis.meta import load_meta
from harness.analysis.papers import JOB_METRICS
from harness.config import Cell, ConfigError, Matrix, matrix_cells, read_yaml, set_path, validate_model
from harness.matrix import (
    CellOutcome,
    CellState,
    clean_leftovers,
    describe_stale,
    matrix_lock,
    plan_cells,
    run_cells,
    run_dir_for,
    runnable,
)
from harness.reproduce.catalogue import PAPERS, Paper
from harness.reproduce.claims import Outcome, Verdict, evaluate, flat_config, outcomes_frame

REPO = Path(__file__).resolve().parents[2]

# per-cell columns shown in the report, per paper
CELL_COLUMNS: dict[str, list[str]] = {
    "gesscale": ["spec_reconfigurations", "spec_cost_replica_min", "spec_excess_time", "spec_accuracy_o",
                 "spec_accuracy_u", "spec_timeshare_o", "spec_timeshare_u", "tm_avg"],
    "mpc": ["saso_reconfigurations", "saso_qos_violations", "saso_control_steps", "saso_violations_in_rescale_steps",
            "saso_amplitude", "tm_avg", "alloc_cores_avg", "throughput_ratio"],
    "mead": ["mead_rt_mean", "mead_rt_p95", "mead_rt_target", "mead_target_met", "mead_cpu_share"],
    "flink-er": ["saso_qos_violation_pct", "mead_rt_mean", "mead_rt_p95", "spec_processed_in_trace", "lag_max",
                 "tm_avg", "scale_count"],
}


@dataclass(frozen=True)
class Options:
    backend: str = "sim"
    repetitions: int | None = None  # None: each file's own
    duration_s: float | None = None  # cut every run short (a quick look, not a reproduction)
    results: Path = Path("results")
    workers: int | None = None
    rerun_stale: bool = False  # replace records made with another configuration
    command: str = ""  # how the user called it, for the report


@dataclass
class Reproduction:
    paper: Paper
    outcomes: list[Outcome]
    runs: pd.DataFrame
    cells: pd.DataFrame
    failed: list[CellOutcome] = field(default_factory=list)
    interrupted: bool = False
    unrecorded: list[str] = field(default_factory=list)  # paper-scoring series no run recorded


class StaleRecords(ConfigError):
    """Records under the results directory were made with another configuration; nothing ran."""


def paper_or_error(key: str) -> Paper:
    if key not in PAPERS:
        raise ConfigError(f"unknown paper {key!r}; valid choices: {', '.join(PAPERS)}")
    return PAPERS[key]


def _resolve_paths(raw: dict[str, Any]) -> None:
    """A trace path relative to the repository works from any working directory."""
    params = (raw.get("pattern") or {}).get("params") if isinstance(raw.get("pattern"), dict) else None
    if isinstance(params, dict) and isinstance(params.get("path"), str):
        path = Path(params["path"])
        if not path.is_absolute() and not path.exists() and (REPO / path).exists():
            params["path"] = str(REPO / path)


def load_matrices(paper: Paper, options: Options,
                  adjust_base: Callable[[dict[str, Any]], None] | None = None) -> list[tuple[Matrix, list[Cell]]]:
    """The paper's matrices with the backend, repetitions and duration of `options`; all validated first."""
    out = []
    for rel in paper.experiments:
        path = REPO / rel
        raw = read_yaml(path)
        matrix: Matrix = validate_model(Matrix, raw, str(path))
        base = copy.deepcopy(matrix.base)
        set_path(base, "backend", options.backend)
        if options.duration_s is not None:
            set_path(base, "duration_s", options.duration_s)
        _resolve_paths(base)
        if adjust_base is not None:
            adjust_base(base)
        update: dict[str, Any] = {"base": base}
        if options.repetitions is not None:
            update["repetitions"] = options.repetitions
            update["seeds"] = None
        matrix = matrix.model_copy(update=update)
        cells = matrix_cells(matrix, str(path))
        if options.backend != "sim":
            _check_real_jobs(cells, str(path))
        out.append((matrix, cells))
    return out


def _check_real_jobs(cells: list[Cell], where: str) -> None:
    """A query the simulator knows but the Flink job does not (hotspot) cannot run on a real stack."""
    from harness.backends.local.jobjar import OPERATORS

    missing = sorted({c.experiment.query for c in cells} - set(OPERATORS))
    if missing:
        raise ConfigError(f"{where}: query {', '.join(missing)} has a simulator topology but no Flink job in "
                          f"queries/src; valid backend for it: sim")


def results_root(options: Options) -> Path:
    return Path(options.results) / f"reproduce-{options.backend}"


def run_paper(key: str, options: Options, adjust_base: Callable[[dict[str, Any]], None] | None = None,
              on_done: Callable[[CellOutcome], None] | None = None) -> Reproduction:
    """Run (or resume) the paper's experiments and evaluate its claims.

    Every run of every file is classified first (harness.matrix): records made with another
    configuration stop everything before it starts unless `options.rerun_stale`; failed runs are
    data and are kept.
    """
    paper = paper_or_error(key)
    matrices = load_matrices(paper, options, adjust_base)
    root = results_root(options)
    plans = {m.name: plan_cells(cells, root, m.name) for m, cells in matrices}
    stale = [p for ps in plans.values() for p in ps if p.state == CellState.STALE]
    if stale and not options.rerun_stale:
        lines = [f"{len(stale)} run(s) under {root} were made with another configuration (fields: old -> new):"]
        for ps in plans.values():
            lines += describe_stale(ps)
        raise StaleRecords("\n".join([*lines, "nothing ran; --rerun-stale replaces them, or use another --results"]))
    failed: list[CellOutcome] = []
    interrupted = False
    for name, ps in plans.items():
        with matrix_lock(root / name):
            clean_leftovers(root / name)
            outcome = run_cells(runnable(ps, options.rerun_stale), workers=options.workers, on_done=on_done)
        failed += [o for o in outcome.outcomes if o.status.startswith("failed")]
        if outcome.interrupted:
            interrupted = True
            break
    dirs = [(m.name, run_dir_for(root, m.name, c)) for m, cells in matrices for c in cells]
    runs = summarise(dirs, root)
    unrecorded = unrecorded_series([d for _, d in dirs])
    outcomes = [_why_unknown(o, unrecorded, options.backend) for o in evaluate(paper.claims, runs)] \
        if not runs.empty else []
    cols = [c for c in CELL_COLUMNS.get(key, []) if c in runs]
    cells_frame = aggregate_cells(runs[_identity(runs) + cols]) if not runs.empty else pd.DataFrame()
    return Reproduction(paper, outcomes, runs, cells_frame, failed, interrupted, unrecorded)


def unrecorded_series(run_dirs: list[Path]) -> list[str]:
    """The job-level series paper scoring reads (papers.JOB_METRICS) that no run recorded at all."""
    seen: set[str] = set()
    for run_dir in run_dirs:
        ts = run_dir / "timeseries.parquet"
        if ts.exists():
            seen.update(str(m) for m in pq.read_table(ts, columns=["metric"]).column("metric").unique().to_pylist())
    return [str(m) for m in JOB_METRICS if str(m) not in seen] if seen else []


def _why_unknown(outcome: Outcome, unrecorded: list[str], backend: str) -> Outcome:
    """A claim that could not be scored says which series its runs lack (unknown is not zero)."""
    if outcome.verdict != Verdict.UNKNOWN or not unrecorded:
        return outcome
    why = f"; the {backend} records hold no {', '.join(unrecorded)} series"
    return dataclasses.replace(outcome, harness=outcome.harness + why)


def _identity(runs: pd.DataFrame) -> list[str]:
    return [c for c in ("run_id", "matrix", "query", "pattern", "autoscaler", "params", "cell_id", "repetition")
            if c in runs]


def summarise(dirs: list[tuple[str, Path]], root: Path) -> pd.DataFrame:
    """Per-run summary of the given run records plus their resolved config as `config.*` columns."""
    refs, configs = [], []
    for _, run_dir in dirs:
        if not (run_dir / "run.yaml").exists():
            continue
        meta = load_meta(run_dir, root)
        ts = run_dir / "timeseries.parquet"
        refs.append(RunRef(meta, ts if ts.exists() else None, read_events(run_dir)))
        with (run_dir / "run.yaml").open() as fh:
            raw = yamlio.load(fh) or {}
        configs.append({"run_id": meta.run_id, **flat_config(raw.get("config") or {})})
    if not refs:
        return pd.DataFrame()
    summary = pandas_engine.summarise(refs).summary
    return summary.merge(pd.DataFrame(configs), on="run_id", how="left")


# ---------------------------------------------------------------- report


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True, timeout=10, check=False)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no", "--", ".",
                                ":!docs/reproductions"],  # the reports themselves are not the harness
                               capture_output=True, text=True, timeout=10, check=False)
        return out.stdout.strip() + ("+changes" if dirty.stdout.strip() else "") if out.returncode == 0 else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def claims_markdown(outcomes: list[Outcome]) -> str:
    lines = ["| claim (paper section) | paper | harness (95 % CI) | n | reproduced |", "|---|---|---|---|---|"]
    for o in outcomes:
        lines.append(f"| {_md_escape(o.claim)} ({_md_escape(o.section)}) | {_md_escape(o.paper)} | "
                     f"{_md_escape(o.harness)} | {o.n} | {o.verdict} |")
    return "\n".join(lines)


def causes_markdown(rep: Reproduction) -> list[str]:
    """Under each claim that does not reproduce, the setup difference that is its likely cause (issue 14,
    item 5); a claim of the paper's setup with none recorded says so, a setup check's speaks for itself."""
    lines = []
    for o in rep.outcomes:
        if o.verdict == Verdict.YES:
            continue
        cause = rep.paper.causes.get(o.claim)
        if cause is None and o.claim.startswith("setup check"):
            continue
        lines.append(f"- {o.claim} ({o.verdict}): {cause or 'no likely cause recorded.'}")
    if not lines:
        return []
    return ["## Where a claim does not reproduce: the likely cause", "", *lines, ""]


def cells_markdown(cells: pd.DataFrame, columns: list[str]) -> str:
    if cells.empty:
        return "(no runs)"
    cols = [c for c in columns if c in cells]
    head = "| matrix | cell | runs | " + " | ".join(cols) + " |"
    lines = [head, "|" + "---|" * (3 + len(cols))]
    for r in cells.to_dict("records"):
        vals = []
        for c in cols:
            v, ci = r.get(c), r.get(f"{c}_ci")
            if v is None or (isinstance(v, float) and math.isnan(v)):
                vals.append("n/a")
            else:
                vals.append(f"{v:.3g}" + (f" ± {ci:.2g}" if isinstance(ci, float) and math.isfinite(ci) else ""))
        lines.append(f"| {r['matrix']} | {_md_escape(r['cell_id'])} | {r['runs']} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def write_report(rep: Reproduction, options: Options, out_dir: Path) -> list[Path]:
    """`<paper>.md` (claims, cells, provenance) and `<paper>-claims.csv`, `<paper>-cells.csv`."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    key = rep.paper.key
    md = out_dir / f"{key}.md"
    claims_csv = out_dir / f"{key}-claims.csv"
    cells_csv = out_dir / f"{key}-cells.csv"
    n_runs = len(rep.runs)
    reps = sorted({int(r) for r in rep.runs["repetition"]}) if n_runs else []
    text = [
        f"# Reproduction: {rep.paper.title}",
        "",
        f"- command: `{options.command or 'bench reproduce ' + key}`",
        f"- backend: {options.backend}; {n_runs} runs, repetitions per cell: {len(reps)}"
        + (f"; runs cut at {options.duration_s:g} s" if options.duration_s else ""),
        f"- experiments: {', '.join(f'`{e}`' for e in rep.paper.experiments)} (their headers say what is the "
        "paper's setup and what this harness substitutes)",
        f"- made {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')} on {platform.node() or 'this machine'} "
        f"({platform.machine()}, Python {platform.python_version()}), harness commit {_git_commit() or 'unknown'}",
        "- harness figure: mean paired difference over repetitions relative to the baseline's mean, 95 % "
        "t-interval; reproduced = yes (interval on the paper's side), partly (mean only), no",
        "",
        "## Claims",
        "",
        claims_markdown(rep.outcomes),
        "",
        *causes_markdown(rep),
        "## Cells (mean ± 95 % CI half-width over repetitions; the cell id spells the matrix axes' values)",
        "",
        cells_markdown(rep.cells, CELL_COLUMNS.get(key, [])),
        "",
    ]
    if rep.unrecorded and any(o.verdict == Verdict.UNKNOWN for o in rep.outcomes):
        text += ["## Not measured", "",
                 f"No run recorded {', '.join(f'`{m}`' for m in rep.unrecorded)} on {options.backend}: every "
                 "score resting on these series (the per-record response time of MEAD and of latency QoS "
                 "tests) is unknown and its claim says \"not measured\", never met or missed.", ""]
    if rep.paper.notes:
        text += ["## Notes", ""] + [f"- {n}" for n in rep.paper.notes] + [""]
    if rep.failed:
        text += ["## Failed runs", ""] + [f"- {o.run_id}: {o.status}" for o in rep.failed] + [""]
    md.write_text("\n".join(text))
    outcomes_frame(rep.outcomes).to_csv(claims_csv, index=False)
    rep.cells.to_csv(cells_csv, index=False)
    return [md, claims_csv, cells_csv]

