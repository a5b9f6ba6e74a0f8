"""`bench fidelity FILE`: run a matrix's cells on `local` and on `sim` and report how far apart they are.

Exit codes: 0 ok (whatever the targets came out as: the report says), 1 a run failed, 2 bad input.
"""

import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def register(app: typer.Typer) -> None:
    @app.command()
    def fidelity(
        files: Annotated[list[Path], typer.Argument(
            help="matrix YAML(s): every cell runs on local and on sim; several files make one report, ranked "
                 "across all their cells")],
        reps: Annotated[int, typer.Option(help="sim repetitions per cell (noise seeds 1..N)")] = 3,
        local_reps: Annotated[int, typer.Option(help="local repetitions per cell")] = 1,
        results: Annotated[Path, typer.Option(help="results directory")] = Path("results"),
        local_results: Annotated[Path | None, typer.Option(
            help="read the local records from here (an --archive directory) instead of --results: with "
                 "--sim-only or --report-only, so the report rebuilds on any machine")] = None,
        archive: Annotated[Path | None, typer.Option(
            help="copy the complete local records here, compact and without machine paths (for git)")] = None,
        out: Annotated[Path, typer.Option(help="where the report goes")] = Path("results/fidelity"),
        name: Annotated[str | None, typer.Option(
            help="the report's name (its files' stem); required with several files, default the matrix's")] = None,
        lock: Annotated[Path | None, typer.Option(
            help="flock this file around each local run (the shared machine's lock)")] = None,
        report_only: Annotated[bool, typer.Option(help="run nothing: report on what is recorded")] = False,
        sim_only: Annotated[bool, typer.Option(help="run only the sim cells (then report what exists)")] = False,
        rerun_stale: Annotated[bool, typer.Option(
            help="replace runs recorded with another configuration (else nothing runs while any exists)")] = False,
    ) -> None:
        """Same cells on local and sim: per-cell differences of TM-minutes, latency (both definitions),
        scale count, first action and load shortfall; Kendall tau of the rankings (Markdown + HTML)."""
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        from harness.config import ConfigError, Matrix, read_yaml, validate_model
        from harness.fidelity.runner import fidelity_runs, run_all, stale_runs
        from harness.matrix import describe_stale

        if reps < 1 or local_reps < 1:
            err.print("[bold red]error:[/] --reps and --local-reps must be >= 1")
            raise typer.Exit(2)
        if local_results is not None and not (sim_only or report_only):
            err.print("[bold red]error:[/] --local-results is read, never written: add --sim-only or --report-only "
                      "(local cells write under --results; --archive copies them)")
            raise typer.Exit(2)
        if local_results is not None and not local_results.is_dir():
            err.print(f"[bold red]error:[/] --local-results {local_results}: no such directory")
            raise typer.Exit(2)
        if len(files) > 1 and not name:
            err.print("[bold red]error:[/] several files make one report: name it with --name")
            raise typer.Exit(2)
        matrices: list[Matrix] = []
        runs: list[Any] = []
        try:
            for file in files:
                matrix: Matrix = validate_model(Matrix, read_yaml(file), str(file))
                matrices.append(matrix)
                runs += fidelity_runs(matrix, str(file), results, reps, local_reps, local_results)
        except ConfigError as exc:
            err.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
            raise typer.Exit(2) from None
        names = [m.name for m in matrices]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            err.print(f"[bold red]error:[/] the files share the matrix name {', '.join(twice)}: their runs would be "
                      "one directory's")
            raise typer.Exit(2)
        failed = 0
        if not report_only:
            todo = [r for r in runs if not (sim_only and r.backend == "local")]
            stale = stale_runs(todo)
            if stale and not rerun_stale:
                err.print(f"{len(stale)} run(s) under {results} were made with another configuration "
                          "(fields: old -> new):", markup=False, highlight=False)
                for line in describe_stale(stale):
                    err.print(line, markup=False, highlight=False)
                err.print("nothing ran; --rerun-stale replaces them, or use another --results directory",
                          markup=False, highlight=False)
                raise typer.Exit(2)
            with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), console=console) as progress:
                task = progress.add_task(name or matrices[0].name, total=len(todo))
                sub = progress.add_task("", total=1.0, visible=False)

                def on_done(r: Any, status: str) -> None:
                    nonlocal failed
                    if status.startswith("failed"):
                        failed += 1
                        progress.console.print(f"[red]{r.run_id}: {status}[/]")
                    progress.advance(task)
                    progress.update(sub, visible=False)

                def on_progress(r: Any, t: float, total: float) -> None:
                    progress.update(sub, description=f"{r.run_id} (load {os.getloadavg()[0]:.1f})", completed=t,
                                    total=total, visible=True)

                run_all(todo, lock, on_done, on_progress)
        if archive is not None:
            from harness.fidelity.archive import ArchiveError, archive_local

            try:
                kept = archive_local(runs, archive)
            except ArchiveError as exc:
                err.print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
                raise typer.Exit(2) from None
            console.print(f"archived {len(kept)} local record(s) under {archive}")
        md, html_path = build(matrices, " ".join(str(f) for f in files), runs, out, name or matrices[0].name)
        console.print(f"report: {md} and {html_path}")
        if failed:
            raise typer.Exit(1)


