"""`bench calibrate`: measure the queries on the local stack and write the simulator's profiles.

Resumable: every query's recorded samples land in the state directory as soon as it is measured;
a re-run measures only the queries still missing there and refits all of them (`--refit` measures
nothing). Exit codes: 0 ok, 1 a measurement failed, 2 bad input.
"""

import datetime as dt
import math
import os
import re
import shlex
import sys
import time
import traceback
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from harness.vocabulary import TaskManagerJit

console = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ALL_QUERIES = ("q1", "q2", "q3", "q5", "q8", "q11")
QUICK_QUERIES = ("q1", "q11")


def cpu_model_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine()


def wait_quiet(max_load: float, max_wait_s: float, say: Any) -> tuple[float, float, float]:
    """Wait (up to `max_wait_s`) until the 1-minute load average is below `max_load`; return the loads."""
    deadline = time.monotonic() + max_wait_s
    while True:
        load = os.getloadavg()
        if load[0] < max_load or time.monotonic() >= deadline:
            return load
        say(f"host load {load[0]:.1f} >= {max_load:g}: waiting for a quieter moment")
        time.sleep(min(20.0, max(1.0, deadline - time.monotonic())))


def _estimate(topology: Any, quota: float) -> tuple[dict[str, float], dict[str, float]]:
    """Capacities (records/s per subtask at share 1.0) and selectivities to plan the load with: a previous
    calibration if there is one, else the first guess scaled to the quota."""
    from harness.backends.sim.costs import FIRST_GUESS_CPU
    from harness.calibrated_profile import load_profile

    prof = load_profile(topology.query, cores=quota)
    if prof is not None:
        cap = {n: o.capacity_fit.capacity(quota * o.cpu.saturated_fraction) for n, o in prof.operators.items()}
        sel = {n: o.selectivity for n, o in prof.operators.items()}
        if all(v > 0 for v in cap.values()):
            return cap, sel
    return ({o.name: o.capacity * quota / FIRST_GUESS_CPU for o in topology.operators},
            {o.name: o.selectivity for o in topology.operators})


def register(app: typer.Typer) -> None:
    @app.command()
    def calibrate(
        query: Annotated[list[str], typer.Option(
            "--query", metavar="QUERY",
            help="query to calibrate (repeat); default: all six, or q1 and q11 with --quick")] = [],  # noqa: B006
        parallelisms: Annotated[str, typer.Option(help="comma-separated parallelisms of the bottleneck to "
                                                       "measure overloaded (1 always)")] = "1",
        quick: Annotated[bool, typer.Option(
            help="shorter phases, no reactive rescale (q1 + q11 in <= 10 min)")] = False,
        quota: Annotated[float, typer.Option(
            help="task-manager CPU quota (cores) to calibrate at: one profile per quota, a sim run uses the "
                 "nearest to its task managers' CPUs")] = 0.25,
        jit: Annotated[TaskManagerJit, typer.Option(
            help="the task managers' JIT (local.taskmanager_jit): measure with the one the runs use")
                       ] = TaskManagerJit.C1,
        taskmanager_memory: Annotated[str | None, typer.Option(
            help="the task managers' process memory (local.taskmanager_memory, e.g. 1536m; default the local "
                 "stack's): a query whose heap state outgrows it fails its rescales (q5, q8 at 768m)")] = None,
        state_dir: Annotated[Path, typer.Option(help="recorded samples (resume from here)")] = Path(
            ".bench/calibration"),
        out: Annotated[Path | None, typer.Option(help="profile directory (default queries/topologies/calibrated)")
                       ] = None,
        workdir: Annotated[Path, typer.Option(help="local stack work directory")] = Path(".bench/calib-stack"),
        port_offset: Annotated[int, typer.Option(help="added to every port of the stack")] = 7000,
        time_scale: Annotated[float, typer.Option(help="multiply every phase's duration (tests: 0.5)")] = 1.0,
        refit: Annotated[bool, typer.Option(help="measure nothing: refit the profiles from recorded samples")
                         ] = False,
        fresh: Annotated[bool, typer.Option(help="discard recorded samples of these queries first")] = False,
        wait_quiet_load: Annotated[float | None, typer.Option(
            "--wait-quiet", help="before each query, wait until the 1-min load average is below this")] = None,
        wait_max_s: Annotated[float, typer.Option(help="give up waiting for quiet after this many seconds")] = 1800,
        seed: Annotated[int, typer.Option()] = 1,
    ) -> None:
        """Measure capacities, costs, readings, start-up and rescale downtime on the local stack; write
        the simulator's calibrated profiles (queries/topologies/calibrated/<q>.cpu-<quota>.yaml)."""
        from harness.topology import available_queries, load_topology

        queries = list(query) or list(QUICK_QUERIES if quick else ALL_QUERIES)
        unknown = [q for q in queries if q not in available_queries()]
        if unknown:
            err.print(f"[bold red]error:[/] --query: unknown {unknown}; "
                      f"valid choices: {', '.join(available_queries())}")
            raise typer.Exit(2)
        try:
            pars = tuple(sorted({1, *(int(x) for x in parallelisms.split(",") if x.strip())}))
            if any(p < 1 for p in pars):
                raise ValueError
        except ValueError:
            err.print(f"[bold red]error:[/] --parallelisms {parallelisms!r}: expected positive integers like 1,2")
            raise typer.Exit(2) from None
        if not 0 < quota <= 8 or time_scale <= 0:
            err.print("[bold red]error:[/] --quota must be in (0, 8] cores and --time-scale > 0")
            raise typer.Exit(2)
        if taskmanager_memory is not None and not re.fullmatch(r"[1-9][0-9]*(m|mb|g|gb)", taskmanager_memory.lower()):
            err.print(f"[bold red]error:[/] --taskmanager-memory {taskmanager_memory!r}: expected a size like 1536m "
                      "or 2g (Flink's taskmanager.memory.process.size)")
            raise typer.Exit(2)
        started = time.monotonic()
        mode = (f"{'quick' if quick else 'full'}-q{quota:g}" + (f"-x{time_scale:g}" if time_scale != 1.0 else "")
                + ("" if jit is TaskManagerJit.TIERED else f"-{jit.value}"))
        root = state_dir / mode
        code = _run(queries, pars, quick, quota, jit, root, out, workdir, port_offset, time_scale, refit, fresh,
                    wait_quiet_load, wait_max_s, seed, load_topology, taskmanager_memory)
        console.print(f"calibration took {(time.monotonic() - started) / 60:.1f} min (state in {root})")
        if code:
            raise typer.Exit(code)


