"""What one simulated run's operators cost, from the calibrated profile (or the first guess).

A subtask's speed is the CPU its task manager may use: capacity(cores) = (cores - overhead) /
cores_per_record (`harness.calibrated_profile.CapacityFit`), with cores = CPU share x the task
manager's CPU. So a local experiment (its `local.taskmanager_cpu_quota` and `pattern.scale`) runs on
the simulator as the same experiment, and a thesis-scale run takes the thesis' task-manager size
(`sim.taskmanager_cpu`). Per-record cost grows with the state a subtask holds where calibration
measured it (q3, q5, q8, q11). CPU is the calibrated fraction of the quota a busy task manager
reaches, linear in the subtask's utilisation from its idle CPU. A fresh task manager is slower while
its JVM warms up, by the calibrated curve (`WarmUp`) over the CPU time it has had. Where the profile
measured the host's CPU (`HostShare`), task managers started together share what the rest of the stack
leaves of the host, so a big scale-up starts slower than one task manager alone.

A query without a calibrated profile falls back to `queries/topologies/<q>.yaml`: its `capacity` is
taken as records/s at `capacity_cpu` cores (1 CPU: a first guess at thesis scale), no overhead,
and the old exact readings (no noise, no bias) with the CPU constants of `SimConfig`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import cached_property

from harness.backends.sim.config import SimConfig
from harness.calibrated_profile import (
    CapacityFit,
    DowntimeModel,
    GaugeModel,
    HostShare,
    OperatorReadings,
    QueryProfile,
    WarmUp,
    load_profile,
)
from harness.topology import Topology

FIRST_GUESS_CPU = 1.0  # cores a first-guess `capacity` refers to (thesis scale, ch. 6 gives no TM size)


@dataclass(frozen=True)
class OpCost:
    """One operator's cost model, resolved for the run's task-manager size."""

    fit: CapacityFit
    selectivity: float
    idle_fraction: float  # CPU of an idle task manager, fraction of its quota at share 1.0
    saturated_fraction: float  # CPU of a saturated task manager, fraction of its quota
    state_per_gb: float = 0.0  # relative per-record cost growth per GB of state per subtask
    state_bytes_per_record: float = 0.0  # state growth per processed record (within the query's TTL)
    readings: OperatorReadings = field(default_factory=OperatorReadings)
    # its capacity's fraction where an operator feeding it runs at two or more subtasks (the profile's
    # `fed_scaled_out`; 1: not measured, or a source)
    fed_scaled_out: float = 1.0

    def busy_at(self, subtasks: int) -> GaugeModel:
        """`readings.busy_at(subtasks)`, its scaled-out model built once per run (the readout asks every snapshot)."""
        return self.readings.busy if subtasks <= 1 else self._busy_scaled_out

    @cached_property
    def _busy_scaled_out(self) -> GaugeModel:
        return self.readings.busy_at(2)

    def capacity(self, cores: float, state_bytes_per_subtask: float = 0.0) -> float:
        """Records/s of one subtask given the cores it may use and the state it holds (a saturated task
        manager gets `saturated_fraction` of them, as measured)."""
        base = self.fit.capacity(cores * self.saturated_fraction)
        if self.state_per_gb > 0.0 and state_bytes_per_subtask > 0.0:
            base /= 1.0 + self.state_per_gb * state_bytes_per_subtask / 1e9
        return max(base, 1e-9)


@dataclass(frozen=True)
class RunCosts:
    tm_cores: float  # CPUs one task manager may use (share 1.0)
    host_cpus: float  # CPUs the JVM's CPU load is relative to
    ops: tuple[OpCost, ...]
    startup_s: float  # a new task manager's JVM start until it registered
    stop_s: float  # stopping task managers after a scale-down (the job already runs)
    downtime: dict[str, DowntimeModel]
    meter_interval_s: float
    calibrated: bool
    source: str  # where the numbers came from (recorded in run.yaml)
    noisy: bool = True
    meter_delay_s: float = 0.0  # a scrape finds the meters' latest update this old (0: updated at the scrape)
    warmup: WarmUp | None = None  # a fresh task manager's speed while it warms up (None: warm from the start)
    host: HostShare | None = None  # the host CPU task managers share with the stack (None: each gets its quota)
    # the profile's measuring host's speed (harness.host_speed); None: not measured, or no profile (first guess)
    host_speed_sha256_mb: float | None = None
    calibrated_at: str | None = None  # the profile's measurement time (ISO 8601); None: no profile

    def rescale_downtime(self, method: str, state_bytes: float, fresh_taskmanagers: bool = True) -> float:
        """`fresh_taskmanagers`: the job restarts on task managers started for this rescale (a scale-up)."""
        model = self.downtime.get(method) or self.downtime.get("in_place")
        return model.downtime(state_bytes, fresh_taskmanagers) if model else 0.0

    @property
    def state_dependent(self) -> bool:
        return any(o.state_per_gb > 0.0 for o in self.ops)


def _first_guess(topology: Topology, cfg: SimConfig, tm_cores: float) -> RunCosts:
    base = cfg.cpu_base
    jvm = GaugeModel(offset=0.0, gain=cfg.cpu_max)  # the old rule: the JVM's reading tops out at cpu_max
    ops = tuple(
        OpCost(
            fit=CapacityFit(cores_per_record=FIRST_GUESS_CPU / max(o.capacity, 1e-9), method="first guess"),
            selectivity=o.selectivity,
            idle_fraction=base,
            saturated_fraction=1.0,
            state_bytes_per_record=o.state_bytes_per_record,
            readings=OperatorReadings(cpu_jvm=jvm),
        )
        for o in topology.operators
    )
    d = topology.rescale_downtime
    downtime = {
        "in_place": DowntimeModel(base_s=d.get("in_place_base_s", 6.0)),
        "reactive": DowntimeModel(base_s=d.get("in_place_base_s", 6.0)),
        "savepoint": DowntimeModel(base_s=d.get("savepoint_base_s", 12.0), s_per_gb=d.get("savepoint_s_per_gb", 20.0)),
    }
    return RunCosts(tm_cores=tm_cores, host_cpus=tm_cores, ops=ops,
                    startup_s=cfg.taskmanager_startup_s if cfg.taskmanager_startup_s is not None else 0.0,
                    stop_s=0.0, downtime=downtime, meter_interval_s=cfg.meter_interval_s, calibrated=False,
                    source=f"first guess (queries/topologies/{topology.query}.yaml)", noisy=False)


def _calibrated(topology: Topology, profile: QueryProfile, cfg: SimConfig, tm_cores: float) -> RunCosts:
    ops = []
    for o in topology.operators:
        p = profile.operators.get(o.name)
        if p is None:
            raise ValueError(f"calibrated profile of {topology.query} has no operator {o.name!r}: "
                             "re-run bench calibrate")
        ops.append(OpCost(
            fit=p.capacity_fit,
            selectivity=p.selectivity,
            # the CPU model is in cores at the calibration quota: an idle TM's CPU does not grow with its size
            idle_fraction=min(1.0, max(0.0, p.cpu.idle_cores) / tm_cores),
            saturated_fraction=p.cpu.saturated_fraction if math.isfinite(p.cpu.saturated_fraction) else 1.0,
            state_per_gb=p.state.per_gb if p.state is not None else 0.0,
            state_bytes_per_record=(p.state.bytes_per_record if p.state is not None
                                    and math.isfinite(p.state.bytes_per_record) else o.state_bytes_per_record),
            readings=p.readings,
            fed_scaled_out=p.fed_scaled_out.fraction if p.fed_scaled_out is not None else 1.0,
        ))
    startup = profile.taskmanager_startup_s.mean
    stop = profile.taskmanager_stop_s.mean if profile.taskmanager_stop_s else 0.0
    return RunCosts(
        tm_cores=tm_cores,
        host_cpus=float(profile.provenance.host_cpus),
        ops=tuple(ops),
        startup_s=cfg.taskmanager_startup_s if cfg.taskmanager_startup_s is not None else
        (startup if math.isfinite(startup) else 0.0),
        stop_s=stop if math.isfinite(stop) else 0.0,
        downtime=dict(profile.rescale_downtime),
        meter_interval_s=(profile.meters.interval_s if math.isfinite(profile.meters.interval_s)
                          else cfg.meter_interval_s),
        calibrated=True,
        source=f"calibrated {profile.provenance.date} on {profile.provenance.cpu_model} at {profile.cpu_quota:g} CPU, "
               f"{profile.provenance.taskmanager_jit} JIT"
               + _warmup_note(profile.warmup if cfg.taskmanager_warmup else None)
               + (", measured host CPU share" if cfg.host_share and profile.host is not None else "")
               + f" ({profile.provenance.command})",
        meter_delay_s=meter_delay(profile),
        warmup=usable_warmup(profile.warmup) if cfg.taskmanager_warmup else None,
        host=profile.host if cfg.host_share else None,
        host_speed_sha256_mb=profile.provenance.host_speed_sha256_mb,
        calibrated_at=profile.provenance.date,
    )


def usable_warmup(w: WarmUp | None) -> WarmUp | None:
    """The part of a measured cold start the simulator can use. A curve whose cold start was not overloaded
    (`saturated` false: the sources' backlog did not grow, e.g. the generator fell short) describes the load it
    got, not the task managers' speed, so only its dead time (the first record's delay) is kept."""
    if w is None or w.saturated:
        return w
    return w.model_copy(update={"initial_fraction": 1.0, "starts": []})


def _warmup_note(w: WarmUp | None) -> str:
    if w is None:
        return ""
    if w.saturated:
        return ", measured warm-up"
    return ", measured dead time only (its cold start was not overloaded: no warm-up curve)"


def meter_delay(profile: QueryProfile) -> float:
    """How old the meters' latest update is when Prometheus scrapes it.

    The meters update every interval at a phase of their own, so a scrape finds an update half an
    interval old on average. A reading built from such block averages reaches 63 % of a load step
    0.63 + 0.5 intervals after it on average (the calibrator polls the meters directly); whatever
    lag was measured beyond that is added. Capped below one interval.
    """
    m = profile.meters
    interval = m.interval_s if math.isfinite(m.interval_s) and m.interval_s > 0 else 5.0
    extra = 0.0
    if math.isfinite(m.busy_lag_s):
        extra = max(0.0, m.busy_lag_s - (0.63 + 0.5) * interval)
    return float(min(interval - 1.0, 0.5 * interval + extra))


def run_costs(topology: Topology, cfg: SimConfig, tm_cores: float, profile: QueryProfile | None = None,
              use_calibration: bool = True) -> RunCosts:
    """The run's cost model: the calibrated profile of the query when there is one."""
    if use_calibration and cfg.profile == "calibrated":
        profile = profile or load_profile(topology.query, cores=tm_cores)
    else:
        profile = None
    costs = _calibrated(topology, profile, cfg, tm_cores) if profile else _first_guess(topology, cfg, tm_cores)
    if cfg.readings == "exact":  # the model's true values: no noise, and no calibrated gauge bias either
        ops = tuple(replace(o, readings=OperatorReadings()) for o in costs.ops) if costs.calibrated else costs.ops
        costs = RunCosts(**{**costs.__dict__, "noisy": False, "ops": ops})
    return costs
