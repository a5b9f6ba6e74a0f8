"""`bench up`, `bench status`, `bench down`: the local stack from the command line.

Exit codes: 0 ok; 1 the stack failed (a StackError names the missing piece: java, a port, a download,
a service that did not become healthy); 3 `status` found a service down.
"""

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

if TYPE_CHECKING:  # the stack (requests, confluent-kafka, ...) is imported by the commands that use it
    from rich.table import Table

    from harness.backends.local.errors import StackError
    from harness.backends.local.stack import LocalStack

console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

WorkdirOpt = Annotated[Path, typer.Option(help="work directory: configs, data, logs, pidfiles")]
OffsetOpt = Annotated[int, typer.Option(help="added to every default port (run several stacks side by side)")]


def _stack(workdir: Path, port_offset: int, **extra: object) -> "LocalStack":
    """The stack of these flags; a bad flag exits 2 naming it before anything starts."""
    from pydantic import ValidationError

    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack
    from harness.errors import nested_errors
    from harness.paths import PathError, check_output_dir

    flags = {"workdir": "--workdir", "port_offset": "--port-offset", "taskmanager_cpu_quota": "--cpu"}
    try:
        check_output_dir(workdir, "--workdir")
        return LocalStack(LocalConfig(workdir=workdir, port_offset=port_offset, **extra))  # type: ignore[arg-type]
    except PathError as exc:
        err.print(f"error: {exc}", highlight=False, markup=False)
        raise typer.Exit(2) from None
    except ValidationError as exc:
        text = nested_errors(exc, "")
        for field, flag in flags.items():
            text = text.replace(f"{field}:", f"{flag}:")
        err.print(f"error: {text}", highlight=False, markup=False)
        raise typer.Exit(2) from None


def _die(exc: "StackError") -> typer.Exit:
    err.print(f"[bold red]error[/] [bold]{exc.piece}[/]: {exc.message}", highlight=False)
    return typer.Exit(1)


def status_table(stack: "LocalStack") -> "tuple[Table, bool]":
    from rich.table import Table

    st = stack.status()
    table = Table(title=f"local stack ({stack.root})")
    for col in ("service", "state", "pid", "port", "healthy", "detail"):
        table.add_column(col)
    for s in st.services:
        state = "[green]running[/]" if s.running else "[red]stopped[/]"
        healthy = "[green]yes[/]" if s.healthy else "[red]no[/]"
        table.add_row(s.name, state, str(s.pid or "-"), str(s.port or "-"), healthy, s.detail)
    return table, st.healthy


def disk_line(stack: "LocalStack") -> str:
    """`stack directory <path>: <size>; install cache <path>: <size>`."""
    use = stack.disk_usage()
    return (f"stack directory {stack.root}: {_size(use['stack'])}; "
            f"install cache {stack.cfg.install_root}: {_size(use['cache'])}")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.2f} GB"


def submit_query(stack: "LocalStack", query: str) -> str | None:
    """Build the job jar and run `query` at parallelism 1 per operator, if the queries module exists."""
    try:
        jobjar = importlib.import_module("harness.backends.local.jobjar")
    except ImportError:
        err.print("[yellow]no job jar module (harness.backends.local.jobjar) yet: not submitting a job[/]")
        return None
    from harness.topology import load_topology

    topo = load_topology(query)
    parallelism = {name: 1 for name in topo.names}
    stack.ensure_topics(list(topo.topics), topo.partitions)
    jar = jobjar.ensure_jar()
    main_class, args = jobjar.job_command(query, stack.kafka_bootstrap, parallelism)
    return stack.submit_job(Path(jar), main_class, list(args))


def wait_running(stack: "LocalStack", job: str) -> bool:
    """True once every subtask of `job` runs (False after the start-up timeout)."""
    import time

    from harness.backends.flink_rest import FlinkRestError

    deadline = time.monotonic() + stack.cfg.startup_timeout_s
    while time.monotonic() < deadline:
        try:
            if stack.rest.job(job).running:
                return True
        except FlinkRestError:  # the job is not listed yet
            pass
        time.sleep(0.5)
    return False