def _run(queries: list[str], pars: tuple[int, ...], quick: bool, quota: float, jit: TaskManagerJit, root: Path,
         out: Path | None, workdir: Path, port_offset: int, time_scale: float, refit: bool, fresh: bool,
         wait_load: float | None, wait_max_s: float, seed: int, load_topology: Any,
         memory: str | None = None) -> int:
    import shutil

    from harness.calibration.measure import Measurement, QueryCalibration
    from harness.calibration.plan import plan_for

    todo = []
    for q in queries:
        qdir = root / q
        if fresh and qdir.exists():
            shutil.rmtree(qdir)
        if not Measurement.complete(qdir):
            todo.append(q)
    if refit:
        missing = todo
        todo = []
        if missing:
            err.print(f"[yellow]no recorded samples for {missing} under {root}: not refitted[/]")
    plans = {q: plan_for(load_topology(q), quick, pars, time_scale) for q in todo}
    failed = 0
    if todo:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        from harness.backends.local.config import LocalConfig
        from harness.backends.local.errors import StackError
        from harness.backends.local.stack import LocalStack
        from harness.host_speed import sha256_mb_per_cpu_s

        local = LocalConfig(workdir=workdir, port_offset=port_offset, taskmanager_cpu_quota=quota,
                            taskmanager_jit=jit, probe_reporter=True,
                            **({"taskmanager_memory": memory} if memory else {}))
        stack = LocalStack(local)
        total = 60.0 + sum(p.estimate_s for p in plans.values())
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                      TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(), TimeRemainingColumn(),
                      console=console) as progress:
            task = progress.add_task("bringing the local stack up", total=total)

            def say(msg: str) -> None:
                progress.update(task, description=msg)

            def tick(seconds: float) -> None:
                progress.advance(task, seconds)

            try:
                t0 = time.monotonic()
                stack.ensure_installed(say)
                stack.up(taskmanagers=1, progress=say)
                progress.advance(task, min(60.0, time.monotonic() - t0))
                for q in todo:
                    load = wait_quiet(wait_load, wait_max_s, say) if wait_load is not None else os.getloadavg()
                    topo = load_topology(q)
                    cap, sel = _estimate(topo, quota)
                    cal = QueryCalibration(stack, topo, plans[q], quota, cap, sel, seed=seed, say=say, tick=tick,
                                           partitions=8)
                    t_q = time.monotonic()
                    try:
                        m = cal.run()
                    except Exception as exc:  # noqa: BLE001 - one query failing must not lose the others
                        failed += 1
                        import logging  # here: `bench --help` loads this module and needs no logging

                        where = traceback.extract_tb(exc.__traceback__)[-1]
                        logging.getLogger(__name__).exception("%s: calibration failed", q)
                        progress.console.print(f"[red]{q}: calibration failed: {type(exc).__name__}: {exc} "
                                               f"(at {where.filename}:{where.lineno})[/]")
                        continue
                    m.facts["load_before"] = list(load)
                    m.facts["query_wall_s"] = time.monotonic() - t_q
                    m.facts["plan"] = {"quick": quick, "parallelisms": list(pars), "time_scale": time_scale}
                    m.facts["taskmanager_jit"] = jit.value
                    m.facts["taskmanager_memory"] = local.taskmanager_memory
                    m.facts["host_speed_sha256_mb"] = sha256_mb_per_cpu_s()  # this machine's, beside its samples
                    m.facts["command"] = _command(queries, quick)
                    m.save(root / q)
                    progress.console.print(f"{q}: measured in {(time.monotonic() - t_q) / 60:.1f} min "
                                           f"(host load before {load[0]:.1f}, during {m.host.load1.mean():.1f})")
            except StackError as exc:
                progress.console.print(f"[red]local stack: {exc.piece}: {exc.message}[/]")
                return 1
            finally:
                say("stopping the local stack")
                stack.down()
    profiles = _fit_all(queries, root, quota, quick, out, load_topology)
    _print_profiles(profiles)
    return 1 if failed else 0