def build(matrices: list[Any], source: str, runs: list[Any], out: Path, name: str) -> tuple[Path, Path]:
    """Read the recorded runs, compare, and write the report `name` (missing runs are left out and named)."""
    from harness.fidelity.compare import compare_cell, rank_agreement, repeat_agreement, run_metrics
    from harness.fidelity.report import ReportInput, write_report
    from harness.matrix import CellState
    from harness.record import read_run_record

    by_cell: dict[str, dict[str, list[Any]]] = {}
    missing: list[str] = []
    stale: list[str] = []
    exps: dict[str, Any] = {}
    local_reps: dict[str, list[int]] = {}  # cell -> the repetition number of each local record, in order
    # cells of several matrices that share an id are told apart by their matrix's name
    ids = {(_matrix_of(r), r.cell_id) for r in runs}
    plain = [c for _, c in ids]
    qualify = len(plain) != len(set(plain))

    def key(r: Any) -> str:
        return f"{_matrix_of(r)}/{r.cell_id}" if qualify else r.cell_id

    for r in runs:
        exps.setdefault(key(r), r.experiment)
        label = f"{_matrix_of(r)}/{r.run_id}" if qualify else r.run_id
        state = r.plan().state
        if state == CellState.STALE:  # made with another configuration: never compared as this cell
            stale.append(label)
            continue
        if state != CellState.DONE:
            missing.append(label)
            continue
        by_cell.setdefault(key(r), {"local": [], "sim": []})[r.backend].append(read_run_record(r.run_dir))
        if r.backend == "local":
            local_reps.setdefault(key(r), []).append(r.repetition)
    cells = []
    records = {}
    for cell_id, recs in by_cell.items():
        if not recs["local"] or not recs["sim"]:
            continue
        exp = exps[cell_id]
        group = cell_id.replace(exp.autoscaler.name, "").strip("_/") or "all"
        cells.append(compare_cell(cell_id, group, exp.autoscaler.name, [run_metrics(x) for x in recs["local"]],
                                  [run_metrics(x) for x in recs["sim"]], local_reps=local_reps[cell_id]))
        records[cell_id] = (recs["local"], recs["sim"])
    taus = rank_agreement(cells)
    notes = _notes(matrices, runs, by_cell, missing)
    if stale:
        notes.append(f"made with another configuration (stale; `--rerun-stale` replaces them), left out: "
                     f"{', '.join(stale)}")
    from harness.fidelity.machines import age_lines, speed_lines

    local = [x for c in by_cell.values() for x in c["local"]]
    sims = [x for c in by_cell.values() for x in c["sim"]]
    machines = speed_lines(local, sims) + age_lines([(c["local"], c["sim"]) for c in by_cell.values()])
    from harness.fidelity.cpu_readings import cpu_rows, cpu_table
    from harness.fidelity.readings import readings_rows, readings_table
    from harness.fidelity.saturation import age_rows, age_table, pool, saturation_rows, saturation_table

    readings = readings_table(readings_rows(records))
    at_limit = pool(records)
    return write_report(ReportInput(f"Fidelity: {name}", source, notes, cells, taus, records, machines, readings,
                                    cpu_table(cpu_rows(records)), repeats=repeat_agreement(cells),
                                    saturation=saturation_table(saturation_rows(at_limit)),
                                    ages=age_table(age_rows(at_limit))), out, name)


def _matrix_of(run: Any) -> str:
    """The matrix a fidelity run belongs to: its results are under <results>/<matrix>/<backend>/<run>."""
    return str(run.run_dir.parent.parent.name)


def _notes(matrices: list[Any], runs: list[Any], by_cell: dict[str, dict[str, list[Any]]],
           missing: list[str]) -> list[str]:
    notes = []
    for matrix in matrices:
        if matrix.description:
            notes.append((f"{matrix.name}: " if len(matrices) > 1 else "") + " ".join(str(matrix.description).split()))
    setups: dict[str, None] = {}  # each distinct set-up once, in the order of the runs
    for r in runs:
        exp = r.experiment
        setups.setdefault(
            f"pattern {exp.pattern.name}: time scale {exp.pattern.time_scale:g}; "
            f"loop period {exp.loop.period_s:g} s, window {exp.loop.metrics_window_s:g} s, cool-down "
            f"{exp.loop.cooldown_s:g} s; at most {exp.scale_manager.max_taskmanagers} task managers of "
            f"{exp.local.taskmanager_cpu_quota:g} CPU; {exp.partitions} partitions per topic; rescale "
            f"{exp.rescale_method}; Kafka retention {exp.kafka.retention_s or 'none'}")
    notes += list(setups)
    from harness.fidelity.scale import describe_scale

    seen: set[tuple[str, str]] = set()
    for r in runs:
        key = (r.experiment.query, r.experiment.pattern.name)
        if key in seen:
            continue
        seen.add(key)
        try:
            notes.append(f"{key[0]} {key[1]}: {describe_scale(r.experiment).describe()}")
        except Exception as exc:  # noqa: BLE001 - a note, never a failed report
            notes.append(f"{key[0]} {key[1]}: scale not described ({exc})")
    local = [x for c in by_cell.values() for x in c["local"]]
    sims = [x for c in by_cell.values() for x in c["sim"]]
    loads = [x.meta.get("host", {}).get("loadavg_start", [math.nan])[0] for x in local]
    loads = [v for v in loads if v is not None and math.isfinite(v)]
    if loads:
        notes.append(f"host 1-min load average before the local runs: min {min(loads):.1f}, median "
                     f"{sorted(loads)[len(loads) // 2]:.1f}, max {max(loads):.1f} (n = {len(loads)})")
    n_sim = {len(c["sim"]) for c in by_cell.values()}
    n_local = {len(c["local"]) for c in by_cell.values()}
    notes.append(f"local runs per cell: {sorted(n_local)}; sim runs per cell: {sorted(n_sim)} (same pattern and "
                 "arrivals as the local run, readings' noise seeds 1..n)")
    srcs = sorted({str(x.meta.get("backend", {}).get("costs", {}).get("source", "?")) for x in sims})
    notes += [f"sim costs: {s}" for s in srcs]
    if missing:
        notes.append(f"not (yet) recorded, left out: {', '.join(missing)}")
    return notes