def register(app: typer.Typer) -> None:
    """Add `up`, `status` and `down` to a Typer app (the main `bench` app mounts them)."""

    @app.command()
    def up(
        taskmanagers: Annotated[int, typer.Option(min=0, help="task managers to start")] = 1,
        workdir: WorkdirOpt = Path(".bench"),
        port_offset: OffsetOpt = 0,
        cpu: Annotated[float | None, typer.Option(help="CPU quota per task manager (cgroup)")] = None,
        query: Annotated[str | None, typer.Option(help="also build the job jar and run this query")] = None,
    ) -> None:
        """Install what is missing, start Kafka, Flink, Prometheus (and a query job); wait until healthy."""
        from harness.backends.local.errors import StackError

        extra = {"taskmanager_cpu_quota": cpu} if cpu is not None else {}
        if query is not None:
            from harness.topology import available_queries

            if query not in available_queries():
                err.print(f"error: --query {query!r}: valid choices: {', '.join(available_queries())}",
                          highlight=False, markup=False)
                raise typer.Exit(2)
        stack = _stack(workdir, port_offset, **extra)
        needed = taskmanagers
        if query:
            from harness.topology import load_topology

            # one slot per task manager and one slot-sharing group per operator: one TM per operator
            needed = max(taskmanagers, len(load_topology(query).names))
        try:
            with console.status("bringing the local stack up") as spinner:
                stack.up(needed, progress=lambda m: spinner.update(m), keep_boost=bool(query))
            if query:
                with console.status(f"submitting {query}"):
                    job = submit_query(stack, query)
                if job:
                    with console.status(f"waiting for {query} to run"):
                        running = wait_running(stack, job)
                    console.print(f"{query} {'running' if running else 'submitted (not running yet)'} as job {job}")
            stack.end_startup_boost()
        except StackError as exc:
            raise _die(exc) from exc
        except (RuntimeError, ValueError) as exc:  # job jar build (JobJarError) or bad query arguments
            raise _die(StackError(f"query {query}", str(exc))) from exc
        table, _ = status_table(stack)
        console.print(table)
        console.print(f"Flink {stack.rest_url}  Prometheus {stack.prometheus_url}  Kafka {stack.kafka_bootstrap}")
        console.print("versions: " + ", ".join(f"{k} {v}" for k, v in stack.versions().items()))

    @app.command()
    def status(workdir: WorkdirOpt = Path(".bench"), port_offset: OffsetOpt = 0) -> None:
        """Show every service of the local stack: running, pid, port, healthy; its disk use; and the runs in
        progress (the live panel `bench run` shows: rates, task managers, latencies, last decision)."""
        from harness.live import running
        from harness.live_view import live_panel

        stack = _stack(workdir, port_offset)
        table, healthy = status_table(stack)
        console.print(table)
        console.print(disk_line(stack), highlight=False)
        runs = running(stack.cfg.root)
        for live in runs:
            console.print(live_panel(live))
        if not runs:
            console.print("no run in progress", highlight=False)
        if not healthy:
            raise typer.Exit(3)

    @app.command()
    def down(
        workdir: WorkdirOpt = Path(".bench"),
        port_offset: OffsetOpt = 0,
        purge: Annotated[bool, typer.Option("--purge", help="also remove the work directory: data, logs, configs "
                                                            "(the cached installs stay)")] = False,
    ) -> None:
        """Stop every process of the local stack; leaves none behind, and the work directory at its bounded size."""
        stack = _stack(workdir, port_offset)
        with console.status("stopping the local stack"):
            stack.down(purge=purge)
        left = stack.status().running
        if left:
            err.print(f"[red]still running:[/] {', '.join(s.name for s in left)}")
            raise typer.Exit(1)
        console.print("local stack stopped" + ("; work directory removed" if purge else ""))
        console.print(disk_line(stack), highlight=False)
