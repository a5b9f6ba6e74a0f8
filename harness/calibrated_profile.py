"""The calibrated profile of one query: what `bench calibrate` measured and the simulator reads.

One YAML file per query and task-manager quota in `queries/topologies/calibrated/<query>.cpu-<quota>.yaml`
(the simulator uses the one nearest its task managers' CPUs), beside the first-guess
topology (`queries/topologies/<query>.yaml`, which keeps the operator graph). Everything in it was
measured on the machine named in `provenance`, at the task-manager CPU quota in `cpu_quota`:

- per operator: the records/s one subtask sustained at CPU shares of that quota (saturation), the
  fitted line capacity(cores) = (cores - overhead) / cores_per_record that the simulator uses for
  any task-manager size, the CPU the task manager used per record (and when idle), selectivity,
  state bytes per record and how the per-record cost grows with state;
- per operator, how Flink's readings relate to the true load (`GaugeModel`: offset, gain and
  noise of busy time, backpressured time, and both CPU signals);
- the meters' update interval and lag, task-manager start-up and stop time, rescale downtime
  per method against state size, and how fast a fresh task manager warms up;
- where measured beside a scale-up (not by `bench calibrate`), the host CPU the task managers share
  with the rest of the stack (`HostShare`).

Pure data (pydantic) plus YAML read/write; no measurement code here. It sits below both its writer
(`harness.calibration`, which measures the real stack) and its reader (the sim backend), so the
backends never import the calibration commands.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field

from harness import yamlio
from harness.topology import TOPOLOGIES_DIR
from harness.vocabulary import TaskManagerJit

CALIBRATED_DIR = TOPOLOGIES_DIR / "calibrated"
RescaleMethod = Literal["in_place", "savepoint", "reactive"]
RESCALE_METHODS: tuple[RescaleMethod, ...] = ("in_place", "savepoint", "reactive")


class _Model(BaseModel):
    # validators built on first use: a run of an uncalibrated query (most sim runs) builds the few models the
    # first-guess costs use, not the whole profile's (issue 13)
    model_config = ConfigDict(extra="forbid", defer_build=True)


class HostLoad(_Model):
    """Machine hygiene: how busy the host was around the measurement (a loaded host biases capacities low)."""

    before_1m: float = Field(description="1-minute load average just before the measurement")
    before_5m: float = math.nan
    during_mean_1m: float = Field(math.nan, description="mean 1-minute load average while measuring")
    during_max_1m: float = math.nan
    host_cpu_busy: float = Field(math.nan, description="fraction of all host CPUs busy while measuring (/proc/stat)")


class Provenance(_Model):
    date: str
    command: str
    cpu_model: str
    host_cpus: int
    flink_version: str
    kafka_version: str
    taskmanager_cpu_quota: float
    taskmanager_jit: TaskManagerJit = Field(
        TaskManagerJit.TIERED,
        description="the task managers' JIT while measuring (local.taskmanager_jit; profiles from before it was "
                    "recorded were measured with the JVM's tiered default)")
    taskmanager_memory: str | None = Field(
        None, description="the task managers' process memory while measuring (local.taskmanager_memory); None: "
                          "the local stack's default of the day (profiles from before it was recorded)")
    host_load: HostLoad
    host_speed_sha256_mb: float | None = Field(
        None, description="the measuring host's speed (harness.host_speed: MB of SHA-256 per CPU-second), taken "
                          "when the query was measured; None: not measured (profiles from before it was recorded)")
    probe_share: float | None = Field(
        None, description="the fraction of the recorder's task-manager scrapes read from the filtered probe reporter "
                          "(local.probe_reporter, a tenth of the full one's bytes) rather than the full one; None: not "
                          "recorded (profiles from before the probe: all full)")
    duration_s: float = Field(description="wall time of this query's measurement")
    quick: bool = False
    notes: list[str] = Field(default_factory=list)


class SharePoint(_Model):
    """Records/s one subtask of an operator sustained at one CPU share of the task-manager quota."""

    share: float
    capacity: float = Field(description="input records/s of the operator per subtask")
    saturated: bool = Field(description="the operator was the bottleneck (busy near 1000 ms/s, upstream blocked)")
    cpu_cores: float = Field(math.nan, description="CPU the task manager used meanwhile (/proc)")
    busy_ms: float = math.nan
    n: int = 0
    fed_by_several: bool = Field(
        False, description="measured with each subtask fed over several channels (`topology.fed_by_several_channels`: "
                           "a bottleneck or spread phase): a rate of that layout (`fed_scaled_out`), not of the "
                           "capacity fed by one")


class SaturationPool(StrEnum):
    """How a share's repeated saturations were summed up into the one point the capacity line passes."""

    FASTEST = "fastest"  # the fastest, lifted to any faster rate seen at the share (profiles fitted before session 28)
    MEDIAN = "median"  # their median, with the plateaus that kept up faster on their whole CPU (`fit.envelope`)


