"""`bench analyze` and `bench report`; the main app mounts them with `register(app)`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console(stderr=True, soft_wrap=True)  # one message, one line (wrapping breaks greps)

ENGINES = ("spark", "pandas")


def complete_engine(incomplete: str) -> list[str]:
    return [e for e in ENGINES if e.startswith(incomplete)]


def _progress() -> Progress:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                    transient=True)


def analyze_command(
    results_dir: Annotated[Path, typer.Argument(help="directory holding run records (searched recursively)")],
    out: Annotated[Path | None, typer.Option("--out", help="output directory [default: RESULTS_DIR/analysis]")] = None,
    master: Annotated[str, typer.Option("--master", help="Spark master URL")] = "local[*]",
    engine: Annotated[str, typer.Option("--engine", help="spark or pandas (same numbers)",
                                        autocompletion=complete_engine)] = "spark",
) -> None:
    """Per-run summaries, per-cell means with 95 % CIs, and comparison tables (CSV, Markdown, LaTeX)."""
    from rich.table import Table as RichTable

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
    with _progress() as bar:
        task = bar.add_task(f"analysing {results_dir} with {engine}")
        try:
            outputs = analyze(results_dir, out, engine=engine, master=master,  # type: ignore[arg-type]
                              progress=lambda msg: bar.update(task, description=f"{engine}: {msg}"),
                              warn=lambda s: bar.console.print(f"warning: {s.line()}", markup=False,
                                                               highlight=False))
        except NoRunRecords as exc:
            console.print(f"error: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None
    summary = outputs.result.summary
    table = RichTable(title=f"{len(summary)} runs, {len(outputs.cells)} cells ({time.monotonic() - started:.1f} s)")
    from harness.analysis.tables import fmt_latency, fmt_share

    for col in ("cell", "config", "n", "avg(TM)", "max(TM)", "kafka lat avg", "kafka p95", "e2e lat avg", "e2e p95",
                "shortfall", "scale count", "skipped decisions", "flagged"):
        table.add_column(col, justify="left" if col in ("cell", "config") else "right")
    for r in outputs.cells.itertuples(index=False):
        table.add_row(f"{r.matrix}/{r.cell_id}", str(getattr(r, "config_hash", "")), str(r.runs),
                      f"{r.tm_avg:.2f}", f"{r.tm_max:.0f}",
                      fmt_latency(r.latency_kafka_avg), fmt_latency(r.latency_kafka_p95),
                      fmt_latency(r.latency_e2e_avg), fmt_latency(r.latency_e2e_p95), fmt_share(r.load_shortfall),
                      f"{r.scale_count:.1f}", f"{r.decisions_skipped:.1f}", f"{r.flagged:.0%}")
    Console().print(table)
    notes = []
    if outputs.interrupted:
        notes.append(f"{outputs.interrupted} interrupted run(s) left out of means and crash rates")
    if outputs.skipped:
        notes.append(f"{len(outputs.skipped)} corrupt run record(s) skipped (listed in skipped.csv)")
    for note in notes:
        console.print(note, markup=False, highlight=False)
    if not outputs.fault_recovery.empty:
        rec = RichTable(title="recovery after injected faults (s)")
        for col in ("autoscaler", "fault", "faults", "recovered", "mean", "max"):
            rec.add_column(col, justify="left" if col in ("autoscaler", "fault") else "right")
        for f in outputs.fault_recovery.itertuples(index=False):
            rec.add_row(str(f.autoscaler), str(f.fault_kind), str(f.faults), str(f.recovered),
                        f"{f.recovery_s:.3g}", f"{f.recovery_s_max:.3g}")
        Console().print(rec)
    console.print(f"wrote {len(outputs.tables)} table files under {outputs.out_dir / 'tables'}")


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
