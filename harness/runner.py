"""One experiment's lifecycle: build pattern and backend, run the loop, write the record.

Whatever happens the backend is stopped and a run record is written: a crash
gives `failed: ...`, a Ctrl-C/SIGTERM `interrupted` (start-up and the loop are
the interruptible part; writing the record is not), so a broken run is data,
never a half-written directory that looks finished. The record carries the
cell's config identity (`harness.identity`); scheduled faults
(`experiment.faults`) are injected through `harness.fault_injection`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import gc
import importlib.metadata
import os
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import autoscalers
from harness import __version__
from harness.backends.base import Backend, MeasuresOnDemand
from harness.config import Experiment
from harness.fault_injection import FaultInjector
from harness.identity import identity_block, start_code_version
from harness.interrupts import Interrupted, interruptible
from harness.logs import log_to
from harness.mape import MapeLoop
from harness.record import STATUS_COMPLETED, EventLog, empty_timeseries, host_facts, write_run_record
from harness.run_status import RunStatus, status_line
from harness.scaling import ScaleManager
from harness.topology import load_topology
from harness.vocabulary import EventKind
from workloads.patterns import LoadPattern, build_pattern

if TYPE_CHECKING:
    from harness.live import LiveFile


def make_backend(experiment: Experiment) -> Backend:
    """Import lazily: `sim` runs must not need the local stack's dependencies."""
    if experiment.backend == "sim":
        from harness.backends.sim.backend import SimBackend

        return SimBackend()
    if experiment.backend == "local":
        from harness.backends.local.backend import LocalBackend

        return LocalBackend()
    if experiment.backend == "k8s":
        from harness.backends.k8s.backend import K8sBackend

        return K8sBackend()
    raise ValueError(f"unknown backend {experiment.backend!r}")


def run_duration(experiment: Experiment, pattern: LoadPattern) -> float:
    return min(experiment.duration_s, pattern.duration_s) if experiment.duration_s else pattern.duration_s


