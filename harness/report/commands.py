"""`bench analyze` and `bench report`; the main app mounts them with `register(app)`."""

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from harness.analysis.engine import ENGINES, LOG_NAME, SPARK_MIN_RUNS

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console(stderr=True, soft_wrap=True)  # one message, one line (wrapping breaks greps)


def complete_engine(incomplete: str) -> list[str]:
    return [e for e in ENGINES if e.startswith(incomplete)]


def _progress(disable: bool = False) -> "Progress":
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                    transient=True, disable=disable)


def analysis_document(outputs: Any, seconds: float) -> dict[str, Any]:
    """`bench analyze --json`: where the outputs are, and the per-cell table (every column of cells.csv)."""
    from harness.machine_output import records

    return {"out_dir": str(outputs.out_dir), "engine": outputs.engine, "runs": len(outputs.result.summary),
            "cells": records(outputs.cells),
            "interrupted": outputs.interrupted,
            "skipped": [{"path": str(s.path), "why": s.why} for s in outputs.skipped],
            "fault_recovery": records(outputs.fault_recovery) if not outputs.fault_recovery.empty else [],
            "tables": [str(p) for p in outputs.tables], "seconds": seconds}


def analyze_command(
    results_dir: Annotated[Path, typer.Argument(help="directory holding run records (searched recursively)")],
    out: Annotated[Path | None, typer.Option("--out", help="output directory [default: RESULTS_DIR/analysis]")] = None,
    master: Annotated[str | None, typer.Option(
        "--master", help="Spark master URL, e.g. spark://host:7077 (implies Spark) [default: local[*] when "
                         "Spark runs]")] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help=f"auto, spark or pandas (same numbers). auto: pandas below {SPARK_MIN_RUNS:,} run "
                         f"records, Spark from {SPARK_MIN_RUNS:,} or when --master is given (threshold measured "
                         "with benchmarks/bench_analysis.py on 2 cores: docs/analysis.md)",
        autocompletion=complete_engine)] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON document on stdout (progress and "
                                                         "logs go to stderr)")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="print nothing but errors")] = False,
) -> None:
    """Per-run summaries, per-cell means with 95 % CIs, and comparison tables (CSV, Markdown, LaTeX).

    Spark's and the JVM's log lines go to OUT/analysis.log, not the console.
    """
    from harness.machine_output import machine_output

    with machine_output(as_json, quiet) as output:
        _analyze(results_dir, out, master, engine, output)


