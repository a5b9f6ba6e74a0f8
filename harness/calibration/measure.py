"""Run one query's calibration phases on the real local stack and keep what was recorded.

The stack is the ordinary `LocalStack` (kept up between queries); the job is started and rescaled
through the ordinary `LocalBackend` (so a calibration measures exactly the paths a run uses:
cgroup quotas, in-place / savepoint / reactive rescaling, the load generator). The phases are
those of `harness.calibration.plan`; `Recorder` samples the task managers once a second. What a
query leaves behind (`Measurement`): the samples, the host samples and one `PhaseRecord` per phase,
saved under the calibration's state directory so the fit can be redone without measuring again
and an interrupted calibration resumes with the next query.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.calibrated_profile import RescaleMethod
from harness.calibration import fit
from harness.calibration.plan import (
    BOTTLENECK_HEADROOM,
    BOTTLENECK_SCALED_MAX,
    COLD_OVERLOAD,
    GROWN_STATE_BYTES,
    GROWN_STATE_METHODS,
    OVERLOAD,
    PROBE_RAISE,
    QueryPlan,
    spread_layout,
    stateful_operator,
)
from harness.calibration.recorder import Recorder
from harness.topology import Topology
from workloads.generator import expected_shares
from workloads.patterns import LoadPattern

log = logging.getLogger(__name__)

Say = Callable[[str], None]
Tick = Callable[[float], None]


@dataclass
class PhaseRecord:
    """What the driver did in one phase (times in seconds since the recorder started)."""

    name: str
    # coldstart | warmup | overload (the probe too) | drain | ladder | spread | share | bottleneck | parallelism
    # | rescale | deployment
    kind: str
    t0: float
    t1: float = math.nan
    settle_s: float = 0.0
    rate: float = math.nan  # records/s the generator was asked for
    operator: str | None = None
    share: float = 1.0
    parallelism: dict[str, int] = field(default_factory=dict)
    shares: dict[str, float] = field(default_factory=dict)
    state_bytes: float = math.nan  # latest checkpointed state size at the phase's end
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Measurement:
    query: str
    quota: float
    phases: list[PhaseRecord]
    samples: pd.DataFrame
    host: pd.DataFrame
    facts: dict[str, Any]

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.samples.to_parquet(directory / "samples.parquet", index=False)
        self.host.to_parquet(directory / "host.parquet", index=False)
        # when it was measured, kept in the file (a copied state directory has new modification times)
        self.facts.setdefault("measured_at", dt.datetime.now(dt.UTC).isoformat(timespec="seconds"))
        meta = {"query": self.query, "quota": self.quota, "facts": self.facts,
                "phases": [asdict(p) for p in self.phases]}
        tmp = directory / "measurement.json.tmp"
        tmp.write_text(json.dumps(meta, indent=1, default=_json))
        tmp.replace(directory / "measurement.json")  # written last: its presence means complete

    @classmethod
    def load(cls, directory: Path) -> Measurement:
        meta = json.loads((directory / "measurement.json").read_text())
        phases = [PhaseRecord(**{k: (math.nan if v is None and k in ("t1", "rate", "state_bytes") else v)
                                 for k, v in p.items()}) for p in meta["phases"]]  # type: ignore[arg-type]
        return cls(query=meta["query"], quota=float(meta["quota"]), phases=phases,
                   samples=pd.read_parquet(directory / "samples.parquet"),
                   host=pd.read_parquet(directory / "host.parquet"), facts=meta.get("facts", {}))

    @staticmethod
    def complete(directory: Path) -> bool:
        return (directory / "measurement.json").exists()


def _json(obj: Any) -> Any:
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, np.generic):
        return obj.item()
    return str(obj)


def pattern_fractions(topology: Topology, selectivity: dict[str, float]) -> dict[str, float]:
    """Input records/s of each operator per record/s of the generator's (summed) rate."""
    shares = expected_shares(list(topology.topics))
    out: dict[str, float] = {}
    for op in topology.operators:
        if op.is_source:
            out[op.name] = shares.get(op.topic or "", 0.0)
        else:
            out[op.name] = sum(out[u] * selectivity.get(u, 1.0) for u in op.upstream)
    return out


@dataclass(frozen=True)
class BottleneckLayout:
    """The layout of one bottleneck phase (`bottleneck_layout`)."""

    layout: dict[str, int]
    capped: list[str]  # operators that would need more than `BOTTLENECK_SCALED_MAX` subtasks (held there)
    runs: bool = True  # False: a source whose downstream could not take even its estimated capacity (skipped)