class CapacityFit(_Model):
    """capacity(cores) = (cores - overhead_cores) / cores_per_record: a subtask's speed is the CPU it may
    use, less what the task manager spends regardless of records (metrics, GC, network threads)."""

    cores_per_record: float
    overhead_cores: float = 0.0
    points: int = 0
    method: str = Field("", description="how the line was fitted (saturation points, CPU model)")
    pool: SaturationPool = Field(SaturationPool.FASTEST, description="the rule in force when the line was fitted "
                                                                     "(also where no saturation was pooled)")

    def capacity(self, cores: float) -> float:
        return max(0.0, cores - self.overhead_cores) / self.cores_per_record


HELD_BACK = 0.2  # an upstream operator backpressured this share of its time: records wait at its bottleneck's input


class NoiseBasis(StrEnum):
    """What one `GaugeModel.noise_sd` point is the standard deviation of."""

    UPDATE = "update"  # one meter update's own noise, drawn afresh per update (profiles fitted before 2026-11-29)
    INTERVAL = "interval"  # one 5-s meter interval's: a busy, idle or backpressured reading (a TimerGauge) is the
    # mean over its window's intervals, so its noise is too and successive updates share most of it; a CPU
    # reading covers one interval


class GaugeModel(_Model):
    """A Flink reading against the true value it stands for: reading = clip(offset + gain x true) + noise.

    `noise_sd` are (true level, standard deviation of the noise `noise_basis` names) points, interpolated in
    between and held beyond the ends. `held_sd` is the part of the error that does not average out: on the
    local stack a restarted job reads the same load differently until its next restart, so the
    calibration reads one load in several deployments and the simulator draws this error once per
    subtask and deployment. Units are those of the reading as a fraction (busy 0..1 of a second,
    CPU 0..1 of the quota or of the host).
    """

    offset: float = 0.0
    gain: float = 1.0
    noise_sd: list[tuple[float, float]] = Field(default_factory=list)
    noise_basis: NoiseBasis = Field(NoiseBasis.UPDATE, description="what `noise_sd` and `backlogged_sd` are the sd "
                                                                     "of: one meter update, or one 5-s interval")
    held_sd: float = Field(math.nan, description="sd of the error held from one restart to the next; NaN: not "
                                                 "calibrated (samples without deployment phases, or too few)")
    held_n: int = Field(0, description="deployments the held error was measured from")
    backlogged_mean: float = Field(math.nan, description=(
        "busy only: the reading of a saturated subtask with records waiting at its input (a run's bottleneck); "
        "NaN: not measured, the line then reads it as everywhere else"))
    backlogged_sd: float = Field(math.nan, description="sd of that reading's noise (as `noise_basis` says) "
                                                       "(NaN: fewer plateaus than calibration.fit."
                                                       "MIN_BACKLOGGED_PLATEAUS told their scatter; the line's sd "
                                                       "at full load is drawn)")
    backlogged_n: int = Field(0, description="plateaus (phases) it was measured in")
    n: int = 0
    rmse: float = math.nan

    def sd(self, level: float | np.ndarray) -> float | np.ndarray:
        if not self.noise_sd:
            return np.zeros_like(level) if isinstance(level, np.ndarray) else 0.0
        xs = [p[0] for p in self.noise_sd]
        ys = [p[1] for p in self.noise_sd]
        out = np.interp(level, xs, ys)
        return out if isinstance(level, np.ndarray) else float(out)

    def mean(self, true: float | np.ndarray) -> float | np.ndarray:
        return self.offset + self.gain * true


