"""`bench`: run experiments and matrices, check files, show patterns, manage the stack.

Exit codes: 0 success, 1 a run failed (or an internal error: one line, the traceback in a log
file), 2 bad input (nothing started, nothing written), 130 interrupted (Ctrl-C / SIGTERM).
"""

import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from typer.core import TyperGroup

# Only typer and rich at the top: every command imports what it uses (pandas, pyarrow, scipy, the local
# stack, ...) in its body, so `bench --help` and `bench list` start fast (benchmarks/bench_startup.py).

APP_SETTINGS: dict[str, Any] = {
    "pretty_exceptions_enable": False,
    # plain help: shows `[default: ...]` as written (Rich markup ate it) and starts without rich's help renderer
    "rich_markup_mode": None,
}

# Command groups written in their own modules, and the commands each adds. A module is imported (and its
# commands built) only when one of its commands runs or the whole list is asked for (`bench --help`,
# a name that is no command, shell completion): `bench list` or `bench run` pay for neither.
# tests/core/test_startup.py checks this table against what each module's `register` adds.
COMMAND_GROUPS: dict[str, tuple[str, ...]] = {
    "harness.backends.local.commands": ("up", "status", "down"),
    "harness.report.commands": ("analyze", "report"),
    "harness.report.compare_commands": ("compare", "runs"),
    "harness.backends.k8s.commands": ("k8s-manifests",),
    "harness.backends.k8s.testcluster.commands": ("k8s",),
    "harness.calibration.commands": ("calibrate",),
    "harness.fidelity.commands": ("fidelity",),
}


def _group_commands(module: str) -> dict[str, Any]:
    """The click commands a command-group module adds to `bench` (none if the module is not there)."""
    import typer.main

    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):  # the group is not there yet, not a broken import
            return {}
        raise
    scratch = typer.Typer(**APP_SETTINGS)
    mod.register(scratch)
    return dict(typer.main.get_group(scratch).commands)


class _Commands(MutableMapping[str, Any]):
    """`bench`'s commands: this module's, built by typer, then the command groups', built on first use.

    The order is the one typer gives when every group registers on the app: the commands of this module
    and of each group module in turn, then the sub-groups (`bench k8s ...`)."""

    def __init__(self, built: dict[str, Any]) -> None:
        self._built = built
        self._loaded: dict[str, dict[str, Any]] = {}

    def _load(self, module: str) -> None:
        if module not in self._loaded:
            self._loaded[module] = _group_commands(module)

    def _load_all(self) -> None:
        for module in COMMAND_GROUPS:
            self._load(module)

    def _ordered(self) -> dict[str, Any]:
        self._load_all()
        commands = dict(self._built)
        groups = [c for cmds in self._loaded.values() for c in cmds.items()]
        commands.update((n, c) for n, c in groups if not isinstance(c, TyperGroup))
        commands.update((n, c) for n, c in groups if isinstance(c, TyperGroup))
        return commands

    def __getitem__(self, name: str) -> Any:
        if name in self._built:
            return self._built[name]
        module = next((m for m, names in COMMAND_GROUPS.items() if name in names), None)
        if module is not None:
            self._load(module)
        for cmds in self._loaded.values():
            if name in cmds:
                return cmds[name]
        return self._ordered()[name]  # a name the table does not know: every group, then a KeyError

    def __setitem__(self, name: str, command: Any) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        self._ordered()  # the name may be in a group not loaded yet
        if name in self._built:
            del self._built[name]
            return
        for cmds in self._loaded.values():
            if name in cmds:
                del cmds[name]
                return
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._ordered())

    def __len__(self) -> int:
        return len(self._ordered())


def _flags_off_unless_given(params: list[Any]) -> None:
    """typer's own flags (`--help`, `--install-completion`, `--show-completion`) default to None, not False.

    typer converts every parameter's value through a pydantic validator it builds on first use, unless the
    value is already a bool: a None default makes it import pydantic and build three validators on every
    command (0.1-0.2 s, more than the rest of `bench list`). These flags are never handed to a command
    (expose_value False) and their callbacks act only on a true value, so False means what None meant."""
    for param in params:
        if getattr(param, "is_bool_flag", False) and not param.expose_value and param.default is None:
            param.default = False


