"""`bench compare` and `bench runs`; the main app mounts them with `register(app)`.

Tables go to stdout, notices to stderr; `--json` prints one JSON document instead of the table
(`harness.machine_output`), `--quiet` prints nothing but errors.
"""

import math
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

err = Console(stderr=True, soft_wrap=True)

JSON_HELP = "print one JSON document on stdout (tables and progress go to stderr)"
QUIET_HELP = "print nothing but errors"


def _fail(message: str) -> typer.Exit:
    err.print(f"error: {message}", markup=False, highlight=False)
    return typer.Exit(2)


def _num(v: float) -> str:
    from harness.analysis.rounding import plain

    return "-" if v is None or math.isnan(v) else plain(v)


def _p(v: float) -> str:
    if v is None or math.isnan(v):
        return "-"
    return "<0.001" if v < 0.001 else f"{v:.3f}"


def compare_command(
    sides: Annotated[list[str], typer.Argument(
        metavar="A B [C ...]",
        help="sides: a filter FIELD=VALUE[,FIELD=VALUE] (fields: matrix cell experiment backend query pattern "
             "autoscaler seed status config_hash params.NAME), a folder of run records, a matrix, or a cell "
             "(CELL or MATRIX/CELL); B, C ... are each compared with A")],
    results: Annotated[Path, typer.Option(help="results folder the sides are looked up in")] = Path("results"),
    metric: Annotated[list[str], typer.Option(
        "--metric", metavar="NAME",
        help="compare only this summary column; repeatable [default: every measured, varying one]")] = [],  # noqa: B006
    plot: Annotated[Path | None, typer.Option(help="save a PNG: bars per metric with 95 % CI error bars")] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Is B different from A? Per metric: mean ± 95 % CI and n per side, B - A with its 95 % CI,
    Welch's t and Mann-Whitney U p-values, and a verdict (a difference only where both tests find one)."""
    from harness.analysis.compare import compare
    from harness.analysis.selection import SelectionError
    from harness.machine_output import machine_output
    from harness.paths import PathError, check_input_dir, check_output_file

    try:
        check_input_dir(results, "--results")
        if plot is not None:
            check_output_file(plot, "--plot")
    except PathError as exc:
        raise _fail(str(exc)) from None
    if len(sides) < 2:
        raise _fail("compare needs at least two sides: bench compare A B [C ...]")
    with machine_output(as_json, quiet) as out:
        try:
            result = compare(results, sides, metric or None,
                             progress=(lambda m: err.print(m, markup=False, highlight=False)) if out.chatty else None)
        except SelectionError as exc:
            raise _fail(str(exc)) from None
        document: dict[str, Any] = result.as_dict()
        if plot is not None:
            from harness.report.compare_figure import plot_comparison

            plot_comparison(result, plot)
            document["plot"] = str(plot)
        if out.json:
            out.emit(document)
        if out.tables:
            _print_comparison(result, Console(soft_wrap=True))
        if out.chatty and plot is not None:
            err.print(f"plot saved to {plot}", markup=False, highlight=False)


def _print_comparison(result: Any, console: Console) -> None:
    """One table per pair. A table wider than the console is never folded inside a number: a pipe or a
    file gets it at its full width (nothing wraps there), a narrower terminal one line per metric."""
    from rich.table import Table

    from harness.analysis.rounding import PM_LEGEND

    letters = [chr(ord("A") + i) for i in range(len(result.sides))]
    for letter, side in zip(letters, result.sides, strict=True):
        extra = f", {side.interrupted} interrupted left out" if side.interrupted else ""
        console.print(f"{letter}: {side.spec} ({side.n_runs} runs{extra})", markup=False, highlight=False)
    for i, pair in enumerate(result.pairs, start=1):
        b = letters[i]
        headers = ("metric", "A mean ± CI (n)", f"{b} mean ± CI (n)", f"{b} - A ± 95 % CI", "Welch p",
                   "Mann-Whitney p", "verdict")
        rows = [_comparison_row(m) for m in pair.metrics]
        table = Table(title=f"{b} vs A", title_justify="left")
        for col in headers:
            table.add_column(col, justify="left" if col in ("metric", "verdict") else "right",
                             no_wrap=col != "verdict")
        for row in rows:
            table.add_row(*row)
        needed = console.measure(table, options=console.options.update_width(10_000)).maximum
        if needed <= console.width:
            console.print(table)
        elif not console.is_terminal:
            Console(file=console.file, soft_wrap=True, width=needed).print(table)
        else:
            console.print(f"{b} vs A", markup=False, highlight=False)
            for row in rows:
                labels = ("A", b, f"{b} - A", "Welch p", "Mann-Whitney p")
                cells = "; ".join(f"{h} {v}" for h, v in zip(labels, row[1:-1], strict=True))
                console.print(f"  {row[0]}: {cells}; {row[-1]}", markup=False, highlight=False)
    if result.left_out:
        shown = "; ".join(f"{k}: {v}" for k, v in list(result.left_out.items())[:12])
        more = f" (+{len(result.left_out) - 12} more)" if len(result.left_out) > 12 else ""
        console.print(f"left out: {shown}{more}", markup=False, highlight=False)
    console.print(f"{PM_LEGEND} Verdict: 'higher'/'lower' when Welch's t and the Mann-Whitney U test both "
                  "give p < 0.05. Numbers from: " + result.source, markup=False, highlight=False)


def _comparison_row(m: Any) -> tuple[str, ...]:
    from harness.analysis.rounding import with_ci

    d = m.difference
    half = (d.ci_high - d.ci_low) / 2 if not math.isnan(d.ci_low) else math.nan
    return (m.metric, f"{with_ci(m.baseline.mean, m.baseline.ci)} ({m.baseline.n})",
            f"{with_ci(m.other.mean, m.other.ci)} ({m.other.n})", with_ci(d.diff, half),
            _p(d.welch_p), _p(d.mwu_p), d.verdict_text)


def runs_command(
    results: Annotated[Path, typer.Argument(help="results folder (searched recursively for run records)")],
    filters: Annotated[list[str] | None, typer.Argument(
        metavar="[FIELD=VALUE[,FIELD=VALUE] ...]",
        help="only runs every filter matches (fields as in `bench compare`)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """One line per run: experiment, cell, repetition, seed, backend, status (completed / failed /
    interrupted / flagged: completed with faults recorded), duration (run seconds), wall-clock time,
    config hash, faults."""
    from harness.analysis.runs_listing import list_runs
    from harness.analysis.selection import SelectionError
    from harness.machine_output import machine_output
    from harness.paths import PathError, check_input_dir

    try:
        check_input_dir(results, "RESULTS")
    except PathError as exc:
        raise _fail(str(exc)) from None
    with machine_output(as_json, quiet) as out:
        try:
            lines, unreadable = list_runs(results, filters or [])
        except SelectionError as exc:
            raise _fail(str(exc)) from None
        for path, why in unreadable:
            err.print(f"warning: unreadable run record {path}: {why}", markup=False, highlight=False)
        if out.json:
            out.emit({"results": str(results), "filters": filters or [], "runs": [r.as_dict() for r in lines],
                      "unreadable": [{"path": str(p), "why": w} for p, w in unreadable]})
        if not out.tables:
            return
        header = ("experiment", "cell", "rep", "seed", "backend", "status", "duration", "wall", "config", "faults")
        rows = [header]
        for r in lines:
            status = r.status.value + (f" ({r.why})" if r.why else "")
            faults = f"{r.faults}" + (f" ({r.injected_faults} injected)" if r.injected_faults else "")
            rows.append((r.experiment, f"{r.matrix}/{r.cell}", str(r.repetition), str(r.seed), r.backend, status,
                         _seconds(r.duration_s), _seconds(r.wall_s), r.config_hash or "-", faults))
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        right = {2, 3, 6, 7, 9}
        text = ["  ".join(v.rjust(w) if i in right else v.ljust(w) for i, (v, w) in enumerate(zip(row, widths,
                                                                                                  strict=True))).rstrip()
                for row in rows]
        Console(soft_wrap=True).print("\n".join(text), markup=False, highlight=False)
        counts: dict[str, int] = {}
        for r in lines:
            counts[r.status.value] = counts.get(r.status.value, 0) + 1
        err.print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no runs", markup=False,
                  highlight=False)


def _seconds(v: float | None) -> str:
    if v is None or math.isnan(v):
        return "-"
    if v >= 120:
        return f"{v / 60:.1f} min"
    return f"{v:.0f} s" if v >= 10 else f"{v:.1f} s"


def register(app: typer.Typer) -> None:
    """Add `compare` and `runs` to the main `bench` app."""
    app.command("compare")(compare_command)
    app.command("runs")(runs_command)