def _versions() -> dict[str, str]:
    out = {"harness": __version__}
    for pkg in ("numpy", "pandas", "pyarrow", "pydantic", "statsmodels", "networkx"):
        try:
            out[pkg] = importlib.metadata.version(pkg)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def run_experiment(
    experiment: Experiment,
    run_dir: Path,
    on_progress: Callable[[float, float], None] | None = None,
    backend: Backend | None = None,
    on_phase: Callable[[str], None] | None = None,
    live: LiveFile | None = None,
) -> Path:
    """Run one experiment and write its record to `run_dir`; returns `run_dir`.

    Log lines (the harness's, librdkafka's) go to a file beside the record while it
    runs, then into the record as `RUN_LOG` - never to the console. With `live`, every
    monitoring step is also written to that live-status file (`harness.live`).
    """
    start_code_version()  # git answers while the run runs; the record waits for it only if it is slower
    run_dir = Path(run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    log_file = run_dir.parent / f".{run_dir.name}.log-{os.getpid()}"
    try:
        with log_to(log_file):
            return _run_experiment(experiment, run_dir, on_progress, backend, on_phase, live, log_file)
    finally:
        log_file.unlink(missing_ok=True)


@contextlib.contextmanager
def _long_lived_frozen() -> Iterator[None]:
    """The objects alive when the loop starts (modules, config, the model) live for the whole run: freezing
    them keeps the garbage collector from scanning them again at every full collection, which the sim's
    many small buffers trigger (a tenth of a sim run's CPU, issue 13). Unfrozen afterwards, so a process
    that runs many experiments collects each run's leftovers."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _run_experiment(
    experiment: Experiment,
    run_dir: Path,
    on_progress: Callable[[float, float], None] | None,
    backend: Backend | None,
    on_phase: Callable[[str], None] | None,
    live: LiveFile | None,
    log_file: Path,
) -> Path:
    topology = load_topology(experiment.query)
    pattern = build_pattern(experiment.pattern, experiment.seed, experiment.query)
    duration = run_duration(experiment, pattern)
    backend = backend or make_backend(experiment)
    context = autoscalers.RunContext(
        slo_latency_s=experiment.slo.latency_s,
        slo_throughput_ratio=experiment.slo.throughput_ratio,
        period_s=experiment.loop.period_s,
        cooldown_s=experiment.loop.cooldown_s,
    )
    scaler = autoscalers.create(experiment.autoscaler.name, experiment.autoscaler.params, context)
    events = EventLog()
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()  # machine hygiene: a loaded host biases every local measurement
    host = host_facts(speed=experiment.backend != "sim")  # before the stack loads it; a sim run measures no host
    status = "failed: did not start"
    timeseries: Any = empty_timeseries()
    backend_facts: dict[str, Any] = {}
    saved = False
    interrupted = False

    def phase(name: str) -> None:
        if on_phase:
            on_phase(name)
        if live:
            live.update(phase=name, events=events, duration_s=duration)

    try:
        with interruptible():
            phase(f"starting {experiment.backend}")
            backend.start(experiment, pattern, topology)
            if isinstance(backend, MeasuresOnDemand):
                backend.measure_only(scaler.reads())
            phase("running")
            events.add(0.0, EventKind.PHASE, "start", duration_s=duration)
            for stage in pattern.stages:
                events.add(stage.start_s, EventKind.PHASE, f"{stage.name} start", stage=stage.name, start=stage.start_s,
                           end=stage.end_s)
            injector = FaultInjector(backend, experiment.faults)
            loop = MapeLoop(
                injector,
                scaler,
                ScaleManager(experiment.scale_manager),
                experiment.loop,
                events,
                on_tick=(lambda t: on_progress(t, duration)) if on_progress else None,
                on_snapshot=(lambda snap: live.update(snapshot=snap, events=events)) if live else None,
            )
            with _long_lived_frozen():
                loop.run(duration)
            injector.finish()
            for ev in injector.drain_events():
                events.add(ev.t, ev.kind, ev.reason, **ev.data)
            events.add(backend.now(), EventKind.PHASE, "end")
            status = STATUS_COMPLETED
    except (Interrupted, KeyboardInterrupt) as exc:
        interrupted = True
        status = status_line(RunStatus.INTERRUPTED, f"{str(exc) or type(exc).__name__} at t={_safe_now(backend):.0f} s")
        events.add(_safe_now(backend), EventKind.PHASE, "interrupted", signal=str(exc))
        raise
    except Exception as exc:  # noqa: BLE001 - a failed run is data: a fault event with the traceback
        status = f"failed: {type(exc).__name__}: {exc}"
        events.add(_safe_now(backend), EventKind.FAULT, status, traceback=traceback.format_exc(limit=8))
    finally:
        phase("writing the run record")
        try:
            timeseries = backend.timeseries()
            backend_facts = backend.facts()
        except Exception as exc:  # noqa: BLE001 - keep the record even if export fails: a fault event
            events.add(_safe_now(backend), EventKind.FAULT, f"timeseries export failed: {exc}")
            if status == STATUS_COMPLETED:
                status = f"failed: timeseries export: {exc}"
        faults = len(events.of_kind(EventKind.FAULT))
        # scheduled injections (the crash a backend then detects is marked injected too, but is no extra fault)
        injected = sum(1 for e in events.of_kind(EventKind.FAULT)
                       if e["data"].get("injected") and "fault_id" in e["data"])
        run_yaml = {
            "run_id": run_dir.name,
            "experiment": experiment.name,
            "status": status.split(":")[0],
            "flagged": faults > 0,
            "faults": faults,
            "injected_faults": injected,
            "started_at": started.isoformat(),
            "finished_at": dt.datetime.now(dt.UTC).isoformat(),
            "duration_s": duration,
            "seed": experiment.seed,
            "identity": identity_block(experiment),
            "config": experiment.model_dump(mode="json"),
            "autoscaler_params": experiment.autoscaler.typed_params().model_dump(mode="json"),
            "topology": {
                "query": topology.query,
                "operators": [
                    {"name": o.name, "upstream": list(o.upstream), "topic": o.topic, "capacity": o.capacity,
                     "selectivity": o.selectivity, "keyed": o.keyed}
                    for o in topology.operators
                ],
            },
            # records: what the pattern asks for over the run, the base of the load shortfall
            "pattern": {"stages": [vars(s) for s in pattern.stages], "max_rate": pattern.max_rate,
                        "records": pattern.records_between(0.0, duration)},
            # resolved: partitions per topic (thesis ch. 6.3.1: the most consumers) and retention
            "kafka": {**experiment.kafka.model_dump(mode="json"), "partitions": experiment.partitions},
            "backend": backend_facts,
            "versions": _versions(),
            "host": {**host, "loadavg_start": list(load_start), "loadavg_end": list(os.getloadavg())},
        }
        try:
            # an interrupted run is torn down quickly: no TSDB snapshot (its series are in the record)
            write_run_record(
                run_dir, run_yaml, timeseries, events, status,
                artifacts=None if interrupted else (lambda d: _artifacts(backend, d, events)), log_file=log_file,
            )
            saved = True
        finally:
            backend.stop()
    if not saved:
        raise RuntimeError(f"run record {run_dir} was not written")
    return run_dir


def _artifacts(backend: Backend, tmp_dir: Path, events: EventLog) -> dict[str, Any]:
    """Backend artifacts are a bonus: their failure is recorded, never loses the record."""
    try:
        return backend.save_artifacts(tmp_dir)
    except Exception as exc:  # noqa: BLE001 - recorded as a fault event
        events.add(_safe_now(backend), EventKind.FAULT, f"saving artifacts failed: {exc}")
        return {"error": str(exc)}


def _safe_now(backend: Backend) -> float:
    """The backend's time, or 0 (the start) when it never started (sim raises RuntimeError then)."""
    try:
        return backend.now()
    except RuntimeError:
        return 0.0