class _BenchGroup(TyperGroup):
    """The `bench` group: the command-group modules are imported when one of their commands is needed, and
    a command that needs no pydantic for its own options does not import it (`_flags_off_unless_given`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commands = _Commands(dict(self.commands))

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        _flags_off_unless_given(params)
        return params

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        # the command's own --help option: built here with `bench`'s context, whose help option names
        # (-h, --help) its context inherits unless the command sets its own
        if command is not None and "help_option_names" not in (command.context_settings or {}):
            _flags_off_unless_given(command.get_params(ctx))
        return name, command, rest


app = typer.Typer(
    help="Benchmark stream-processing autoscalers on Kafka + Flink + Nexmark.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    cls=_BenchGroup,
    **APP_SETTINGS,
)
console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
JSON_HELP = "print one JSON document on stdout (tables, progress and logs go to stderr)"
QUIET_HELP = "print nothing but errors"

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


def apply_k8s_test_cluster(raw: dict[str, Any]) -> None:
    """A `--backend k8s` run that names no cluster uses the test cluster of `bench k8s up`, if it is up."""
    if raw.get("backend") != "k8s":
        return
    from harness.backends.k8s.testcluster.profile import apply_test_cluster_defaults

    apply_test_cluster_defaults(raw, say=lambda m: err.print(m, highlight=False, markup=False))


def _version(value: bool) -> None:
    if value:
        from harness import __version__

        typer.echo(f"bench (autoscaler-bench) {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    """Benchmark stream-processing autoscalers on Kafka + Flink + Nexmark."""


# Shell completion (`bench --install-completion`): the names a flag accepts, looked up when asked.
def _completer(names: Any) -> Any:
    def complete(incomplete: str) -> list[str]:
        return [n for n in names() if n.startswith(incomplete)]

    return complete


def _scaler_names() -> list[str]:
    import autoscalers

    return autoscalers.available()


def _query_names() -> list[str]:
    from harness.query_names import available_queries

    return available_queries()


def _pattern_names() -> list[str]:
    from workloads.pattern_names import PATTERN_NAMES

    return list(PATTERN_NAMES)


def _backend_names() -> list[str]:
    from harness.backends import BACKENDS

    return list(BACKENDS)


complete_scaler = _completer(_scaler_names)
complete_query = _completer(_query_names)
complete_pattern = _completer(_pattern_names)
complete_backend = _completer(_backend_names)


def _fail(message: str, code: int = 2) -> typer.Exit:
    err.print(f"[bold red]error:[/] {message}", highlight=False, markup=True)
    return typer.Exit(code)


def _parse_sets(sets: list[str], flag: str = "--set") -> dict[str, Any]:
    import yaml

    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item or not item.split("=", 1)[0].strip():
            raise _fail(f"{flag} {item!r}: expected dotted.key=value")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError as exc:
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise _fail(f"{flag} {item!r}: the value is not valid YAML ({first})") from None
    return out


@app.command()
def run(
    file: Annotated[Path | None, typer.Argument(help="experiment YAML (flags override it)")] = None,
    scaler: Annotated[str | None, typer.Option(help="autoscaler, e.g. ds2, dhalion, hpa-cpu (`bench list`)",
                                               autocompletion=complete_scaler)] = None,
    query: Annotated[str | None, typer.Option(help="Nexmark query: q1 q2 q3 q5 q8 q11",
                                              autocompletion=complete_query)] = None,
    pattern: Annotated[str | None, typer.Option(help="cosine random increasing decreasing convergence ...",
                                                autocompletion=complete_pattern)] = None,
    backend: Annotated[str | None, typer.Option(help="local (default), sim or k8s",
                                                autocompletion=complete_backend)] = None,
    scale: Annotated[float | None, typer.Option(help="multiply the pattern's rates")] = None,
    time_scale: Annotated[float | None, typer.Option(help="compress time: 10 plays 140 min in 14")] = None,
    duration: Annotated[float | None, typer.Option(help="stop after this many seconds")] = None,
    seed: Annotated[int | None, typer.Option()] = None,
    parallelism: Annotated[int | None, typer.Option(help="initial parallelism of every operator")] = None,
    set_: Annotated[list[str], typer.Option("--set", metavar="KEY=VALUE",
                                            help="dotted.field=value, e.g. loop.cooldown_s=60")] = [],  # noqa: B006
    fault: Annotated[list[str], typer.Option("--fault", metavar="KIND@T[+D]",
                                             help="inject a fault: KIND@T[+D] seconds, e.g. "
                                             "kill-taskmanager@300, stop-prometheus@600+60")] = [],  # noqa: B006
    results: Annotated[Path, typer.Option(help="results directory")] = Path("results"),
    plot: Annotated[Path | None, typer.Option(help="save a PNG of the run")] = None,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Run one experiment and print its summary table."""
    from harness.config import ConfigError, Experiment, expand_shorthand, read_yaml, set_path, validate_model

    _check_paths(results=results, plot=plot)
    raw: dict[str, Any] = {}
    source = "command line"
    if file is not None:
        loaded = read_yaml_or_exit(file, read_yaml, ConfigError)
        if isinstance(loaded, dict) and "base" in loaded:
            raise _fail(f"{file}: this is a matrix; use `bench matrix {file}`")
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise _fail(f"{file}: expected a mapping of experiment fields at the top level, "
                        f"got {type(loaded).__name__}")
        reps = loaded.get("repetitions", 1)
        if reps != 1:
            raise _fail(f"{file}: repetitions: {reps!r}: `bench run` does one run; "
                        f"`bench matrix {file}` runs every repetition (resumably)")
        raw = loaded
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
    apply_k8s_test_cluster(raw)
    if fault:
        faults: list[Any] = raw["faults"] if isinstance(raw.get("faults"), list) else []
        raw["faults"] = [*faults, *_parse_faults(fault)]
    if not isinstance(raw.get("name"), str):
        raw.setdefault("name", f"{_name_of(raw.get('autoscaler'))}-{raw.get('query')}-{_name_of(raw.get('pattern'))}")
    try:
        experiment: Experiment = validate_model(Experiment, raw, source)
    except ConfigError as exc:
        raise _fail(str(exc)) from None

    from harness.machine_output import machine_output

    with machine_output(as_json, quiet) as out:
        _run_and_report(experiment, results, plot, out)