def bottleneck_layout(topology: Topology, op: str, rate: float, base: dict[str, int], estimate: dict[str, float],
                      selectivity: dict[str, float]) -> BottleneckLayout:
    """The layout that makes `op` the job's only bottleneck at generator rate `rate`.

    A non-source's upstream gets enough subtasks to carry `BOTTLENECK_HEADROOM` x what the rate brings it (at
    least 2: its readings scaled out and held back are measured too). A source stays at its base parallelism and
    everything downstream of it gets enough to carry that many times what reaches it (no fewer than at base,
    no more than `BOTTLENECK_SCALED_MAX`): the source's own offered share, and what the other sources deliver at
    their base parallelism by their estimates (the phases before leave a backlog in every topic). A source whose
    downstream could not take even its estimated capacity at `BOTTLENECK_SCALED_MAX` subtasks does not run: it
    could not limit (q11's source at 35.9k/s, its window 18.9k per subtask: 1.6 x 1.25 times that would need 4,
    its capacity 2, so the window goes to 3 and the phase runs)."""
    frac = pattern_fractions(topology, selectivity)
    layout, capped = dict(base), []
    if not topology.op(op).is_source:
        for up in sorted(topology.ancestors(op)):
            need = math.ceil(BOTTLENECK_HEADROOM * rate * frac[up] / max(estimate[up], 1e-9))
            layout[up] = min(BOTTLENECK_SCALED_MAX, max(2, need))
            if need > BOTTLENECK_SCALED_MAX:
                capped.append(up)
        return BottleneckLayout(layout, capped)

    def flows(target_rate: float) -> dict[str, float]:
        """Records/s reaching each operator with the target source taking `target_rate`."""
        out: dict[str, float] = {}
        for spec in topology.operators:
            if spec.is_source:
                out[spec.name] = target_rate if spec.name == op else estimate[spec.name] * base[spec.name]
            else:
                out[spec.name] = sum(out[u] * selectivity.get(u, 1.0) for u in spec.upstream)
        return out

    offered, at_estimate = flows(rate * frac[op]), flows(estimate[op] * base[op])
    runs = True
    for down in sorted(topology.descendants(op)):
        need = math.ceil(BOTTLENECK_HEADROOM * offered[down] / max(estimate[down], 1e-9))
        layout[down] = max(base[down], min(BOTTLENECK_SCALED_MAX, need))
        if need > BOTTLENECK_SCALED_MAX:
            capped.append(down)
        if at_estimate[down] / max(estimate[down], 1e-9) > BOTTLENECK_SCALED_MAX:
            runs = False
    return BottleneckLayout(layout, capped, runs)


def estimated_rate_capacity(topology: Topology, capacity: dict[str, float], selectivity: dict[str, float]) -> float:
    """The generator rate at which the first operator saturates."""
    frac = pattern_fractions(topology, selectivity)
    return min(capacity[n] / f for n, f in frac.items() if f > 0)


RELAYOUT_METHODS: tuple[RescaleMethod, ...] = ("in_place", "savepoint")  # the methods that set any layout
# (reactive sets the slots, not a layout)


def fastest_relayout(phases: list[PhaseRecord]) -> RescaleMethod:
    """The method that changes the layout fastest for this query, for the phases that measure a layout rather than
    a rescale (bottleneck, parallelism): by the wall time of the rescale phases' calls (the first pair, up and down;
    a scale-down's includes stopping the task managers, a scale-up's start them before the call), compared over the
    directions every method completed (a scale-down takes about twice a scale-up's time). A heap-state query's
    in-place restart restores its state from the last checkpoint, and restored about half as fast as a savepoint
    restart at 0.25 CPU (q3's join, session 24, its task manager's log: 35 s up and 68 s down at 44 MB in place,
    18 s and 35 s at about 50 MB by savepoint); a stateless query's in-place restart is the faster. Session 11's
    q8 pair (24.5 s and 51.7 s in place, 20.8 s and 59.7 s by savepoint) was a near tie. In place where no
    direction was completed by both."""
    took: dict[RescaleMethod, dict[str, list[float]]] = {m: {} for m in RELAYOUT_METHODS}
    for p in phases:
        e = p.extra
        if (p.kind == "rescale" and e.get("method") in took and e.get("ok") and not p.name.endswith("-grown")
                and isinstance(e.get("call_s"), int | float) and math.isfinite(e["call_s"])):
            took[e["method"]].setdefault(str(e.get("direction")), []).append(float(e["call_s"]))
    measured = {m: d for m, d in took.items() if d}
    both = set.intersection(*(set(d) for d in measured.values())) if measured else set()
    if not both:
        return "in_place"
    mean = {m: sum(sum(d[k]) / len(d[k]) for k in both) for m, d in measured.items()}
    return min(mean, key=lambda m: mean[m])