class CpuModel(_Model):
    """CPU a task manager uses, in cores, against the records/s its subtask processes."""

    idle_cores: float = Field(description="intercept: CPU with no records")
    cores_per_record: float = Field(description="slope: CPU-seconds per input record")
    saturated_fraction: float = Field(1.0, description="share of its quota a saturated task manager reached")
    n: int = 0
    r2: float = math.nan


class StateCost(_Model):
    """Per-record cost growth with the state a subtask holds: cost(S) = cost(0) x (1 + per_gb x S/GB)."""

    bytes_per_record: float = Field(description="state bytes per processed record within its TTL (checkpoints)")
    per_gb: float = Field(0.0, description="relative per-record CPU growth per GB of state per subtask")
    max_state_bytes: float = Field(0.0, description="largest per-subtask state seen: the fit holds up to here")
    n: int = 0
    slope_p: float = Field(math.nan, description="two-sided p-value of the cost-versus-state slope (NaN: fewer than "
                                                 "three points, no spread in state, or a profile from before it was "
                                                 "kept); per_gb is 0 unless it is under "
                                                 "harness.calibration.fit.STATE_SLOPE_P")


class PendingModel(_Model):
    """A Kafka source's `pendingRecords` against the true backlog of its partitions.

    Its consumer prefetches up to `buffer_records` per subtask (fetch.max.bytes' worth of records) that the
    reading no longer counts, and the reading is as old as that buffer takes to drain, so records that
    arrived meanwhile are missing too: reading = max(0, backlog - min(buffer, backlog) x arrivals / taken).
    Measured in the overloaded cold start (`bench calibrate`): a fresh job takes little, so its reading
    stays near 0 for tens of seconds while the backlog grows; a source that keeps up reads about 0. Fast
    sources held about the same buffer throughout (q1, q2, q11: 205k-245k bids records); a slow one's grew
    through the minute (q5 at 4.6k/s: 1.5k -> 97k), so its median is the cold start's, below the steady one."""

    buffer_records: float = Field(description="records per source subtask the reading does not count")
    points: list[tuple[float, float]] = Field(
        default_factory=list, description="(seconds into the cold start, buffer estimate) it was fitted from")
    n: int = 0


class FlagModel(_Model):
    """How often a scrape finds a subtask flagged back-pressured (Flink's instantaneous `isBackPressured`) while
    nothing downstream of it limits, against the utilisation of the operator it feeds (the busiest one).

    Near its limit a downstream operator's input buffers fill now and then, so its upstream's output waits
    for a moment and the flag is up at that instant, though no second of the plateau was held back: in session
    16's q1 calibration at 0.1 CPU the source was flagged at 7 % and 11 % of the instants of a spread and the
    overload plateau, its map at 0.60 and 0.89 of its capacity, and in no ladder step (0.26-0.56). The fluid
    simulator has no such moments (a subtask that is not blocked for a whole step is never flagged), and the
    bottleneck walk of Dhalion and HPA-Varga starts at a flagged operator.

    `points` are (downstream utilisation, probability per subtask and scrape), non-decreasing in both, from
    (0, 0), interpolated in between and held beyond the last."""

    points: list[tuple[float, float]] = Field(default_factory=list)
    n: int = Field(0, description="subtask samples the points were measured with")

    def probability(self, utilisation: float) -> float:
        pts = self.points
        if not pts or not math.isfinite(utilisation):
            return 0.0
        return float(np.interp(utilisation, [u for u, _ in pts], [p for _, p in pts]))