def _run_and_report(experiment: Any, results: Path, plot: Path | None, out: Any) -> None:
    import datetime as dt

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from harness import interrupts
    from harness.runner import run_experiment

    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    run_dir = results / experiment.name / f"{experiment.backend}-s{experiment.seed}-{stamp}"
    console.print(
        f"[bold]{experiment.name}[/]: backend {experiment.backend}, query {experiment.query}, "
        f"pattern {experiment.pattern.name} (scale {experiment.pattern.scale}, "
        f"time scale {experiment.pattern.time_scale}), autoscaler {experiment.autoscaler.name}"
    )
    progress = Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:.0f}/{task.total:.0f} s"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
        disable=out.quiet,
    )
    task = progress.add_task("running", total=1.0)

    def on_progress(t: float, total: float) -> None:
        progress.update(task, completed=t, total=total)

    def on_phase(name: str) -> None:
        progress.update(task, description=name)

    def notice(text: str) -> None:
        progress.console.print(f"[yellow]{text}[/]")

    # real backends: a live panel here, and the same numbers for `bench status` in another shell
    live = None if experiment.backend == "sim" else _live_file(experiment, run_dir)
    try:
        with _display(progress, live), interrupts.handling(notice):
            path = run_experiment(experiment, run_dir, on_progress=on_progress, on_phase=on_phase, live=live)
    except (interrupts.Interrupted, KeyboardInterrupt):
        saved = (run_dir / "status").exists()
        where = f"record {run_dir} (status interrupted)" if saved else "no record written"
        teardown = "; the local stack was torn down" if experiment.backend == "local" else ""
        err.print(f"interrupted: {where}{teardown}", highlight=False, markup=False)
        raise typer.Exit(interrupts.EXIT_INTERRUPTED) from None
    finally:
        if live is not None:
            live.remove()
    if out.json:
        from harness.summary import run_document

        out.emit(run_document(path))
    if out.tables:
        _print_summary(path)
    if plot is not None:
        from harness.report.run_figure import plot_run

        plot_run(path, plot)
        if out.chatty:
            err.print(f"plot saved to {plot}", highlight=False, markup=False)
        if out.json:
            out.document["plot"] = str(plot)
    status = (path / "status").read_text().strip()
    if status != "completed":
        raise typer.Exit(1)


