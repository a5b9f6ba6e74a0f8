"""`bench`: run experiments and matrices, check files, show patterns, manage the stack.

Exit codes: 0 success, 1 a run failed, 2 bad input (nothing started, nothing written).
"""

from __future__ import annotations

import datetime as dt
import importlib
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    help="Benchmark stream-processing autoscalers on Kafka + Flink + Nexmark.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

LOCAL_DEFAULT_SCALE = 0.005  # thesis rates x 0.005: q1 cosine peaks near 11 k records/s
LOCAL_DEFAULT_TIME_SCALE = 10.0  # 140 minutes play in 14
LOCAL_DEFAULT_MAX_TASKMANAGERS = 8  # 2 cores: 8 task managers of 0.25 CPU each
LOCAL_DEFAULT_COOLDOWN_S = 60.0  # the thesis' 300 s, shortened with the time scale


def apply_local_defaults(raw: dict[str, Any]) -> None:
    """Thesis rates and timings do not fit one machine: scale a `local` run unless told otherwise."""
    from harness.config import expand_shorthand

    if raw.get("backend", "local") != "local":
        return
    expand_shorthand(raw)
    pattern = raw.setdefault("pattern", {})
    if isinstance(pattern, dict):
        pattern.setdefault("scale", LOCAL_DEFAULT_SCALE)
        pattern.setdefault("time_scale", LOCAL_DEFAULT_TIME_SCALE)
    raw.setdefault("scale_manager", {}).setdefault("max_taskmanagers", LOCAL_DEFAULT_MAX_TASKMANAGERS)
    raw.setdefault("loop", {}).setdefault("cooldown_s", LOCAL_DEFAULT_COOLDOWN_S)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    return typer.Exit(code)


def _parse_sets(sets: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise _fail(f"--set {item!r}: expected dotted.key=value")
        key, value = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(value)
    return out


@app.command()
def run(
    file: Annotated[Path | None, typer.Argument(help="experiment YAML (flags override it)")] = None,
    scaler: Annotated[str | None, typer.Option(help="autoscaler, e.g. ds2, dhalion, hpa-cpu")] = None,
    query: Annotated[str | None, typer.Option(help="Nexmark query: q1 q2 q3 q5 q8 q11")] = None,
    pattern: Annotated[str | None, typer.Option(help="cosine random increasing decreasing convergence ...")] = None,
    backend: Annotated[str | None, typer.Option(help="local (default), sim or k8s")] = None,
    scale: Annotated[float | None, typer.Option(help="multiply the pattern's rates")] = None,
    time_scale: Annotated[float | None, typer.Option(help="compress time: 10 plays 140 min in 14")] = None,
    duration: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    parallelism: Annotated[int | None, typer.Option(help="initial parallelism of every operator")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="dotted.field=value, e.g. loop.cooldown_s=60")] = [],  # noqa: B006
    results: Annotated[Path, typer.Option(help="results directory")] = Path("results"),
    plot: Annotated[Path | None, typer.Option(help="save a PNG of the run")] = None,
) -> None:
    """Run one experiment and print its summary table."""
    from harness.config import ConfigError, Experiment, expand_shorthand, read_yaml, set_path, validate_model

    raw: dict[str, Any] = {}
    source = "command line"
    if file is not None:
        loaded = read_yaml_or_exit(file, read_yaml, ConfigError)
        if isinstance(loaded, dict) and "base" in loaded:
            raise _fail(f"{file}: this is a matrix; use `bench matrix {file}`")
        raw = loaded if isinstance(loaded, dict) else {}
        source = str(file)
    raw = expand_shorthand(raw)
    flags = {"autoscaler.name": scaler, "query": query, "pattern.name": pattern, "backend": backend,
             "duration_s": duration, "seed": seed, "initial_parallelism": parallelism}
    for key, value in flags.items():
        if value is not None:
            set_path(raw, key, value)
    raw.setdefault("query", "q1")
    raw.setdefault("pattern", {"name": "cosine"})
    raw.setdefault("autoscaler", {"name": "ds2"})
    if scale is not None:
        set_path(raw, "pattern.scale", scale)
    if time_scale is not None:
        set_path(raw, "pattern.time_scale", time_scale)
    apply_local_defaults(raw)
    for key, value in _parse_sets(set_).items():
        set_path(raw, key, value)
    raw.setdefault("name", f"{raw['autoscaler']['name']}-{raw['query']}-{raw['pattern']['name']}")
    try:
        experiment: Experiment = validate_model(Experiment, raw, source)
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    from harness.runner import run_experiment

    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    run_dir = results / experiment.name / f"{experiment.backend}-s{experiment.seed}-{stamp}"
    console.print(
        f"[bold]{experiment.name}[/]: backend {experiment.backend}, query {experiment.query}, "
        f"pattern {experiment.pattern.name} (scale {experiment.pattern.scale}, "
        f"time scale {experiment.pattern.time_scale}), autoscaler {experiment.autoscaler.name}"
    )
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        task = progress.add_task("running", total=1.0)

        def on_progress(t: float, total: float) -> None:
            progress.update(task, completed=t, total=total)

        def on_phase(name: str) -> None:
            progress.update(task, description=name)

        path = run_experiment(experiment, run_dir, on_progress=on_progress, on_phase=on_phase)
    _print_summary(path)
    if plot is not None:
        from harness.report.run_figure import plot_run

        plot_run(path, plot)
        console.print(f"plot saved to {plot}")
    status = (path / "status").read_text().strip()
    if status != "completed":
        raise typer.Exit(1)