class OperatorReadings(_Model):
    busy: GaugeModel = Field(default_factory=GaugeModel)
    backpressured: GaugeModel = Field(default_factory=GaugeModel)
    cpu: GaugeModel = Field(default_factory=GaugeModel, description="CPU time / quota against true cores / quota")
    cpu_jvm: GaugeModel = Field(
        default_factory=GaugeModel,
        description="Status.JVM.CPU.Load against true cores / the quota in force (JDK 17 reads the cgroup quota, "
                    "also after a run-time change)")
    pending: PendingModel | None = Field(
        None, description="a source's pendingRecords against the true backlog; None: not measured (read exactly)")
    busy_scaled_out: GaugeModel | None = Field(
        None, description="busy of a subtask of an operator at two or more subtasks (`busy` is at one): q1's source "
                          "at 0.1 CPU reads 0.55-0.64 at one subtask whatever its load, 0.08-0.14 at two; None: not "
                          "measured (or over too narrow a range of loads to extrapolate), `busy` reads it. Its line "
                          "and noise only: the held error and the backlogged level are measured at one subtask")
    scaled_out_subtasks: list[int] = Field(default_factory=list,
                                           description="the operator's subtask counts `busy_scaled_out` came from")
    flagged_near: FlagModel | None = Field(
        None, description="the isBackPressured flag of a subtask whose downstream runs near its limit, nothing "
                          "held back; None: not measured (only a blocked subtask is flagged)")

    def busy_at(self, subtasks: int) -> GaugeModel:
        """The busy gauge's model for a subtask of this operator at `subtasks` subtasks: scaled out, its own line
        with the backlogged level measured at one subtask (a queued bottleneck reads near a full second there,
        q1's map 0.87-0.91, where the scaled-out line, measured unsaturated, would have to be extrapolated)."""
        if subtasks <= 1 or self.busy_scaled_out is None:
            return self.busy
        b = self.busy
        return self.busy_scaled_out.model_copy(update={"backlogged_mean": b.backlogged_mean,
                                                       "backlogged_sd": b.backlogged_sd,
                                                       "backlogged_n": b.backlogged_n})


class FedScaledOut(_Model):
    """One subtask's records/s at share 1.0 where an operator feeding it ran at several subtasks, as a fraction of
    `capacity`: the calibration's bottleneck phase of the operator, the layout of a run once its sources scale out.

    The capacity fit's saturations are measured with one subtask upstream (the overload, probe and share phases).
    Whether more upstream subtasks cost the operator more is a property of the operator, measured here, not
    assumed: q11's session window at 0.1 CPU (session 18) took 15.8k/s fed by 2 source subtasks against 17.0-18.7k
    fed by one (sessions of a bidder merged from several channels). The fraction is one phase's rate against the
    median of the one-channel saturations, so their scatter reaches it: it can exceed 1 where the channels cost
    nothing (q1's map at 0.1 CPU, session 26: 43.0k fed by 3 against 37.6k and 43.8k fed by one, 1.06). The
    simulator runs the operator at this fraction wherever an operator feeding it runs at two or more subtasks."""

    fraction: float = Field(gt=0.0, description="records/s per subtask fed by several upstream subtasks / `capacity`")
    rate: float = Field(description="records/s the subtask took in that phase (the mean where several)")
    upstream_subtasks: list[int] = Field(default_factory=list, description="the feeding operators' subtasks there")
    phases: list[str] = Field(default_factory=list, description="the phases it was measured in")


class OperatorProfile(_Model):
    capacity: float = Field(description="records/s one subtask sustains at share 1.0 of `cpu_quota`")
    capacity_fit: CapacityFit
    shares: list[SharePoint] = Field(default_factory=list)
    selectivity: float
    cpu: CpuModel
    state: StateCost | None = None
    readings: OperatorReadings = Field(default_factory=OperatorReadings)
    parallel_efficiency: dict[str, float] = Field(
        default_factory=dict,
        description="parallelism -> records/s per subtask when overloaded / capacity at parallelism 1 (1 = linear)")
    fed_scaled_out: FedScaledOut | None = Field(
        None, description="its capacity where an operator feeding it runs scaled out (None: not measured, or a "
                          "source: the capacity throughout)")


class Stat(_Model):
    mean: float
    sd: float = 0.0
    n: int = 0
    samples: list[float] = Field(default_factory=list)

    @classmethod
    def of(cls, samples: Sequence[float]) -> Stat:
        xs = [float(x) for x in samples if x is not None and math.isfinite(float(x))]
        if not xs:
            return cls(mean=math.nan, n=0)
        return cls(mean=float(np.mean(xs)), sd=float(np.std(xs, ddof=1)) if len(xs) > 1 else 0.0, n=len(xs),
                   samples=[round(x, 3) for x in xs])