def _live_file(experiment: Any, run_dir: Path) -> Any:
    """The run's live-status file under the local work directory (where `bench status` looks)."""
    from harness.live import LiveFile

    return LiveFile.for_run(experiment.local.root, experiment, run_dir)


def _display(progress: Any, live: Any) -> Any:
    """The progress bar alone, or under the run's live panel (one rich Live draws both)."""
    if live is None:
        return progress
    from rich.console import Group
    from rich.live import Live

    from harness.live_view import live_panel

    class Panel:
        def __rich__(self) -> Any:
            return live_panel(live.status)

    return Live(Group(Panel(), progress), console=console, refresh_per_second=2)


def _name_of(value: Any) -> str:
    if isinstance(value, dict):
        value = value.get("name")
    return value if isinstance(value, str) else "x"


def _parse_faults(flags: list[str]) -> list[dict[str, Any]]:
    from harness.faults import FaultFlagError, parse_fault_flag

    try:
        return [parse_fault_flag(f) for f in flags]
    except FaultFlagError as exc:
        raise _fail(str(exc)) from None


def _check_paths(results: Path | None = None, plot: Path | None = None, writable: bool = True) -> None:
    """Output paths are checked before anything runs (a run must never die at its end over a path).

    `writable=False` for a dry run: it writes nothing, but a plan under a file is still a wrong path."""
    from harness.paths import PathError, check_output_dir, check_output_file

    try:
        if results is not None:
            check_output_dir(results, "--results", writable)
        if plot is not None:
            check_output_file(plot, "--plot")
    except PathError as exc:
        raise _fail(str(exc)) from None


def read_yaml_or_exit(file: Path, read_yaml: Any, error: type[Exception]) -> Any:
    try:
        return read_yaml(file)
    except error as exc:
        raise _fail(str(exc)) from None


def _print_summary(run_dir: Path) -> None:
    from rich.table import Table

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
    file: Annotated[Path, typer.Argument(help="matrix YAML (an experiment file is a one-cell matrix)")],
    results: Annotated[Path, typer.Option(help="results directory")] = Path("results"),
    workers: Annotated[int | None, typer.Option(
        "--workers", "--parallel", min=1,
        help="parallel runs (default: cores for sim, 1 otherwise; k8s cells get a namespace each)")] = None,
    backend: Annotated[str | None, typer.Option(help="override every cell's backend",
                                                autocompletion=complete_backend)] = None,
    set_: Annotated[list[str], typer.Option("--set", metavar="KEY=VALUE",
                                            help="dotted.field=value applied to every cell")] = [],  # noqa: B006
    fault: Annotated[list[str], typer.Option("--fault", metavar="KIND@T[+D]",
                                             help="inject in every cell: KIND@T[+D]")] = [],  # noqa: B006
    only: Annotated[list[str], typer.Option("--only", metavar="FIELD=VALUE", help="run only cells whose FIELD=VALUE "
                                                           "(dotted, e.g. autoscaler=ds2); repeatable")] = [],  # noqa: B006
    rerun_stale: Annotated[bool, typer.Option("--rerun-stale", help="replace records made with another "
                                                                    "configuration")] = False,
    retry_failed: Annotated[bool, typer.Option("--retry-failed", help="run failed runs again "
                                                                      "(kept as data otherwise)")] = False,
    dry_run: Annotated[bool, typer.Option(help="show each run's state (done / to do / stale / failed / "
                                               "interrupted), run nothing")] = False,
    as_json: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)] = False,
) -> None:
    """Run every cell of a matrix, resumably: a run counts as done when its record is complete and was
    made with the cell's configuration (config hash)."""
    from harness.machine_output import machine_output

    with machine_output(as_json, quiet) as out:
        _matrix(file, results, workers, backend, set_, fault, only, rerun_stale, retry_failed, dry_run, out)