def _fit_all(queries: list[str], root: Path, quota: float, quick: bool, out: Path | None,
             load_topology: Any) -> list[Any]:
    """Refit every recorded query; the downtime-vs-state slope of each method is pooled over them."""
    from harness.backends.local.config import LocalConfig
    from harness.calibrated_profile import CALIBRATED_DIR, HostLoad, Provenance
    from harness.calibration import fit
    from harness.calibration.build import build_profile
    from harness.calibration.measure import Measurement

    measured = {q: Measurement.load(root / q) for q in queries if Measurement.complete(root / q)}
    pooled: dict[str, list[tuple[float, float]]] = {}
    for m in measured.values():
        for p in m.phases:
            # the slope over scale-ups only: the same kind of restart (fresh task managers) in every query
            if p.kind == "rescale" and p.extra.get("ok") and p.extra.get("direction", "up") == "up":
                s = p.extra.get("state_bytes_before")
                pooled.setdefault(p.extra["method"], []).append(
                    (float(s) if s is not None else math.nan, float(p.extra["downtime_s"])))
    slopes = {meth: (fit.pooled_slope(pts), f"pooled over {', '.join(sorted(measured))} ({len(pts)} scale-ups)")
              for meth, pts in pooled.items()}
    local = LocalConfig()
    cmd = _command(queries, quick)
    profiles = []
    for q, m in measured.items():
        prov = Provenance(
            date=str(m.facts.get("measured_at") or dt.datetime.fromtimestamp(
                (root / q / "measurement.json").stat().st_mtime, dt.UTC).isoformat(timespec="seconds")),
            command=str(m.facts.get("command") or cmd), cpu_model=cpu_model_name(), host_cpus=os.cpu_count() or 1,
            flink_version=local.flink_version, kafka_version=local.kafka_version, taskmanager_cpu_quota=quota,
            taskmanager_jit=m.facts.get("taskmanager_jit", TaskManagerJit.TIERED.value),
            taskmanager_memory=m.facts.get("taskmanager_memory"),
            host_load=HostLoad(before_1m=math.nan),
            # taken when the samples were (a refit on another machine must not stamp its own); absent: not measured
            host_speed_sha256_mb=m.facts.get("host_speed_sha256_mb"),
            probe_share=_finite_or_none(m.facts.get("probe_share")),
            duration_s=float(m.facts.get("query_wall_s", math.nan)),
            quick=bool(m.facts.get("plan", {}).get("quick", quick)),
            notes=[f"{p.name}: not saturated after raising the rate" for p in m.phases
                   if p.kind == "overload" and p.extra.get("backlog_growth") is not None
                   and p.extra["backlog_growth"] <= 0]
            + _shortfalls(m)
            + ([f"fitted again from the recorded samples by `{cmd}`"] if m.facts.get("command", cmd) != cmd else []),
        )
        prof = build_profile(m, load_topology(q), prov, slopes)
        prof = _keep_host_share(prof, out or CALIBRATED_DIR)
        prof.save(out or CALIBRATED_DIR)
        profiles.append(prof)
    return profiles