class DowntimeModel(_Model):
    """Seconds without processing for one rescale: base + s_per_gb x checkpointed state (GB).

    The base depends on where the job restarts (measured apart by `bench calibrate`): a scale-up restarts
    it on freshly started task managers, whose cold JVMs load the job's classes at their quota
    (`base_s`); a scale-down restarts it on running, warm ones (`down_base_s`)."""

    base_s: float
    down_base_s: float | None = Field(
        None, description="base of a rescale that starts no task manager; None: not measured apart (base_s)")
    s_per_gb: float = 0.0
    points: list[tuple[float, float]] = Field(default_factory=list,
                                              description="scale-ups' (state bytes, downtime s)")
    down_points: list[tuple[float, float]] = Field(default_factory=list,
                                                   description="scale-downs' (state bytes, downtime s)")
    slope_from: str = Field("", description="where s_per_gb came from (this query, or pooled over queries)")

    def downtime(self, state_bytes: float, fresh_taskmanagers: bool = True) -> float:
        base = self.base_s if fresh_taskmanagers or self.down_base_s is None else self.down_base_s
        return max(0.0, base + self.s_per_gb * max(0.0, state_bytes) / 1e9)


class Meters(_Model):
    """How Flink's readings trail the truth."""

    interval_s: float = Field(5.0, description="busy/idle/backpressured gauges average over and update every")
    busy_lag_s: float = Field(math.nan, description="measured: load step to 63 % of the busy reading's step")
    n: int = 0


class ColdStart(_Model):
    """One measured cold start's own curve (`WarmUp`'s parameters fitted to its bins alone)."""

    initial_fraction: float
    tau_cpu_s: float
    dead_s: float = Field(0.0, ge=0.0)
    rmse: float = math.nan


class WarmUp(_Model):
    """A fresh task manager's speed while its JVM warms up (class loading, the JIT), as a fraction of the
    warm speed at the same CPU: nothing until the job's first record (its dead time, d = `dead_s` x
    `cores` CPU-seconds), then fraction(c) = 1 - (1 - initial_fraction) x exp(-(c - d) / tau_cpu_s).

    `c` is the CPU time the task manager may have used since its job started running (seconds since
    then x the cores of its quota): opening the Kafka consumers, loading and compiling the hot code is a
    fixed amount of CPU work competing with the records for the quota, so a task manager half the size
    starts and warms up in twice the time. That scaling is this model's assumption; the curve was
    measured overloaded at one quota (`cores`), on fresh task managers.
    """

    initial_fraction: float = Field(description="fraction of the warm rate at c = 0 (fitted)")
    tau_cpu_s: float = Field(description="CPU-seconds for the missing speed to shrink by 1/e (fitted)")
    cores: float = Field(description="CPU of one task manager while measuring (the quota at share 1.0)")
    warm_rate: float = Field(description="the warm job's saturated records/s at the same CPU (the fractions' 1)")
    points: list[tuple[float, float]] = Field(
        default_factory=list, description="(seconds since the job ran, fraction of `warm_rate`) per bin")
    rmse: float = math.nan
    saturated: bool = Field(True, description="the sources' backlog grew throughout: the curve is a speed, "
                                              "not the offered rate")
    dead_s: float = Field(0.0, ge=0.0, description="seconds from the job running until its sources took their "
                                                   "first record, at `cores` (0: none seen); the curve starts then")
    starts: list[ColdStart] = Field(
        default_factory=list,
        description="each saturated cold start's own curve where several were measured (the fields above fit them "
                    "all together): fresh task managers land far apart from one start to the next (q1 at 0.1 CPU, "
                    "six local starts: 0.40-0.92 of their own warm rate 20-25 s in), so a run draws one (`for_run`)")

    def for_run(self, seed: int) -> WarmUp:
        """The curve a run's fresh task managers follow: with several cold starts measured, start `seed` mod their
        number (consecutive seeds go through all of them; the sim passes the experiment's seed plus its noise
        seed), else the one curve."""
        if len(self.starts) < 2:
            return self
        s = self.starts[seed % len(self.starts)]
        return self.model_copy(update={"initial_fraction": s.initial_fraction, "tau_cpu_s": s.tau_cpu_s,
                                       "dead_s": s.dead_s, "rmse": s.rmse, "starts": []})

    @property
    def dead_cpu_s(self) -> float:
        return self.dead_s * self.cores

    def fraction(self, cpu_seconds: float) -> float:
        c = cpu_seconds - self.dead_cpu_s
        if self.dead_cpu_s > 0.0 and c < 0.0:
            return 0.0
        if c <= 0.0:
            return self.initial_fraction
        return 1.0 - (1.0 - self.initial_fraction) * math.exp(-c / self.tau_cpu_s)

    def mean_fraction(self, cpu_from: float, cpu_to: float) -> float:
        """The mean fraction between two amounts of CPU time had (the exact integral of `fraction`; the dead
        time's part of the interval counts as 0)."""
        lo, hi = max(0.0, cpu_from), max(0.0, cpu_to)
        if hi - lo < 1e-12:
            return self.fraction(lo)
        dead = self.dead_cpu_s
        if dead <= 0.0:
            return self._curve_mean(lo, hi)
        if hi <= dead:
            return 0.0
        start = max(lo, dead)
        return self._curve_mean(start - dead, hi - dead) * (hi - start) / (hi - lo)

    def _curve_mean(self, lo: float, hi: float) -> float:
        """The curve's exact mean between lo and hi CPU-seconds after the first record."""
        tau = self.tau_cpu_s
        if hi - lo < 1e-12:
            return 1.0 - (1.0 - self.initial_fraction) * math.exp(-lo / tau)
        return 1.0 - (1.0 - self.initial_fraction) * tau * (math.exp(-lo / tau) - math.exp(-hi / tau)) / (hi - lo)