def _analyze(results_dir: Path, out: Path | None, master: str | None, engine: str, output: Any) -> None:
    from harness.analysis.pipeline import NoRunRecords, analyze
    from harness.paths import PathError, check_input_dir, check_output_dir

    if engine not in ENGINES:
        console.print(f"error: --engine {engine!r}: valid choices: {', '.join(ENGINES)}", markup=False,
                      highlight=False)
        raise typer.Exit(2)
    try:
        check_input_dir(results_dir, "RESULTS_DIR")
        check_output_dir(out or results_dir / "analysis", "--out")
    except PathError as exc:
        console.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    started = time.monotonic()
    with _progress(disable=output.quiet) as bar:
        task = bar.add_task(f"analysing {results_dir}")
        try:
            outputs = analyze(results_dir, out, engine=engine, master=master,  # type: ignore[arg-type]
                              progress=lambda msg: bar.update(task, description=msg),
                              warn=lambda s: bar.console.print(f"warning: {s.line()}", markup=False,
                                                               highlight=False))
        except NoRunRecords as exc:
            console.print(f"error: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None
    if output.json:
        output.emit(analysis_document(outputs, time.monotonic() - started))
    if output.tables:
        _print_cells(outputs, started)
    notes = []
    if outputs.interrupted:
        notes.append(f"{outputs.interrupted} interrupted run(s) left out of means and crash rates")
    if outputs.skipped:
        notes.append(f"{len(outputs.skipped)} corrupt run record(s) skipped (listed in skipped.csv)")
    for note in notes:
        console.print(note, markup=False, highlight=False)
    if output.tables and not outputs.fault_recovery.empty:
        _print_recovery(outputs)
    if output.chatty:
        console.print(f"wrote {len(outputs.tables)} table files under {outputs.out_dir / 'tables'} "
                      f"(log: {outputs.out_dir / LOG_NAME})", markup=False, highlight=False)


def _print_cells(outputs: Any, started: float) -> None:
    """One line per cell that fits 80 columns: the headline numbers (both latencies' p95); the full
    set, means and intervals included, is in the tables `analyze` writes."""
    from rich import box
    from rich.table import Table as RichTable

    from harness.analysis.tables import fmt_latency, fmt_share

    summary = outputs.result.summary
    table = RichTable(title=f"{len(summary)} runs, {len(outputs.cells)} cells ({outputs.engine}, "
                            f"{time.monotonic() - started:.1f} s)", box=box.SIMPLE_HEAD, padding=0,
                      pad_edge=False, show_edge=False,
                      caption="p95 of the time in Kafka and end to end; lost = load shortfall; "
                              "skips = decisions skipped (unmeasured inputs)")
    for col in ("cell #config", "n", "TM avg", "TM max", "kafka p95", "e2e p95", "lost", "scales", "skips", "flag"):
        # cell names are long: they wrap inside their column (every character kept); the numbers never wrap
        table.add_column(col, justify="left" if col.startswith("cell") else "right",
                         overflow="fold" if col.startswith("cell") else "ellipsis", no_wrap=not col.startswith("cell"),
                         min_width=18 if col.startswith("cell") else None)
    for r in outputs.cells.itertuples(index=False):
        config = str(getattr(r, "config_hash", "") or "")
        table.add_row(f"{r.matrix}/{r.cell_id}" + (f" #{config[:8]}" if config else ""), str(r.runs),
                      f"{r.tm_avg:.2f}", f"{r.tm_max:.0f}", fmt_latency(r.latency_kafka_p95),
                      fmt_latency(r.latency_e2e_p95), fmt_share(r.load_shortfall),
                      f"{r.scale_count:.1f}", f"{r.decisions_skipped:.1f}", f"{r.flagged:.0%}")
    Console().print(table)


def _print_recovery(outputs: Any) -> None:
    from rich.table import Table as RichTable

    if not outputs.fault_recovery.empty:
        rec = RichTable(title="recovery after injected faults (s)")
        for col in ("autoscaler", "fault", "faults", "recovered", "mean", "max"):
            rec.add_column(col, justify="left" if col in ("autoscaler", "fault") else "right")
        for f in outputs.fault_recovery.itertuples(index=False):
            rec.add_row(str(f.autoscaler), str(f.fault_kind), str(f.faults), str(f.recovered),
                        f"{f.recovery_s:.3g}", f"{f.recovery_s_max:.3g}")
        Console().print(rec)


def report_command(
    results_dir: Annotated[Path, typer.Argument(help="directory holding run records")],
    out: Annotated[Path | None, typer.Option("--out", help="output directory [default: RESULTS_DIR/report]")] = None,
    analysis: Annotated[Path | None, typer.Option("--analysis", help="outputs of `bench analyze` "
                                                                     "[default: RESULTS_DIR/analysis]")] = None,
) -> None:
    """A self-contained HTML report (and Markdown) with the tables and figures."""
    from harness.analysis.pipeline import NoRunRecords
    from harness.paths import PathError, check_input_dir, check_output_dir
    from harness.report.render import build_report

    try:
        check_input_dir(results_dir, "RESULTS_DIR")
        check_output_dir(out or results_dir / "report", "--out")
        check_output_dir(analysis or results_dir / "analysis", "--analysis")
    except PathError as exc:
        console.print(f"error: {exc}", markup=False, highlight=False)
        raise typer.Exit(2) from None
    with _progress() as bar:
        task = bar.add_task("building report")
        try:
            paths = build_report(results_dir, out, analysis,
                                 progress=lambda msg: bar.update(task, description=msg),
                                 notice=lambda msg: bar.console.print(msg, markup=False, highlight=False))
        except NoRunRecords as exc:
            console.print(f"error: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None
    console.print(f"report: {paths.html}\nmarkdown: {paths.markdown} ({len(paths.figures)} figures)")


def register(app: typer.Typer) -> None:
    """Add `analyze` and `report` to the main `bench` app."""
    app.command("analyze")(analyze_command)
    app.command("report")(report_command)