class QueryCalibration:
    """Drives the phases of one query on a running stack; `run()` returns the Measurement."""

    relayout_method: RescaleMethod = "in_place"  # until the rescale phases measured each method (`fastest_relayout`)

    def __init__(self, stack: Any, topology: Topology, plan: QueryPlan, quota: float, estimate: dict[str, float],
                 selectivity: dict[str, float], seed: int = 1, say: Say | None = None, tick: Tick | None = None,
                 partitions: int = 8) -> None:
        self.stack = stack
        self.topology = topology
        self.plan = plan
        self.quota = quota
        self.estimate = estimate  # records/s per subtask at share 1.0 (a previous profile or the first guess)
        self.selectivity = selectivity
        self.seed = seed
        self.say = say or (lambda _: None)
        self.tick = tick or (lambda _: None)
        self.partitions = partitions
        self.phases: list[PhaseRecord] = []
        self.rate_capacity = estimated_rate_capacity(topology, estimate, selectivity)

    # ---------------------------------------------------------------- helpers
    def _experiment(self) -> Any:
        from harness.config import Experiment

        cfg = self.stack.cfg
        return Experiment.model_validate({
            "name": f"calibrate-{self.topology.query}", "backend": "local", "query": self.topology.query,
            "pattern": {"name": "constant", "params": {"rate": 1.0, "duration_min": 60}},
            "autoscaler": {"name": "ds2"}, "initial_parallelism": 1, "seed": self.seed,
            "kafka": {"partitions": self.partitions},
            "local": {"workdir": str(cfg.workdir), "port_offset": cfg.port_offset,
                      "taskmanager_cpu_quota": cfg.taskmanager_cpu_quota},
        })

    def _wait(self, seconds: float) -> None:
        end = self.backend.now() + seconds
        while self.backend.now() < end:
            step = min(1.0, end - self.backend.now())
            if step > 0:
                self.backend.advance_to(self.backend.now() + step)
                self.tick(step)

    def _phase(self, name: str, kind: str, seconds: float, settle: float, **kw: Any) -> PhaseRecord:
        self.recorder.phase = name
        rec = PhaseRecord(name=name, kind=kind, t0=self.recorder.now(), settle_s=settle,
                          parallelism=dict(self.backend.state.parallelism),
                          shares=dict(self.backend.state.cpu_share), **kw)
        self.say(f"{self.topology.query}: {name} ({seconds:.0f} s)")
        self._wait(seconds)
        rec.t1 = self.recorder.now()
        rec.state_bytes = self._state_bytes()
        self.phases.append(rec)
        return rec

    def _state_bytes(self) -> float:
        try:
            v = self.backend.rest.checkpoints(self.backend.state.job_id).latest_state_bytes
        except Exception:  # noqa: BLE001 - no checkpoint yet: unknown, not zero
            return math.nan
        return float(v) if v is not None else math.nan

    def _generate(self, rates: list[float]) -> None:
        """(Re)start the generator on a per-second schedule from now."""
        b = self.backend
        if b._generator is not None:
            b._generator.stop()
        b._generator = b._start_generator(LoadPattern("calibration", np.asarray(rates, dtype=float), 1.0), self.seed)

    def _lag(self, since: float = -math.inf) -> float:
        """Pending records over the sources, from the recorder's latest samples taken at `since` or later (a new
        job's: the previous one's rows are still the latest until it reports)."""
        rows = [r for r in self.recorder.rows[-3 * max(1, len(self.backend.state.parallelism)) * 4:]
                if "pending" in r and r.get("operator") in {s.name for s in self.topology.sources}
                and r.get("t", math.inf) >= since]
        latest: dict[tuple[str, int], float] = {}
        for r in rows:
            latest[(r["operator"], r.get("subtask", 0))] = r["pending"]
        return float(sum(latest.values())) if latest else math.nan

    # ---------------------------------------------------------------- the phases
    def run(self) -> Measurement:
        from harness.backends.local.backend import LocalBackend

        plan, d = self.plan, self.plan.durations
        est = self.rate_capacity
        self.backend = LocalBackend(self.stack)
        self.recorder = Recorder(self.stack, generator=lambda: self.backend._generator)
        t_start = time.monotonic()
        self.say(f"{self.topology.query}: starting the job (all operators at parallelism 1)")
        # warm-up and probe: the estimate may be far off (a first guess, another machine's profile), the probe
        # measures the real saturated rate; the cold start comes last, planned from what was measured
        warm = [0.8 * est] * int(round(d.warmup_s)) + [OVERLOAD * est] * int(round(plan.measure_s + 120))
        self.backend.start(self._experiment(), LoadPattern("calibration", np.asarray(warm), 1.0), self.topology)
        self.recorder.job_id = self.backend.state.job_id
        self.recorder.start()
        startup_s = getattr(self.backend, "startup_s", math.nan)
        try:
            self._warmup(d.warmup_s)
            c = self._overload(OVERLOAD * est, "probe")
            if not math.isfinite(c):
                c = est
            self.say(f"{self.topology.query}: saturated at {c:,.0f} records/s; the ladder follows it")
            # drain the probe's backlog, then the ladder at fractions of the measured rate, then overload
            lag = self._lag()
            drain = int(min(150.0, max(2.0, lag / max(c, 1.0) * 1.3 + 2.0))) if math.isfinite(lag) else 5
            ladder = [f * c for f in plan.ladder]
            sched = [0.0] * drain
            for r in ladder:
                sched += [r] * int(round(d.level_s))
            self._generate(sched)
            self._phase("drain", "drain", drain, 0.0, rate=0.0)
            for i, r in enumerate(ladder):
                self._phase(f"ladder-{i}", "ladder", d.level_s, d.settle_s, rate=r)
            self._spread(c)
            # the probe may have run while the JVMs still compiled: offer more than the fastest rate seen since
            seen = [p.extra.get("throughput") for p in self.phases if p.kind == "overload"]
            seen += [self._throughput(p) for p in self.phases if p.kind == "ladder"]
            c = max([c] + [float(v) for v in seen if v is not None and math.isfinite(float(v))])
            over = self._overload(OVERLOAD * c, "overload", restart_now=True)
            warm_rate = max(c, over) if math.isfinite(over) else c
            # rescales while the state is still small (the stateful queries' restarts take minutes with what
            # the later phases add); then overloaded again on warm task managers for the shares
            warm_tms = set(self.stack.taskmanager_ids())
            self._rescales()
            self.relayout_method = fastest_relayout(self.phases)
            self._generate([self.offered] * int(plan.measure_s + 120))
            if set(self.stack.taskmanager_ids()) - warm_tms:  # a task manager started by a rescale stayed
                self._rewarm(d.settle_s)
            for op in plan.operators:
                for sh in plan.shares:
                    self.backend.rescale(dict(self.backend.state.parallelism), {op: sh})
                    self._phase(f"share-{op}-{sh:g}", "share", d.share_s, d.settle_s, rate=self.offered,
                                operator=op, share=sh)
                self.backend.rescale(dict(self.backend.state.parallelism), {op: 1.0})
            self._bottleneck_phases()
            self._parallelisms()
            self._grown_state_rescales()
            for k in range(plan.coldstarts):  # each a new job on fresh task managers
                self._coldstart(d.cold_s, COLD_OVERLOAD * warm_rate, "coldstart" if k == 0 else f"coldstart-{k + 1}")
        finally:
            self.recorder.stop()
            self._teardown()
        facts = {"job_startup_s": startup_s, "wall_s": time.monotonic() - t_start,
                 "rate_capacity_estimate": est, "offered_overload": self.offered,
                 "relayout_method": self.relayout_method, "probe_share": self.recorder.probe_share}
        return Measurement(self.topology.query, self.quota, self.phases, self.recorder.frame(),
                           self.recorder.host_frame(), facts)

    def _coldstart(self, seconds: float, rate: float, name: str = "coldstart") -> None:
        """A new job on fresh task managers at their quota, offered more than the warm job's measured rate: how
        fast a new task manager gets going (the backlog must grow throughout, else the curve is the offered rate).
        Last, so the rate comes from this machine's measurement, not from the estimate (on a machine 3x faster
        than the previous profile's, a cold start planned from it was never overloaded)."""
        from harness.backends.local.backend import LocalBackend

        if seconds <= 0:
            return
        self.recorder.phase = f"{name}-setup"
        self._teardown()
        # the stack is kept between phases and queries, and a task manager that already ran a job is warm
        # (measured: q11 after q1 ran at its warm rate from its first second)
        for tm in self.stack.taskmanager_ids():
            self.stack.stop_taskmanager(tm)
        self.backend = LocalBackend(self.stack)
        sched = [rate] * int(round(seconds + 60))
        started = self.recorder.now()
        self.backend.start(self._experiment(), LoadPattern("calibration", np.asarray(sched), 1.0), self.topology)
        self.recorder.job_id = self.backend.state.job_id
        lag0 = self._lag(since=started)  # NaN at the job's first second (no source sample of it yet)
        rec = self._phase(name, "coldstart", seconds, 0.0, rate=rate)
        lag1 = self._lag()
        rec.extra.update({"bin_s": self.plan.durations.cold_bin_s, "backlog_before": lag0, "backlog_after": lag1,
                          "job_startup_s": getattr(self.backend, "startup_s", math.nan)})

    def _warmup(self, seconds: float) -> None:
        """Run the fresh JVMs' JIT compilers at a full CPU: at the task manager's quota it takes minutes,
        and every rate measured meanwhile is the compiler's, not the query's."""
        with self._at_full_cpu("warmup"):
            self._phase("warmup", "warmup", seconds, seconds)

    @contextlib.contextmanager
    def _at_full_cpu(self, label: str) -> Iterator[None]:
        """Every task manager at a full CPU meanwhile (the JIT), then at its quota again and settled (samples
        labelled `<label>-settle`) before anything is measured."""
        boost = max(1.0, self.quota)
        for tm in self.stack.taskmanager_ids():
            self.stack.set_taskmanager_cpu(tm, boost)
        try:
            yield
        finally:
            self.backend.rescaler.apply_cpu(self.backend.state, {op: 1.0 for op in self.topology.names})
            self.recorder.phase = f"{label}-settle"
            self._wait(self.plan.durations.settle_s)

    def _overload(self, rate: float, name: str, restart: bool = True, restart_now: bool = False) -> float:
        """Saturate at share 1.0 and return the records/s the sources took; if the backlog does not
        grow, offer more (restarting the generator) and measure again."""
        d = self.plan.durations
        self.offered = rate
        measured = math.nan
        if restart_now:
            self._generate([rate] * int(self.plan.measure_s + 120))
        for attempt in range(4):
            lag0 = self._lag()
            rec = self._phase(name if attempt == 0 else f"{name}-{attempt}", "overload", d.overload_s,
                              d.settle_s, rate=rate)
            lag1 = self._lag()
            grew = math.isfinite(lag0) and math.isfinite(lag1) and lag1 - lag0 > 0.02 * rate * d.overload_s
            rec.extra["backlog_growth"] = lag1 - lag0 if math.isfinite(lag0) and math.isfinite(lag1) else None
            measured = self._throughput(rec)
            rec.extra["throughput"] = measured
            self.measured_rate = measured
            if grew or not restart:
                return measured
            rate = PROBE_RAISE * max(rate, measured if math.isfinite(measured) else 0.0)
            self.offered = rate
            self.say(f"{self.topology.query}: not saturated (backlog {lag0:.0f} -> {lag1:.0f}); "
                     f"offering {rate:,.0f}/s")
            self._generate([rate] * int(self.plan.measure_s + 120))
        return measured

    def _throughput(self, phase: PhaseRecord) -> float:
        """Records/s the sources took from Kafka over a phase's plateau (from the exact counters)."""
        df = self.recorder.frame()
        if df.empty or "rec_out" not in df:
            return math.nan
        rate = fit.sources_rate(df, [s.name for s in self.topology.sources], phase.t0 + phase.settle_s, phase.t1)
        return rate if rate > 0 else math.nan

    def _bottleneck_phases(self) -> None:
        """Each planned operator as the job's only bottleneck at share 1.0, as in a run (`bottleneck_layout`): its
        upstream scaled out so it holds it back, the generator offering more than it takes; a source's downstream
        scaled out so it takes all the source gives (the source reads the backlog the phases before left and the
        generator adds; the backlog before and after is recorded). A source whose downstream could not take even its
        estimated capacity is skipped, recorded without a plateau. Back to the base layout after."""
        if not self.plan.bottlenecks:
            return
        b, d = self.backend, self.plan.durations
        base = dict(b.state.parallelism)
        frac = pattern_fractions(self.topology, self.selectivity)
        # readings from as long after the restart as a deployment phase's (the restart's own work settles first)
        settle = max(d.settle_s, d.rescale_settle_s + d.deployment_settle_s)
        for op in self.plan.bottlenecks:
            # the generator rate that overloads it (by its estimated capacity), and the layout that carries it
            rate = max(self.offered, OVERLOAD * self.estimate[op] / max(frac[op], 1e-9))
            planned = bottleneck_layout(self.topology, op, rate, base, self.estimate, self.selectivity)
            layout, capped = planned.layout, planned.capped
            extra: dict[str, Any] = {"layout": layout, "capped": sorted(capped)}
            if not planned.runs:  # what it feeds would limit first: nothing to measure, no rescale made
                self.say(f"{self.topology.query}: bottleneck {op}: {', '.join(sorted(capped))} could not take even "
                         f"its estimated capacity at {BOTTLENECK_SCALED_MAX} subtasks; skipped")
                self.phases.append(PhaseRecord(name=f"bottleneck-{op}", kind="bottleneck", t0=self.recorder.now(),
                                               operator=op, rate=rate,
                                               extra={**extra, "error": "downstream too slow (layout not applied)"}))
                continue
            if capped:
                self.say(f"{self.topology.query}: bottleneck {op}: {', '.join(sorted(capped))} capped at "
                         f"{BOTTLENECK_SCALED_MAX} subtasks: {op} may not be the one that limits")
            warm = set(self.stack.taskmanager_ids())
            res = self._relayout(layout)
            if not res.ok:  # recorded without a plateau (no end time): the fits skip it, the record says why
                self.say(f"{self.topology.query}: bottleneck {op}: rescale to {layout} failed ({res.error}); skipped")
                self.phases.append(PhaseRecord(name=f"bottleneck-{op}", kind="bottleneck", t0=self.recorder.now(),
                                               operator=op, rate=rate, extra={**extra, "error": str(res.error)}))
                self._back_to(base)
                continue
            extra["relayout_method"] = res.method  # the method that set it (the fastest, or in place after it failed)
            self._generate([rate] * int(d.bottleneck_s + d.settle_s + 120))
            if set(self.stack.taskmanager_ids()) - warm:  # fresh task managers: their JIT at a full CPU first
                self._rewarm(d.settle_s)
            lag0 = self._lag()
            rec = self._phase(f"bottleneck-{op}", "bottleneck", d.bottleneck_s, settle, rate=rate, operator=op,
                              extra=extra)
            lag1 = self._lag()  # the backlog in Kafka around the phase, for the record (NaN: not measured)
            rec.extra.update({"backlog_before": lag0, "backlog_after": lag1})
        self._back_to(base)
        self._generate([self.offered] * int(self.plan.measure_s + 120))

    def _spread(self, rate: float) -> None:
        """Every operator scaled out (`spread_layout`) through the planned fractions of a top rate at which none
        saturates or is held back, then back to the base layout. `rate`: the saturated rate measured at parallelism
        1, which scales the estimated capacities to this machine. Before the overload phase, while Kafka holds no
        backlog (a source reading one is saturated: the backlogged level's regime). The overload after it waits
        as long after the restart back as a deployment phase does."""
        if not self.plan.spread:
            return
        b, d = self.backend, self.plan.durations
        base = dict(b.state.parallelism)
        ok = rate > 0 and math.isfinite(rate) and 0 < self.rate_capacity < math.inf
        speed = rate / self.rate_capacity if ok else 1.0  # nothing measured: the estimates as they are
        frac = pattern_fractions(self.topology, self.selectivity)
        try:
            top, wide = spread_layout({op: speed * self.estimate[op] / f if f > 0 else math.inf
                                       for op, f in frac.items()})
        except ValueError as e:
            self._skipped_spread({}, str(e))
            return
        layout = {op: max(n, wide[op]) for op, n in base.items()}
        levels = [f * top for f in self.plan.spread]
        self.say(f"{self.topology.query}: spread to {layout}, up to {top:,.0f} records/s")
        self._generate([0.0] * 3600)  # the ladder's last level would queue up during the restart
        warm = set(self.stack.taskmanager_ids())
        res = self._relayout(layout)
        if not res.ok:
            self._skipped_spread(layout, str(res.error))
            self._back_to(base)
            return
        self._generate([levels[0]] * 3600)
        if set(self.stack.taskmanager_ids()) - warm:  # fresh task managers: their JIT at a full CPU first
            self._rewarm(d.settle_s)
        # the first level's readings from as long after the restart as a deployment phase's, as long as the others'
        first = max(d.settle_s, d.rescale_settle_s + d.deployment_settle_s)
        secs = [d.level_s + first - d.settle_s] + [d.level_s] * (len(levels) - 1)
        self._generate([r for r, n in zip(levels, secs, strict=True) for _ in range(int(round(n)))]
                       + [levels[-1]] * 3600)
        for i, (r, n) in enumerate(zip(levels, secs, strict=True)):
            self._phase(f"spread-{i}", "spread", n, first if i == 0 else d.settle_s, rate=r, extra={"layout": layout})
        self._generate([0.0] * 3600)
        self._back_to(base)
        self.recorder.phase = "spread-back"
        self._wait(first)

    def _skipped_spread(self, layout: dict[str, int], error: str) -> None:
        """A spread phase that could not run, recorded without a plateau (no end time: the fits skip it) and why."""
        self.say(f"{self.topology.query}: spread to {layout or 'no layout'} skipped ({error})")
        extra: dict[str, Any] = {"layout": layout, "error": error} if layout else {"error": error}
        self.phases.append(PhaseRecord(name="spread", kind="spread", t0=self.recorder.now(), extra=extra))

    def _relayout(self, layout: dict[str, int]) -> Any:
        """Rescale the job to `layout` for a phase that measures the new layout, not the rescale, by the method
        the rescale phases measured fastest for this query (`relayout_method`; in place before them, and after
        that method failed), and keep recording it; the backend's RescaleResult."""
        b = self.backend
        b.method = self.relayout_method
        job = b.state.job_id
        res = b.rescale(layout, None)
        if not res.ok and self.relayout_method != "in_place" and job in b.rest.active_job_ids():
            # a savepoint cannot be taken while the job restarts (q3 at 0.25 CPU, session 24: the join's task
            # manager froze past its heartbeat in a full GC, and a stop-with-savepoint came during the restart
            # that followed); in place sets the layout of the job still there, whatever its state (a job the
            # savepoint stopped is not: that failure stands)
            self.say(f"{self.topology.query}: {self.relayout_method} rescale to {layout} failed ({res.error}); "
                     "in place instead")
            b.method = "in_place"
            res = b.rescale(layout, None)
        self.recorder.job_id = b.state.job_id  # a savepoint rescale resubmits the job under a new id
        return res

    def _back_to(self, layout: dict[str, int]) -> None:
        """The job at `layout` again (one retry); the phases after it assume it, so failing is an error."""
        b = self.backend
        for _ in range(2):
            if b.state.parallelism == layout:
                return
            res = self._relayout(layout)
            if res.ok and b.state.parallelism == layout:
                return
            self.say(f"{self.topology.query}: back to {layout} failed ({res.error})")
        raise RuntimeError(f"{self.topology.query}: could not rescale back to {layout}; the phases after it would "
                           f"measure another layout")

    def _parallelisms(self) -> None:
        d = self.plan.durations
        extra = [p for p in self.plan.parallelisms if p > 1]
        if not extra:
            return
        # the operator that saturated at share 1.0 (highest CPU use of its quota in the overload phase)
        op = self._bottleneck()
        base = dict(self.backend.state.parallelism)
        for p in extra:
            res = self._relayout({**base, op: p})
            self._phase(f"parallelism-{op}-{p}", "parallelism", d.parallelism_s, d.settle_s, rate=self.offered,
                        operator=op, extra={"relayout_method": res.method, "ok": res.ok})
        self._relayout(base)  # what follows starts from any layout (the grown-state rescales) or a new job

    def _bottleneck(self) -> str:
        over = [p for p in self.phases if p.kind == "overload"][-1]
        df = self.recorder.frame()
        seg = df[(df.t >= over.t0 + over.settle_s) & (df.t <= over.t1)]
        best, best_cpu = self.topology.names[0], -1.0
        for op, g in seg.groupby("operator"):
            g = g.sort_values("t")
            if len(g) >= 2 and g.proc_cpu_s.notna().all():
                cores = (g.proc_cpu_s.iloc[-1] - g.proc_cpu_s.iloc[0]) / (g.t.iloc[-1] - g.t.iloc[0])
                if cores > best_cpu:
                    best, best_cpu = str(op), cores
        return best

    def _rescales(self) -> None:
        """Each method: 1 -> 2 -> 1 on the stateful (else middle) operator at a moderate rate."""
        b = self.backend
        op = stateful_operator(self.topology)
        rate = self._moderate()
        base = dict(b.state.parallelism)
        self._deployment("before", rate)
        for method in self.plan.methods:
            for direction, target in (("up", {**base, op: base[op] + 1}), ("down", dict(base))):
                if not self._rescale_once(method, direction, target, op, rate):
                    break
            if b.state.parallelism != base:  # a failed or reactive step left another layout: go back (in place:
                self._relayout(base)  # no method is chosen before the rescales end)

    def _grown_state_rescales(self) -> None:
        """In-place and savepoint scale-ups again, with the state the job has grown since the first rescales: a
        second state size per method, so the downtime's slope per GB is measured within a query (the first
        rescales come early, while the state is small). Only where the state at least doubled to 20 MB or
        more (q3's join, q5's and q8's windows); the cold start that follows starts a new job anyway."""
        first = [float(p.extra["state_bytes_before"]) for p in self.phases if p.kind == "rescale"
                 and p.extra.get("state_bytes_before") is not None and math.isfinite(p.extra["state_bytes_before"])]
        now = self._await_state()
        if not first or not math.isfinite(now) or now < max(2.0 * max(first), GROWN_STATE_BYTES):
            return
        b = self.backend
        op = stateful_operator(self.topology)
        rate = self._moderate()
        target = dict(b.state.parallelism)
        for method in GROWN_STATE_METHODS:
            target = {**target, op: target[op] + 1}
            if not self._rescale_once(method, "up", target, op, rate, suffix="-grown"):
                return

    def _moderate(self) -> float:
        """Half the measured saturated rate, offered while rescaling (the job catches up after each)."""
        measured = getattr(self, "measured_rate", math.nan)
        moderate = 0.5 * (measured if math.isfinite(measured) else self.rate_capacity)
        self._generate([moderate] * 3600)
        self.recorder.phase = "rescale-settle"
        self._wait(self.plan.durations.rescale_settle_s)
        return moderate

    def _rescale_once(self, method: str, direction: str, target: dict[str, int], op: str, rate: float,
                      suffix: str = "") -> bool:
        """One timed rescale with the state it had to move; True if it succeeded."""
        b = self.backend
        b.method = method  # type: ignore[assignment]
        state = self._await_state()
        extra: dict[str, Any] = {"method": method, "direction": direction, "state_bytes_before": state}
        t0 = time.monotonic()
        if direction == "up" and method != "reactive":
            # time a task manager's start-up on its own: the rescale then finds it registered
            self.stack.start_taskmanager(wait=True)
            extra["startup_s"] = time.monotonic() - t0
        t1 = time.monotonic()
        name = f"rescale-{method}-{direction}{suffix}"
        self.recorder.phase = name
        res = b.rescale(target, None)
        self.recorder.job_id = b.state.job_id  # a savepoint rescale resubmits the job under a new id
        took = time.monotonic() - t1
        extra.update({"ok": res.ok, "error": res.error, "downtime_s": res.downtime_s,
                      "call_s": took, "after": res.parallelism})
        if direction == "down" and res.ok:
            extra["stop_s"] = max(0.0, took - res.downtime_s)  # idle task managers stopped afterwards
        if method == "reactive" and direction == "up" and res.ok:
            extra["startup_s"] = max(0.0, took - res.downtime_s)
        self.say(f"{self.topology.query}: {method} {direction}{suffix}: downtime {res.downtime_s:.1f} s"
                 + (f" with {state / 1e6:.1f} MB of state" if math.isfinite(state) else "")
                 + ("" if res.ok else f" FAILED {res.error}"))
        self._phase(name, "rescale", self.plan.durations.rescale_settle_s, 0.0, rate=rate, operator=op,
                    extra=extra)
        if direction == "down" and res.ok and not suffix:
            self._deployment(method, rate, res.downtime_s)
        return bool(res.ok)

    def _deployment(self, label: str, rate: float, downtime_s: float = 0.0) -> None:
        """The moderate rate held in the job's current deployment: its readings at that one load, once the
        backlog of a restart's downtime is caught up (at half the capacity, in about as long again)."""
        d = self.plan.durations
        wait = max(0.0, downtime_s) if math.isfinite(downtime_s) else 0.0
        self._phase(f"deployment-{label}", "deployment", d.deployment_s + wait, d.deployment_settle_s + wait,
                    rate=rate)

    def _await_state(self) -> float:
        """The job's latest checkpointed state size. A resubmitted job (savepoint) has none until its first
        checkpoint, within one interval: wait for it (bounded); still none is unknown (NaN), never 0 bytes."""
        end = self.backend.now() + 1.5 * float(self.stack.cfg.checkpoint_interval_s) + 2.0
        state = self._state_bytes()
        while not math.isfinite(state) and self.backend.now() < end:
            self.recorder.phase = "rescale-checkpoint"
            self._wait(1.0)
            state = self._state_bytes()
        return state

    def _rewarm(self, seconds: float) -> None:
        """A task manager started by a rescale that stayed has had only its minutes at the quota: the JIT at a
        full CPU for a moment before capacities are measured."""
        with self._at_full_cpu("rewarm"):
            self.recorder.phase = "rewarm"
            self._wait(seconds)

    def _teardown(self) -> None:
        b = self.backend
        try:
            if b._generator is not None:
                b._generator.stop()
        except Exception as exc:  # noqa: BLE001 - teardown goes on; the stack's own stop kills what is left
            log.warning("calibration teardown: the generator did not stop cleanly: %s", exc)
        try:
            for jid in b.rest.active_job_ids():
                b.rest.cancel(jid)
        except Exception as exc:  # noqa: BLE001 - teardown goes on; the stack's own stop kills what is left
            log.warning("calibration teardown: jobs could not be cancelled: %s", exc)