class HostShare(_Model):
    """The host CPU the task managers share with the rest of the local stack, measured beside a scale-up
    (`benchmarks/bench_host_share.py`). A task manager's quota is an upper bound, not a reservation: on this
    host the load generator, the broker, the job manager and Prometheus run beside the task managers, and
    task managers that start together (each at the start-up quota) share what those leave. So N fresh JVMs
    take about N times one JVM's start-up CPU over that rest, where `taskmanager_startup_s` was timed for one
    task manager on its own.

    Every number is a measurement of the host named in the provenance, none is fitted to a run's outcome.
    """

    cpus: float = Field(description="CPUs of the host (all of them: what the stack's processes share)")
    fixed_cores: float = Field(description="CPU of the job manager, Prometheus and the harness, mean while measuring")
    cores_per_record: float = Field(description="CPU-seconds of the load generator and the broker per record "
                                                "produced (the sources' fetches included), over the measurement")
    startup_cpu_s: float = Field(description="CPU-seconds one task manager JVM used from its start until it "
                                             "registered (mean over the task managers measured)")
    startup_cores: float = Field(description="the quota a task manager starts at (local.taskmanager_startup_cpu)")
    samples: list[float] = Field(default_factory=list, description="start-up CPU-seconds per task manager")
    measured: str = Field("", description="when, and by which command")

    def startup_s(self, n_new: int, alone_s: float, busy_cores: float) -> float:
        """Seconds until `n_new` task managers started together have registered, given the CPU the rest of the
        stack takes now (`busy_cores`): each needs `startup_cpu_s` and gets an equal part of what is left (at
        most the start-up quota); never less than the time one took alone (`alone_s`)."""
        if n_new <= 0:
            return 0.0
        left = max(self.cpus - busy_cores, MIN_HOST_LEFT_CORES)
        per_tm = min(self.startup_cores, left / n_new)
        return max(alone_s, self.startup_cpu_s / per_tm)


MIN_HOST_LEFT_CORES = 0.05  # a saturated host still schedules a starting JVM now and then (CFS)


