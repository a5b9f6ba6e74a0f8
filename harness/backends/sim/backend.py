"""`SimBackend`: the Backend protocol over the simulator core.

Glue only: builds the per-source arrivals from the pattern (topic shares x
arrival process), owns the model's clock, prices rescales with the query's
calibrated profile and hands out snapshots and the timeseries. The model and
the readout are pure; this class does no I/O either (no artifacts to save).

A rescale takes as long as on the local stack, and the call blocks for it as
the local backend's does: new task managers start first while the job runs on
(the calibrated start-up time), then the job stops for the method's downtime
(calibrated against state size), and after a scale-down the idle task managers
are stopped while the job already runs again. Where the profile measured the
host's CPU (`HostShare`), new task managers started together share what the
running stack leaves of the host, so a big scale-up starts slower than one
task manager alone. The task-manager count in the
record follows registered task managers, as Flink's
`numRegisteredTaskManagers` does. An experiment that states its own restart
time (`sim.rescale_downtime_s`, e.g. Gesscale's Raspberry Pi fog nodes) replaces
the method's calibrated downtime with it; start-up is priced as above.

With fog nodes (`sim.network`, `harness.backends.sim.network`) each rescale
places the new subtasks by the autoscaler's node choice (`choose_nodes`), and an
operator's per-subtask capacity from the cost model is multiplied by the
fraction its ND_max leaves (Gesscale eq. 1).

Injected faults (`harness.faults`) are modelled as the outage the real stack
shows: a killed task or job manager stops processing for its recovery time
(`rescale_downtime` profile keys `tm_recovery_s`, `jm_recovery_s`), a Kafka
restart stops it for the broker's down time plus `kafka_restart_s` and the
generator offers nothing meanwhile, a paused generator offers nothing, and a
stopped Prometheus leaves the loop blind (snapshots with every metric missing)
and a gap in the recorded series.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from harness.backends.base import BackendEvent, RescaleResult
from harness.backends.sim import readout
from harness.backends.sim.config import SimConfig
from harness.backends.sim.costs import RunCosts, run_costs
from harness.backends.sim.model import SimModel, expected_per_step, topic_shares
from harness.backends.sim.network import Placement
from harness.calibrated_profile import HostShare, OperatorReadings, QueryProfile
from harness.kafka_settings import KafkaSettings
from harness.metrics.snapshot import MetricsSnapshot
from harness.topology import Topology
from harness.vocabulary import EventKind, Metric, NodeChoice
from workloads.arrivals import ArrivalConfig, arrival_counts, interarrival_sample

if TYPE_CHECKING:
    import pyarrow as pa

    from harness.config import Experiment
    from harness.faults import FaultSpec
    from workloads.patterns import LoadPattern

# series a stopped Prometheus cannot have recorded; the harness itself knows the rest

INTERARRIVALS_UNREAD = "not sampled: the run's autoscaler does not read inter-arrival times"
_SEED_SALT = 0x51D  # keeps the arrival draws independent of the pattern generator's stream


def _reading_record(r: OperatorReadings) -> dict[str, Any]:
    """The busy reading's model as run.yaml records it: an uncalibrated held error, backlogged reading or
    scaled-out line is None, never 0."""
    g, s = r.busy, r.busy_scaled_out
    return {"offset": g.offset, "gain": g.gain,
            "held_sd": g.held_sd if math.isfinite(g.held_sd) else None,
            "backlogged_mean": g.backlogged_mean if math.isfinite(g.backlogged_mean) else None,
            "scaled_out": None if s is None else {"offset": s.offset, "gain": s.gain,
                                                  "subtasks": list(r.scaled_out_subtasks)}}


def build_arrivals(
    topology: Topology,
    pattern: LoadPattern,
    n_steps: int,
    step_s: float,
    arrivals: ArrivalConfig,
    seed: int,
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Records per step into the job's topics (all sources together) and into each source's topic.

    The arrival process modulates the pattern's total event rate; each topic gets its
    Nexmark share of it, so bursts hit all of a job's topics at once.
    """
    expected = expected_per_step(pattern.step_rates, pattern.step_s, n_steps, step_s)
    total = arrival_counts(expected, arrivals, np.random.default_rng([seed, _SEED_SALT]), step_s)
    shares = topic_shares(topology)
    per_source = {op.name: total * shares.get(op.topic or "", 0.0) for op in topology.sources}
    job = np.sum(list(per_source.values()), axis=0) if per_source else np.zeros(n_steps)
    return job, per_source