def read_yaml_or_exit(file: Path, read_yaml: Any, error: type[Exception]) -> Any:
    try:
        return read_yaml(file)
    except error as exc:
        raise _fail(str(exc)) from None


def _print_summary(run_dir: Path) -> None:
    from harness.record import read_run_record
    from harness.summary import summarise

    summary = summarise(read_run_record(run_dir))
    table = Table(title=f"run record: {run_dir}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for name, value in summary.rows():
        table.add_row(name, value)
    console.print(table)


@app.command()
def validate(files: Annotated[list[Path], typer.Argument(help="experiment or matrix YAML files")]) -> None:
    """Check experiment/matrix files; exit 2 naming the file and field if one is wrong."""
    from harness.config import ConfigError, load_any

    bad = 0
    for file in files:
        try:
            matrix, cells = load_any(file)
        except ConfigError as exc:
            err.print(str(exc), highlight=False, markup=False)
            bad += 1
            continue
        kind = f"matrix {matrix.name}" if matrix else "experiment"
        console.print(f"{file}: ok ({kind}, {len(cells)} run(s))")
    if bad:
        raise typer.Exit(2)


@app.command()
def matrix(
    file: Annotated[Path, typer.Argument(help="matrix YAML")],
    results: Annotated[Path, typer.Option(help="results directory")] = Path("results"),
    workers: Annotated[int | None, typer.Option(help="parallel runs (default: cores for sim, 1 otherwise)")] = None,
    backend: Annotated[str | None, typer.Option(help="override every cell's backend")] = None,
    set_: Annotated[list[str], typer.Option("--set", help="dotted.field=value applied to every cell")] = [],  # noqa: B006
    dry_run: Annotated[bool, typer.Option(help="list the runs, run nothing")] = False,
) -> None:
    """Run every cell of a matrix (resumable: complete runs are skipped)."""
    from harness.config import ConfigError, Matrix, matrix_cells, read_yaml, validate_model
    from harness.matrix import run_cells, run_dir_for

    raw = read_yaml_or_exit(file, read_yaml, ConfigError)
    try:
        m: Matrix = validate_model(Matrix, raw, str(file))
        overrides = _parse_sets(set_)
        if backend is not None:
            overrides["backend"] = backend
        base = _nest(overrides, m.base)
        apply_local_defaults(base)
        m = m.model_copy(update={"base": base})
        cells = matrix_cells(m, str(file))
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    if dry_run:
        for cell in cells:
            console.print(f"{run_dir_for(results, m.name, cell)}")
        console.print(f"{len(cells)} run(s)")
        return
    failed = 0
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task(m.name, total=len(cells))

        def on_done(outcome: Any) -> None:
            nonlocal failed
            if outcome.status.startswith("failed"):
                failed += 1
                progress.console.print(f"[red]{outcome.run_id}: {outcome.status}[/]")
            progress.advance(task)

        outcomes = run_cells(cells, results, m.name, workers=workers, on_done=on_done)
    skipped = sum(o.status == "skipped" for o in outcomes)
    console.print(
        f"{len(outcomes)} run(s): {len(outcomes) - skipped - failed} ran, {skipped} already complete, "
        f"{failed} failed -> {results / m.name}"
    )
    if failed:
        raise typer.Exit(1)


def _nest(overrides: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    import copy

    from harness.config import set_path

    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        set_path(merged, key, value)
    return merged


@app.command()
def pattern(
    name: Annotated[str, typer.Argument(help="cosine random increasing decreasing convergence constant trace")],
    query: Annotated[str | None, typer.Option(help="use this query's thesis rates")] = None,
    scale: Annotated[float, typer.Option()] = 1.0,
    time_scale: Annotated[float, typer.Option()] = 1.0,
    seed: Annotated[int, typer.Option()] = 1,
    param: Annotated[list[str], typer.Option("--param", help="pattern parameter key=value")] = [],  # noqa: B006
    plot: Annotated[Path | None, typer.Option(help="save a PNG plot")] = None,
) -> None:
    """Print (and optionally plot) a load pattern."""
    from pydantic import ValidationError

    from workloads.patterns import PatternConfig, build_pattern

    try:
        cfg = PatternConfig(name=name, params=_parse_sets(param), scale=scale, time_scale=time_scale)  # type: ignore[arg-type]
        pat = build_pattern(cfg, seed, query)
    except (ValidationError, ValueError) as exc:
        raise _fail(f"pattern {name!r}: {exc}") from None
    table = Table(title=f"{name}: {pat.duration_s:.0f} s, max {pat.max_rate:,.0f} rec/s")
    table.add_column("t (s)", justify="right")
    table.add_column("rate (rec/s)", justify="right")
    step = max(1, len(pat.step_rates) // 20)
    for i in range(0, len(pat.step_rates), step):
        table.add_row(f"{i * pat.step_s:.0f}", f"{pat.step_rates[i]:,.0f}")
    console.print(table)
    if plot is not None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(8, 3))
        t = [i * pat.step_s / 60 for i in range(len(pat.step_rates))]
        ax.step(t, pat.step_rates, where="post")
        ax.set_xlabel("minutes")
        ax.set_ylabel("records/s")
        ax.set_title(f"{name} (seed {seed})")
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        console.print(f"plot saved to {plot}")


@app.command("list")
def list_things() -> None:
    """Autoscalers, queries and patterns this installation offers."""
    import autoscalers
    from harness.topology import available_queries
    from workloads.patterns import PARAMS

    console.print("autoscalers: " + ", ".join(autoscalers.available()))
    console.print("queries:     " + ", ".join(available_queries()))
    console.print("patterns:    " + ", ".join(PARAMS))


def _register_optional(module: str) -> None:
    """Command groups written in their own modules (local stack, analysis)."""
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):  # the group is not there yet, not a broken import
            return
        raise
    mod.register(app)


for _module in ("harness.backends.local.commands", "harness.analysis.commands", "harness.backends.k8s.commands",
                "harness.calibration.commands", "harness.fidelity.commands"):
    _register_optional(_module)


if __name__ == "__main__":
    app()