def _matrix(file: Path, results: Path, workers: int | None, backend: str | None, set_: list[str], fault: list[str],
            only: list[str], rerun_stale: bool, retry_failed: bool, dry_run: bool, out: Any) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from harness import interrupts
    from harness.config import ConfigError, Matrix, is_matrix, matrix_cells, read_yaml, validate_model
    from harness.matrix import (
        CellState,
        MatrixBusy,
        check_only_fields,
        clean_leftovers,
        describe_stale,
        matrix_lock,
        parse_only,
        plan_cells,
        run_cells,
        runnable,
        select,
    )

    _check_paths(results=results, writable=not dry_run)
    raw = read_yaml_or_exit(file, read_yaml, ConfigError)
    try:
        if isinstance(raw, dict) and not is_matrix(raw):
            raw = _experiment_as_matrix(raw)
        m: Matrix = validate_model(Matrix, raw, str(file))
        overrides = _parse_sets(set_)
        if backend is not None:
            overrides["backend"] = backend
        base = _nest(overrides, m.base)
        if fault:
            base["faults"] = [*(base.get("faults") or []), *_parse_faults(fault)]
        apply_local_defaults(base)
        apply_k8s_test_cluster(base)
        m = m.model_copy(update={"base": base})
        cells = matrix_cells(m, str(file))
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    try:
        wanted = parse_only(only)
        check_only_fields(cells, wanted)
    except ValueError as exc:
        raise _fail(str(exc)) from None
    plans = select(plan_cells(cells, results, m.name), wanted)
    if not plans:
        raise _fail(f"--only {' '.join(only)}: selects none of the {len(cells)} run(s) of {file}")
    counts = {state: sum(p.state == state for p in plans) for state in CellState}
    summary = ", ".join(f"{n} {state.value}" for state, n in counts.items() if n)
    if dry_run and out.json:
        todo_ids = {p.run_id for p in runnable(plans, rerun_stale, retry_failed)}
        out.emit({"matrix": m.name, "results": str(results / m.name), "dry_run": True,
                  "counts": {state.value: n for state, n in counts.items()},
                  "runs": [{"run_id": p.run_id, "state": p.state.value, "would_run": p.run_id in todo_ids,
                            "detail": p.why} for p in plans]})
        return
    if dry_run:
        table = Table(title=f"{m.name}: {len(plans)} run(s) under {results / m.name}")
        for col in ("run", "state", "detail"):
            table.add_column(col)
        todo_ids = {p.run_id for p in runnable(plans, rerun_stale, retry_failed)}
        for p in plans:
            detail = p.why
            if p.state == CellState.STALE and p.differences:
                detail = "; ".join(f"{k}: {a!r} -> {b!r}" for k, a, b in p.differences[:3])
            mark = " (would run)" if p.run_id in todo_ids and p.state != CellState.TODO else ""
            table.add_row(p.run_id, p.state.value + mark, detail)
        console.print(table)
        console.print(summary)
        return
    stale = [p for p in plans if p.state == CellState.STALE]
    if stale and not rerun_stale:
        lines = [f"{file}: {len(stale)} run(s) under {results / m.name} were made with another configuration "
                 "(fields: old -> new):", *describe_stale(plans),
                 "nothing ran; --rerun-stale replaces them, or use another --results directory"]
        err.print("\n".join(lines), highlight=False, markup=False)
        raise typer.Exit(2)
    todo = runnable(plans, rerun_stale, retry_failed)
    failed_kept = counts[CellState.FAILED] if not retry_failed else 0
    failed = 0
    live: dict[str, Any] = {}

    def notice(text: str) -> None:
        progress_bar = live.get("progress")
        if progress_bar is None:
            err.print(text, highlight=False, markup=False)
            return
        progress_bar.update(live["task"], description=f"{m.name} (stopping)")
        progress_bar.console.print(f"[yellow]{text}[/]")

    try:
        with interrupts.handling(notice), matrix_lock(results / m.name):
            clean_leftovers(results / m.name)
            with Progress(
                TextColumn("[progress.description]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=console,
                disable=out.quiet,
            ) as progress:
                task = progress.add_task(m.name, total=len(todo))
                live.update(progress=progress, task=task)

                def on_done(outcome: Any) -> None:
                    nonlocal failed
                    if outcome.status.startswith("failed"):
                        failed += 1
                        progress.console.print(f"[red]{outcome.run_id}: {outcome.status}[/]")
                    elif outcome.status.startswith("interrupted"):
                        progress.console.print(f"[yellow]{outcome.run_id}: {outcome.status}[/]")
                    progress.advance(task)

                outcome = run_cells(todo, workers=workers, on_done=on_done)
                live.clear()
    except MatrixBusy as exc:
        raise _fail(str(exc)) from None
    after = plan_cells([p.cell for p in plans], results, m.name)
    done = sum(p.state == CellState.DONE for p in after)
    left = len(runnable(after))
    if outcome.interrupted:
        what = f"{left} left: rerun to resume" if left else "nothing left to run"
        err.print(f"interrupted: {done} done, {what}", highlight=False, markup=False)
        raise typer.Exit(interrupts.EXIT_INTERRUPTED)
    ran = len(outcome.outcomes)
    skipped = counts[CellState.DONE]
    note = f", {failed_kept} failed earlier (kept; --retry-failed reruns them)" if failed_kept else ""
    if out.json:
        out.emit({"matrix": m.name, "results": str(results / m.name), "dry_run": False, "runs": len(plans),
                  "ran": ran - failed, "already_complete": skipped, "failed": failed, "failed_earlier": failed_kept,
                  "outcomes": [{"run_id": o.run_id, "status": o.status} for o in outcome.outcomes],
                  "states": [{"run_id": p.run_id, "state": p.state.value} for p in after]})
    console.print(
        f"{len(plans)} run(s): {ran - failed} ran, {skipped} already complete, {failed} failed{note} "
        f"-> {results / m.name}"
    )
    if failed:
        raise typer.Exit(1)


def _experiment_as_matrix(raw: dict[str, Any]) -> dict[str, Any]:
    """An experiment file is a one-cell matrix named after it, with its own repetitions."""
    base = {k: v for k, v in raw.items() if k != "repetitions"}
    out: dict[str, Any] = {"name": raw.get("name"), "base": base}
    if "repetitions" in raw:
        out["repetitions"] = raw["repetitions"]
    return out


def _nest(overrides: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    import copy

    from harness.config import set_path

    merged = copy.deepcopy(base)
    for key, value in overrides.items():
        set_path(merged, key, value)
    return merged


@app.command()
def pattern(
    name: Annotated[str, typer.Argument(help="cosine random increasing decreasing convergence constant trace",
                                        autocompletion=complete_pattern)],
    query: Annotated[str | None, typer.Option(help="use this query's thesis rates",
                                              autocompletion=complete_query)] = None,
    scale: Annotated[float, typer.Option()] = 1.0,
    time_scale: Annotated[float, typer.Option()] = 1.0,
    seed: Annotated[int, typer.Option()] = 1,
    param: Annotated[list[str], typer.Option("--param", metavar="KEY=VALUE",
                                             help="pattern parameter key=value")] = [],  # noqa: B006
    plot: Annotated[Path | None, typer.Option(help="save a PNG plot")] = None,
) -> None:
    """Print (and optionally plot) a load pattern."""
    from pydantic import ValidationError
    from rich.table import Table

    from harness.errors import nested_errors
    from workloads.patterns import PatternConfig, build_pattern

    _check_paths(plot=plot)
    params = _parse_sets(param, "--param")
    try:
        cfg = PatternConfig(name=name, params=params, scale=scale, time_scale=time_scale)  # type: ignore[arg-type]
        pat = build_pattern(cfg, seed, query)
    except ValidationError as exc:
        raise _fail(f"pattern {name!r}: {nested_errors(exc, '', PatternConfig)}") from None
    except ValueError as exc:
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
def list_things(
    details: Annotated[bool, typer.Option("--details", help="each autoscaler's and pattern's parameters: "
                                                            "type, default, unit, description, paper")] = False,
) -> None:
    """Autoscalers, queries and patterns this installation offers."""
    import autoscalers
    from harness.query_names import available_queries
    from workloads.pattern_names import PATTERN_NAMES

    if not details:  # names only: no config model is built (and plain text: no markup, emoji or highlighting)
        for line in ("autoscalers: " + ", ".join(autoscalers.available()),
                     "queries:     " + ", ".join(available_queries()),
                     "patterns:    " + ", ".join(PATTERN_NAMES)):
            console.print(line, markup=False, emoji=False, highlight=False)
        return
    from harness.listing import describe_autoscaler, describe_pattern

    for name in autoscalers.available():
        _print_described(describe_autoscaler(name), "autoscaler")
    console.print("queries: " + ", ".join(available_queries()), highlight=False)
    for name in PATTERN_NAMES:
        _print_described(describe_pattern(name), "pattern")


def _print_described(item: Any, kind: str) -> None:
    """One block per autoscaler or pattern: `name: paper`, where the defaults come from, one line per
    parameter (`name  type = default unit  description`)."""
    lines = [f"{kind} {item.name}" + (f": {item.reference}" if item.reference else "")]
    if item.defaults_from:
        lines.append(f"  defaults: {item.defaults_from}")
    width = max((len(p.name) for p in item.parameters), default=0)
    for p in item.parameters:
        unit = f" {p.unit}" if p.unit else ""
        note = f"  {p.description}" if p.description and p.description != p.unit else ""  # no "records/s  records/s"
        lines.append(f"  {p.name:<{width}}  {p.type} = {p.default}{unit}{note}")
    if not item.parameters:
        lines.append("  (no parameters)")
    console.print("\n".join(lines) + "\n", highlight=False, markup=False)


@app.command()
def reproduce(
    paper: Annotated[str, typer.Argument(help="gesscale, mpc, mead or flink-er")],
    backend: Annotated[str, typer.Option(help="sim (default), local or k8s")] = "sim",
    repetitions: Annotated[int | None, typer.Option(help="repetitions per cell (default: each file's own)")] = None,
    duration: Annotated[float | None, typer.Option(help="cut every run at this many seconds (a quick look)")] = None,
    results: Annotated[Path, typer.Option(help="results directory")] = Path("results"),
    out: Annotated[Path, typer.Option(help="where the claims table goes")] = Path("docs/reproductions"),
    workers: Annotated[int | None, typer.Option(help="parallel runs (default: cores for sim, 1 otherwise)")] = None,
    rerun_stale: Annotated[bool, typer.Option("--rerun-stale", help="replace records made with another "
                                                                    "configuration")] = False,
) -> None:
    """Run a seed paper's experiments, analyse them and print and write its claims table (resumable)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from harness import interrupts
    from harness.config import ConfigError
    from harness.matrix import MatrixBusy
    from harness.reproduce.run import Options, load_matrices, paper_or_error, run_paper, write_report

    if backend not in ("sim", "local", "k8s"):
        raise _fail(f"--backend {backend!r}: valid choices: sim, local, k8s")
    if repetitions is not None and repetitions < 1:
        raise _fail("--repetitions must be at least 1")
    command = f"bench reproduce {paper}" + (f" --backend {backend}" if backend != "sim" else "")
    command += f" --repetitions {repetitions}" if repetitions else ""
    command += f" --duration {duration:g}" if duration else ""
    command += f" --results {results}" if results != Path("results") else ""
    command += f" --workers {workers}" if workers else ""
    command += " --rerun-stale" if rerun_stale else ""
    options = Options(backend=backend, repetitions=repetitions, duration_s=duration, results=results,
                      workers=workers, rerun_stale=rerun_stale, command=command)
    try:
        load_matrices(paper_or_error(paper), options, apply_local_defaults)  # every file checked before any run
    except ConfigError as exc:
        raise _fail(str(exc)) from None
    _check_paths(results=results)
    try:
        with interrupts.handling(lambda text: err.print(text, highlight=False, markup=False)), \
                Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                         TimeElapsedColumn(), console=console) as progress:
            task = progress.add_task(f"reproduce {paper}", total=None)

            def on_done(outcome: Any) -> None:
                if outcome.status.startswith(("failed", "interrupted")):
                    progress.console.print(f"[red]{outcome.run_id}: {outcome.status}[/]")
                progress.advance(task)

            rep = run_paper(paper, options, apply_local_defaults, on_done)
    except (ConfigError, MatrixBusy) as exc:
        raise _fail(str(exc)) from None
    if rep.interrupted:
        err.print("interrupted: rerun the same command to resume; no claims table written", highlight=False,
                  markup=False)
        raise typer.Exit(interrupts.EXIT_INTERRUPTED)
    table = Table(title=f"{rep.paper.title} - {backend}")
    for col in ("claim (section)", "paper", "harness (95 % CI)", "n", "reproduced"):
        table.add_column(col)
    for o in rep.outcomes:
        table.add_row(f"{o.claim} ({o.section})", o.paper, o.harness, str(o.n), str(o.verdict))
    console.print(table)
    for path in write_report(rep, options, out):
        console.print(f"wrote {path}")
    if rep.failed:
        raise typer.Exit(1)


def crash_log_dir() -> Path:
    """Where an unexpected error's traceback goes (`BENCH_LOG_DIR`, else the system temp dir)."""
    import tempfile

    return Path(os.environ.get("BENCH_LOG_DIR") or Path(tempfile.gettempdir()) / "bench-logs")


def _log_crash(exc: BaseException) -> Path | None:
    import datetime as dt
    import traceback

    text = "".join(traceback.format_exception(exc))
    stamp = dt.datetime.now().strftime("%Y%m%dT%H%M%S")
    try:
        d = crash_log_dir()
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"bench-{stamp}-{os.getpid()}.log"
        path.write_text(f"bench {' '.join(sys.argv[1:])}\n\n{text}")
        return path
    except OSError:
        return None


def main(argv: list[str] | None = None) -> None:
    """The `bench` entry point: no traceback reaches the user.

    Bad flags exit 2 with one line naming the flag; an unexpected error prints one line and the file
    holding its traceback, and exits 1; an interrupt exits 130."""
    from harness import interrupts

    # pydantic looks for plugins in every installed package's metadata the first time it builds a model
    # (tens of ms at each start); bench uses none. An explicit PYDANTIC_DISABLE_PLUGINS setting wins.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    try:
        with interrupts.outside_commands():
            code = app(args=argv, standalone_mode=False, prog_name="bench")
    except (KeyboardInterrupt, interrupts.Interrupted):
        err.print("interrupted", highlight=False, markup=False)
        sys.exit(interrupts.EXIT_INTERRUPTED)
    except Exception as exc:  # noqa: BLE001 - the one place that turns a bug into one line and a log file
        if type(exc).__name__ == "Abort":
            err.print("interrupted", highlight=False, markup=False)
            sys.exit(interrupts.EXIT_INTERRUPTED)
        exit_code = getattr(exc, "exit_code", None)
        if hasattr(exc, "format_message") and isinstance(exit_code, int):
            # a usage error (bad flag, bad value): Typer/Click name the flag; one line, exit 2
            ctx = getattr(exc, "ctx", None)
            path = getattr(ctx, "command_path", "") if ctx is not None else ""
            where = f"{path}: " if path else ""
            err.print(f"error: {where}{exc.format_message()}".replace("\n", " "), highlight=False, markup=False)
            sys.exit(exit_code)
        log = _log_crash(exc)
        where = f"full traceback in {log}" if log else "could not write the traceback to a log file"
        first = str(exc).splitlines()[0] if str(exc) else ""
        err.print(f"internal error: {type(exc).__name__}: {first} ({where})", highlight=False, markup=False)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