class SimBackend:
    """Deterministic Kafka + Flink model advanced in fixed steps."""

    name = "sim"

    def __init__(self) -> None:
        self.model: SimModel | None = None
        self.cfg = SimConfig()
        self.method = "in_place"
        self.arrival_cfg = ArrivalConfig()
        self._job_arrivals = np.zeros(0)
        self._rng = np.random.default_rng(0)
        self._unit_pool = np.zeros(0)
        self._seed = 0
        self.placement: Placement | None = None  # fog nodes (sim.network), where subtasks run
        self._node_choice = NodeChoice.ANY
        self.costs: RunCosts | None = None
        self._window_s = 15.0
        self._rescales: list[dict[str, Any]] = []
        self._blind: list[tuple[float, float]] = []  # Prometheus outages [start, end)
        self._pending: list[BackendEvent] = []  # events due at a later model time (recoveries)
        self._interarrivals_read = True  # False: the autoscaler does not read the sample (`measure_only`)

    # ------------------------------------------------------------------ lifecycle

    def start(self, experiment: Experiment, pattern: LoadPattern, topology: Topology) -> None:
        self.start_with(
            topology,
            pattern,
            experiment.sim,
            experiment.initial_parallelism_map(),
            seed=experiment.seed,
            method=experiment.rescale_method,
            arrivals=experiment.pattern.arrivals,
            duration_s=experiment.duration_s,
            tm_cores=experiment.sim.taskmanager_cpu or experiment.local.taskmanager_cpu_quota,
            partitions=experiment.partitions,
            kafka=experiment.kafka,
        )
        self._window_s = experiment.loop.metrics_window_s

    def start_with(
        self,
        topology: Topology,
        pattern: LoadPattern,
        cfg: SimConfig | None = None,
        parallelism: dict[str, int] | int = 1,
        *,
        seed: int = 1,
        method: str = "in_place",
        arrivals: ArrivalConfig | None = None,
        duration_s: float | None = None,
        cpu_share: dict[str, float] | None = None,
        tm_cores: float | None = None,
        partitions: int | None = None,
        kafka: KafkaSettings | None = None,
        profile: QueryProfile | None = None,
    ) -> None:
        """Start without an Experiment (tests, benchmarks). `tm_cores` default: `cfg.taskmanager_cpu`, else 1;
        `profile` instead of the query's calibrated profile on disk."""
        self.cfg = cfg or SimConfig()
        self.method = method
        self.arrival_cfg = arrivals or ArrivalConfig()
        self._seed = seed
        self._rng = np.random.default_rng([seed, _SEED_SALT, 1])
        self._unit_pool = np.zeros(0)
        span = max(pattern.duration_s, duration_s or 0.0)
        n_steps = int(np.ceil(span / self.cfg.step_s - 1e-9))
        self._job_arrivals, per_source = build_arrivals(
            topology, pattern, n_steps, self.cfg.step_s, self.arrival_cfg, seed
        )
        par = parallelism if isinstance(parallelism, dict) else {n: parallelism for n in topology.names}
        self.costs = run_costs(topology, self.cfg, tm_cores or self.cfg.taskmanager_cpu or 1.0, profile)
        if self.costs.warmup is not None:  # several cold starts measured: the experiment's seed and the noise seed
            # pick this run's (so a fidelity cell's sim repetitions, which vary the noise seed, go through them)
            draw = seed + (self.cfg.noise_seed if self.cfg.noise_seed is not None else 0)
            self.costs = replace(self.costs, warmup=self.costs.warmup.for_run(draw))
        self.kafka = kafka or KafkaSettings()
        self._rescales = []
        self.model = SimModel(topology, per_source, self.cfg, par, cpu_share, costs=self.costs,
                              partitions=partitions, kafka=self.kafka)
        self.placement = None
        self._node_choice = NodeChoice.ANY
        if self.cfg.network is not None:
            self.placement = Placement(self.cfg.network, par, np.random.default_rng([seed, _SEED_SALT, 2]))
            self._apply_network()

    def _apply_network(self) -> None:
        """The placement's ND_max and capacity loss onto the model (multiplies the cost model's capacity)."""
        placement, m = self.placement, self._m()
        if placement is not None:
            m.set_network({op: placement.nd_max(op) for op in placement.nodes},
                          {op: placement.loss_subtasks(op) for op in placement.nodes})

    def snapshot_is_pure(self) -> bool:
        """The readout reads the model's rows and state (the time series comes from the model's steps); only
        an inter-arrival sample draws from the run's random stream."""
        return not self._interarrivals_read

    def measure_only(self, metrics: frozenset[Metric]) -> None:
        """Skip the inter-arrival sample when the autoscaler does not read it (`MeasuresOnDemand`).

        The sample draws from its own generator, so leaving it out changes no other reading."""
        self._interarrivals_read = Metric.INTERARRIVAL in metrics

    def choose_nodes(self, choice: NodeChoice) -> None:
        """The autoscaler's node choice for the next rescale (`PlacesReplicas`)."""
        self._node_choice = choice

    def _m(self) -> SimModel:
        if self.model is None:
            raise RuntimeError("sim backend not started")
        return self.model

    def now(self) -> float:
        return self._m().now

    def advance_to(self, t: float) -> None:
        self._m().run_until(t)

    # ------------------------------------------------------------------ monitor

    def snapshot(self, window_s: float) -> MetricsSnapshot:
        m = self._m()
        if any(a <= m.now < b for a, b in self._blind):  # Prometheus is down: nothing measured
            return MetricsSnapshot.unmeasured(m.now, window_s, m.topology, m.parallelism, m.cpu_share,
                                              "prometheus stopped (injected fault stop-prometheus)")
        seed = self.cfg.noise_seed if self.cfg.noise_seed is not None else self._seed
        snap = readout.snapshot(m, window_s, self._interarrivals(), seed=seed)
        if not self._interarrivals_read and m.k > 0 and self.cfg.interarrival_sample > 0:
            snap = replace(snap, why_missing={**snap.why_missing, str(Metric.INTERARRIVAL): INTERARRIVALS_UNREAD})
        return snap

    def _interarrivals(self) -> np.ndarray | None:
        size = self.cfg.interarrival_sample
        m = self._m()
        if size <= 0 or m.k == 0 or not self._interarrivals_read:
            return None
        n = max(1, int(round(self.cfg.interarrival_window_s / m.dt)))
        counts = self._job_arrivals[max(0, m.k - n) : m.k]
        # A rotating window into one pool of pre-drawn Exp(1) variates: deterministic and
        # cheap enough to sample at every loop period.
        pool = self._unit_pool
        if len(pool) < 2 * size:
            pool = self._unit_pool = self._rng.standard_exponential(max(4 * size, 65536))
        off = (m.k * 7919) % (len(pool) - size)
        return interarrival_sample(counts, self.arrival_cfg, self._rng, size, m.dt, pool[off : off + size])

    # ------------------------------------------------------------------ execute

    def rescale(self, parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        m = self._m()
        before_p, before_s = m.parallelism, m.cpu_share
        target_p = {**before_p, **{k: int(v) for k, v in parallelism.items() if k in before_p}}
        target_s = {**before_s, **{k: float(v) for k, v in (cpu_share or {}).items() if k in before_s}}
        unknown = sorted(set(parallelism) - set(before_p))
        if unknown:
            return RescaleResult(before_p, before_s, ok=False, method=f"sim:{self.method}",
                                 error=f"unknown operators {unknown}")
        if target_p == before_p and target_s == before_s:
            return RescaleResult(before_p, before_s, downtime_s=0.0, method="sim:none")
        if target_p == before_p:  # vertical only: an in-place resize, no restart
            downtime = self.cfg.vertical_downtime_s
            m.reconfigure(target_p, target_s)
            m.stop_for(downtime)
            return RescaleResult(m.parallelism, m.cpu_share, downtime_s=downtime, method="sim:vertical")
        costs = self.costs
        assert costs is not None
        t_request = m.now
        before_tms, after_tms = sum(before_p.values()), sum(target_p.values())
        startup = costs.startup_s if after_tms > before_tms else 0.0
        if startup > 0.0 and costs.host is not None:  # the new JVMs share what the running stack leaves
            startup = costs.host.startup_s(after_tms - before_tms, startup, self._stack_cores(costs.host))
        inside = self.cfg.startup_inside_downtime
        if startup > 0.0 and not inside:  # new task managers start while the job runs on at its old configuration
            m.run_until(m.now + startup)
        fixed = self.cfg.rescale_downtime_s  # an experiment's stated restart (e.g. Gesscale's Raspberry Pi)
        downtime = fixed if fixed is not None else costs.rescale_downtime(self.method, m.state_bytes,
                                                                          fresh_taskmanagers=after_tms > before_tms)
        if inside:  # the thesis' redeploy: stop, scale the task managers, deploy a new job manager, restore
            redeploy = self.cfg.jobmanager_redeploy_s
            downtime += startup + (costs.startup_s if redeploy is None else redeploy)
        m.tms = max(before_tms, after_tms)  # registered now; the surplus goes after the restart
        m.reconfigure(target_p, target_s, resumes_at=m.now + downtime)
        m.restart_meters()
        method = f"sim:{self.method}"
        choice = self._node_choice
        if self.placement is not None:  # the new subtasks go where the autoscaler chose
            self.placement.apply(target_p, choice)
            self._apply_network()
            method += f":{choice}"
        self._node_choice = NodeChoice.ANY
        m.stop_for(downtime)
        m.run_until(m.now + downtime)
        if after_tms < before_tms and costs.stop_s > 0.0:  # idle task managers stopped while the job runs
            m.run_until(m.now + costs.stop_s)
        m.tms = None
        self._rescales.append({"t": t_request, "before": before_p, "after": target_p, "startup_s": startup,
                               "downtime_s": downtime, "state_bytes": m.state_bytes, "method": self.method,
                               **({"node_choice": str(choice)} if self.placement is not None else {})})
        return RescaleResult(m.parallelism, m.cpu_share, downtime_s=downtime, method=method)

    def _stack_cores(self, host: HostShare) -> float:
        """CPU the running stack takes now: the fixed part, the generator and broker at the recent input rate
        (over the metrics window), and the running task managers at their quota (a scale-up comes when they
        are busy)."""
        m = self._m()
        n = max(1, int(round(self._window_s / m.dt)))
        recent = self._job_arrivals[max(0, m.k - n): m.k]
        rate = float(recent.mean()) / m.dt if len(recent) else 0.0
        assert self.costs is not None
        tms = sum(p * s for p, s in zip(m.par, m.share, strict=True)) * self.costs.tm_cores
        return host.fixed_cores + host.cores_per_record * rate + tms

    def drain_events(self) -> list[BackendEvent]:
        """Recoveries of injected faults once the model reaches them (the model has no faults of its own)."""
        now = self.now() if self.model is not None else 0.0
        due = [e for e in self._pending if e.t <= now + 1e-9]
        self._pending = [e for e in self._pending if e.t > now + 1e-9]
        return due

    # ------------------------------------------------------------------ faults

    def inject_fault(self, fault: FaultSpec) -> dict[str, Any]:
        """Model the outage of `fault` from now (see the module docstring)."""
        from harness.faults import FaultKind

        m = self._m()
        d = m.topology.rescale_downtime
        kind, now = fault.kind, m.now
        meta = {"fault_kind": kind.value, "fault_id": None}
        if kind in (FaultKind.KILL_TASKMANAGER, FaultKind.KILL_JOBMANAGER):
            key, default = ("tm_recovery_s", 30.0) if kind == FaultKind.KILL_TASKMANAGER else ("jm_recovery_s", 45.0)
            outage = d.get(key, default)
            m.stop_for(outage)
            m.begin_deployment()  # restored from its checkpoint: a new deployment of the job
            self._recovery(now + outage, f"{kind.value}: job restored from its checkpoint (modelled)", outage, meta)
            return {"modelled_outage_s": outage}
        if kind == FaultKind.RESTART_KAFKA:
            outage = (fault.for_s or 0.0) + d.get("kafka_restart_s", 10.0)
            m.stop_for(outage)
            self._no_input(now, now + outage)
            self._recovery(now + outage, "restart-kafka: broker back, job reading again (modelled)", outage, meta)
            return {"modelled_outage_s": outage}
        if kind == FaultKind.STOP_PROMETHEUS:
            self._blind.append((now, now + (fault.for_s or 0.0)))
            return {}
        if kind == FaultKind.PAUSE_GENERATOR:
            self._no_input(now, now + (fault.for_s or 0.0))
            return {}
        raise ValueError(f"unknown fault kind {kind}")

    def end_fault(self, fault: FaultSpec) -> dict[str, Any]:
        return {}  # every modelled outage was scheduled with its end when it began

    def _recovery(self, t: float, reason: str, outage: float, meta: dict[str, Any]) -> None:
        data = {**meta, "outage_s": outage, "modelled": True}
        self._pending.append(BackendEvent(t, EventKind.RECOVERY, reason, data))

    def _no_input(self, start: float, end: float) -> None:
        """The generator offers nothing in [start, end): those records are never produced (load shortfall)."""
        m = self._m()
        k0, k1 = int(np.ceil(start / m.dt - 1e-9)), int(np.ceil(end / m.dt - 1e-9))
        for _, arr in m.arrivals:
            for k in range(max(0, k0), min(k1, len(arr))):
                arr[k] = 0.0
        self._job_arrivals[max(0, k0):max(0, min(k1, len(self._job_arrivals)))] = 0.0

    # ------------------------------------------------------------------ record

    def timeseries(self) -> pa.Table:
        return readout.timeseries(self._m(), self._blind)

    def save_artifacts(self, run_dir: Path) -> dict[str, Any]:
        return {}

    def facts(self) -> dict[str, Any]:
        m = self.model
        c = self.costs
        out: dict[str, Any] = {
            "backend": self.name,
            "sim": self.cfg.model_dump(mode="json"),
            "rescale_method": self.method,
            "arrivals": self.arrival_cfg.model_dump(mode="json"),
            "topic_shares": topic_shares(m.topology) if m else {},
            "steps": m.k if m else 0,
            "kafka": {**self.kafka.model_dump(mode="json"), "partitions": m.partitions if m else None,
                      "expired_total": m.expired if m else 0.0},
            "rescales": list(self._rescales),
            **({"nodes": {op: list(nodes) for op, nodes in self.placement.nodes.items()}}
               if self.placement is not None else {}),
        }
        if c is not None and m is not None:
            out["costs"] = {
                "source": c.source,
                "calibrated": c.calibrated,
                "taskmanager_cpu": c.tm_cores,
                "readings": "flink (calibrated bias and noise)" if c.noisy else "exact",
                "capacity_per_subtask": {nm: round(op.capacity(c.tm_cores), 3) for nm, op in zip(m.names, c.ops,
                                                                                             strict=True)},
                # the capacity's fraction where a feeding operator runs scaled out, where measured
                "fed_scaled_out": {nm: round(op.fed_scaled_out, 4) for nm, op in zip(m.names, c.ops, strict=True)
                                   if op.fed_scaled_out != 1.0},
                # the share of its quota a saturated task manager's CPU reached in the calibration
                "cpu_saturated": {nm: round(op.saturated_fraction, 4) for nm, op in zip(m.names, c.ops, strict=True)},
                "taskmanager_startup_s": c.startup_s,
                "host_share": c.host.model_dump(mode="json") if c.host is not None else None,
                "host_speed_sha256_mb": c.host_speed_sha256_mb,  # the profile's host's; this run measures none
                "calibrated_at": c.calibrated_at,
                "taskmanager_stop_s": c.stop_s,
                "rescale_downtime": {k: v.model_dump(mode="json", exclude={"points"}) for k, v in c.downtime.items()},
                # the busy reading's model the autoscalers read through (held_sd None: not calibrated)
                "busy_reading": {nm: _reading_record(op.readings) for nm, op in zip(m.names, c.ops, strict=True)}
                if c.noisy else None,
            }
        return out

    def stop(self) -> None:
        pass