class QueryProfile(_Model):
    query: str
    provenance: Provenance
    cpu_quota: float = Field(description="task-manager CPU quota (cores) the capacities were measured at")
    operators: dict[str, OperatorProfile]
    meters: Meters = Field(default_factory=Meters)
    taskmanager_startup_s: Stat
    taskmanager_stop_s: Stat | None = None
    rescale_downtime: dict[str, DowntimeModel] = Field(default_factory=dict)
    warmup: WarmUp | None = Field(None, description="fresh task managers' warm-up (None: not measured, "
                                                    "the simulator's task managers are warm from the start)")
    host: HostShare | None = Field(None, description="the host CPU shared with the rest of the stack (None: not "
                                                     "measured, every task manager gets its quota)")

    def save(self, directory: Path = CALIBRATED_DIR) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / profile_file_name(self.query, self.cpu_quota)
        tmp = path.with_suffix(".yaml.tmp")
        header = (f"# Calibrated on the local stack by `{self.provenance.command}` ({self.provenance.date}).\n"
                  "# Written by harness.calibration; read by the simulator. Do not edit by hand: re-run it.\n")
        tmp.write_text(header + yaml.safe_dump(_plain(self.model_dump(mode="json")), sort_keys=False, width=110))
        tmp.replace(path)
        return path


def _plain(obj: object) -> object:
    """Tuples to lists and floats rounded, so the YAML stays readable."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_plain(v) for v in obj]
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return None
        return float(f"{obj:.6g}")
    return obj


def profile_file_name(query: str, quota: float) -> str:
    """`<query>.cpu-<quota>.yaml`: a profile is named by the task-manager quota it was measured at."""
    return f"{query}.cpu-{quota:g}.yaml"


def profile_quotas(query: str, directory: Path | None = None) -> dict[float, Path]:
    """Every calibrated profile of `query`, by the quota in its file name."""
    out: dict[float, Path] = {}
    prefix = f"{query}.cpu-"
    for path in (directory or CALIBRATED_DIR).glob(f"{prefix}*.yaml"):
        try:
            out[float(path.name[len(prefix):-len(".yaml")])] = path
        except ValueError:
            continue
    return out


def profile_path(query: str, cores: float | None = None, directory: Path | None = None) -> Path | None:
    """The profile the simulator uses for task managers of `cores` CPUs: the one measured at the nearest quota
    (by ratio; a tie goes to the larger), because capacity per CPU is not constant (a task manager's fixed
    overhead weighs more at a small quota) and a line fitted at one quota extrapolates poorly to another.
    `cores` None: the largest quota. None when `query` was never calibrated. The one place a profile is picked
    (the simulator and the run identity)."""
    found = profile_quotas(query, directory)
    if not found:
        return None
    if cores is None or not cores > 0:
        return found[max(found)]
    return found[min(found, key=lambda q: (abs(math.log(cores / q)), -q))]


def load_profile(query: str, directory: Path | None = None, cores: float | None = None) -> QueryProfile | None:
    """The calibrated profile of `query` for task managers of `cores` CPUs (`profile_path`), or None when it
    was never calibrated."""
    path = profile_path(query, cores, directory)
    return None if path is None else read_profile(path)


def read_profile(path: Path) -> QueryProfile:
    """One profile file, validated (a broken file is named)."""
    raw = yamlio.load(path.read_text())
    try:
        return QueryProfile.model_validate(_none_to_nan(raw))
    except Exception as exc:  # noqa: BLE001 - say which file is broken
        raise ValueError(f"{path}: not a valid calibrated profile: {exc}") from exc


def _none_to_nan(obj: object) -> object:
    """YAML has no NaN spelling we write: unmeasured floats are stored as null and read back as NaN."""
    if isinstance(obj, dict):
        return {k: (math.nan if v is None and k not in _NULLABLE else _none_to_nan(v)) for k, v in obj.items()}
    if isinstance(obj, list):  # a list's null is a number not measured (a rescale's unknown state)
        return [math.nan if v is None else _none_to_nan(v) for v in obj]
    return obj


_NULLABLE = {"state", "taskmanager_stop_s", "warmup", "host", "taskmanager_memory", "pending", "busy_scaled_out",
             "flagged_near", "fed_scaled_out"}