def _finite_or_none(x: Any) -> float | None:
    """A recorded fact as a float, None where it was not recorded or not measured (NaN)."""
    return float(x) if x is not None and math.isfinite(float(x)) else None


def _keep_host_share(prof: Any, directory: Path) -> Any:
    """A refit keeps the host share measured beside a scale-up (benchmarks/bench_host_share.py): calibrating does
    not measure it, so it would otherwise be lost."""
    import yaml

    from harness.calibrated_profile import HostShare, profile_file_name

    path = directory / profile_file_name(prof.query, prof.cpu_quota)
    if prof.host is not None or not path.exists():
        return prof
    # only the host block is needed: a profile written by an older version (fields since renamed) keeps it too
    raw = yaml.safe_load(path.read_text()) or {}
    if not isinstance(raw, dict) or raw.get("host") is None:
        return prof
    try:
        host = HostShare.model_validate(raw["host"])
    except ValueError as exc:
        raise ValueError(f"{path}: its host block cannot be read, so a refit would lose it: {exc}") from exc
    return prof.model_copy(update={"host": host})


def _shortfalls(m: Any) -> list[str]:
    """Phases in which the generator got less into Kafka than asked for (by over 10 %): their overload may not
    have been one. Nothing where its count was not recorded."""
    from harness.calibration import fit

    out = []
    for p in m.phases:
        if p.kind in ("coldstart", "overload", "share") and math.isfinite(p.rate) and p.rate > 0:
            got = fit.offered_rate(m.host, p.t0, p.t1)
            if math.isfinite(got) and got < 0.9 * p.rate:
                out.append(f"{p.name}: the generator offered {got:,.0f} of the {p.rate:,.0f} records/s asked for")
    return out


def _up_down(d: Any) -> str:
    """A downtime model's scale-up base, and its scale-down base where measured apart."""
    return f"{d.base_s:.1f}" + (f"|{d.down_base_s:.1f}" if d.down_base_s is not None else "")


def _print_profiles(profiles: list[Any]) -> None:
    from rich.table import Table

    table = Table(title="calibrated capacities (records/s per subtask at share 1.0 of the quota)")
    for col in ("query", "operator", "capacity", "at 0.5", "at 0.25", "selectivity", "CPU us/record",
                "busy gain/offset (scaled out)", "TM start s", "downtime up|down in_place/savepoint/reactive s",
                "host load"):
        table.add_column(col)
    for prof in profiles:
        first = True
        for name, op in prof.operators.items():
            fitc = op.capacity_fit
            sat = op.cpu.saturated_fraction
            d = prof.rescale_downtime
            table.add_row(
                prof.query if first else "", name, f"{op.capacity:,.0f}",
                f"{fitc.capacity(0.5 * prof.cpu_quota * sat):,.0f}",
                f"{fitc.capacity(0.25 * prof.cpu_quota * sat):,.0f}",
                f"{op.selectivity:.3f}", f"{op.cpu.cores_per_record * 1e6:.1f}",
                f"{op.readings.busy.gain:.2f}/{op.readings.busy.offset:+.2f}" + _scaled_out(op.readings),
                f"{prof.taskmanager_startup_s.mean:.1f}" if first else "",
                "/".join(_up_down(d[m]) if m in d else "-" for m in ("in_place", "savepoint", "reactive"))
                if first else "",
                f"{prof.provenance.host_load.during_mean_1m:.1f}" if first else "",
            )
            first = False
    console.print(table)


def _scaled_out(r: Any) -> str:
    s = r.busy_scaled_out
    return "" if s is None else f" ({s.gain:.2f}/{s.offset:+.2f} at {'/'.join(map(str, r.scaled_out_subtasks))})"


def _command(queries: list[str], quick: bool) -> str:
    """The command line as typed (the profile's provenance), or its equivalent when called from Python."""
    if sys.argv and "bench" in sys.argv[0]:
        return "bench " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    return f"bench calibrate {' '.join('--query ' + q for q in queries)}" + (" --quick" if quick else "")
