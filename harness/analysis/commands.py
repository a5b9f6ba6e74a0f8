"""`bench analyze` and `bench report`; the main app mounts them with `register(app)`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

console = Console(stderr=True)


def _progress() -> Progress:
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                    transient=True)


def analyze_command(
    results_dir: Annotated[Path, typer.Argument(help="directory holding run records (searched recursively)")],
    out: Annotated[Path | None, typer.Option("--out", help="output directory [default: RESULTS_DIR/analysis]")] = None,
    master: Annotated[str, typer.Option("--master", help="Spark master URL")] = "local[*]",
    engine: Annotated[str, typer.Option("--engine", help="spark (default) or pandas (same numbers)")] = "spark",
) -> None:
    """Per-run summaries, per-cell means with 95 % CIs, and comparison tables (CSV, Markdown, LaTeX)."""
    from harness.analysis.pipeline import analyze

    if engine not in ("spark", "pandas"):
        console.print(f"[red]--engine must be spark or pandas, got {engine!r}[/red]")
        raise typer.Exit(2)
    if not results_dir.is_dir():
        console.print(f"[red]{results_dir} is not a directory[/red]")
        raise typer.Exit(2)
    started = time.monotonic()
    with _progress() as bar:
        task = bar.add_task(f"analysing {results_dir} with {engine}")
        try:
            outputs = analyze(results_dir, out, engine=engine, master=master,  # type: ignore[arg-type]
                              progress=lambda msg: bar.update(task, description=f"{engine}: {msg}"))
        except FileNotFoundError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from None
    summary = outputs.result.summary
    table = RichTable(title=f"{len(summary)} runs, {len(outputs.cells)} cells ({time.monotonic() - started:.1f} s)")
    from harness.analysis.tables import fmt_latency, fmt_share

    for col in ("cell", "n", "avg(TM)", "max(TM)", "kafka lat avg", "kafka p95", "e2e lat avg", "e2e p95",
                "shortfall", "scale count", "skipped decisions", "flagged"):
        table.add_column(col, justify="left" if col == "cell" else "right")
    for r in outputs.cells.itertuples(index=False):
        table.add_row(f"{r.matrix}/{r.cell_id}", str(r.runs), f"{r.tm_avg:.2f}", f"{r.tm_max:.0f}",
                      fmt_latency(r.latency_kafka_avg), fmt_latency(r.latency_kafka_p95),
                      fmt_latency(r.latency_e2e_avg), fmt_latency(r.latency_e2e_p95), fmt_share(r.load_shortfall),
                      f"{r.scale_count:.1f}", f"{r.decisions_skipped:.1f}", f"{r.flagged:.0%}")
    Console().print(table)
    console.print(f"wrote {len(outputs.tables)} table files under {outputs.out_dir / 'tables'}")


def report_command(
    results_dir: Annotated[Path, typer.Argument(help="directory holding run records")],
    out: Annotated[Path | None, typer.Option("--out", help="output directory [default: RESULTS_DIR/report]")] = None,
    analysis: Annotated[Path | None, typer.Option("--analysis", help="outputs of `bench analyze` "
                                                                     "[default: RESULTS_DIR/analysis]")] = None,
) -> None:
    """A self-contained HTML report (and Markdown) with the tables and figures."""
    from harness.report.render import build_report

    if not results_dir.is_dir():
        console.print(f"[red]{results_dir} is not a directory[/red]")
        raise typer.Exit(2)
    with _progress() as bar:
        task = bar.add_task("building report")
        try:
            paths = build_report(results_dir, out, analysis,
                                 progress=lambda msg: bar.update(task, description=msg))
        except FileNotFoundError as exc:
            console.print(f"[red]{exc}[/red]")
            raise typer.Exit(1) from None
    console.print(f"report: {paths.html}\nmarkdown: {paths.markdown} ({len(paths.figures)} figures)")


def register(app: typer.Typer) -> None:
    """Add `analyze` and `report` to the main `bench` app."""
    app.command("analyze")(analyze_command)
    app.command("report")(report_command)
