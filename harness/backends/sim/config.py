"""Typed knobs of the simulator (recorded in run.yaml)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeFloat,
    NonNegativeInt,
    PositiveFloat,
    PositiveInt,
    field_validator,
)


class NetworkConfig(BaseModel):
    """`sim.network`: fog nodes and the effect of their delays on an operator's capacity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    node_delays_ms: tuple[NonNegativeFloat, ...] = Field(
        ..., min_length=1, description="per node: delay to the network core (ms); RTT(i, j) = d_i + d_j"
    )
    slots_per_node: PositiveInt = Field(1, description="task managers (one subtask each) a node can host")
    mst_loss_per_ms: NonNegativeFloat = Field(
        ..., description="gamma / alpha of Gesscale's eq. 1: subtasks' worth of capacity lost per ms of ND_max"
    )
    operators: tuple[str, ...] | None = Field(None, description="operators placed on the nodes (None: every one)")
    loss_burns_cpu: bool = Field(
        True, description="true: the capacity the delay takes reads as CPU time (a subtask at its network-limited "
                          "capacity shows saturated CPU); false: it is waiting on the delayed links, which burns "
                          "no CPU, so CPU shows only the cost model's work (busy x the capacity the network leaves)")

    @field_validator("node_delays_ms")
    @classmethod
    def _finite(cls, v: tuple[float, ...]) -> tuple[float, ...]:
        if any(not math.isfinite(x) for x in v):
            raise ValueError("node delays must be finite")
        return v

    @property
    def slots(self) -> int:
        return len(self.node_delays_ms) * self.slots_per_node

    def rtt(self, i: int, j: int) -> float:
        return 0.0 if i == j else float(self.node_delays_ms[i] + self.node_delays_ms[j])

    def nd_max(self, nodes: Sequence[int]) -> float:
        """Greatest round-trip delay among the distinct nodes in `nodes` (0 for one node)."""
        used = sorted(set(nodes))
        return max((self.rtt(a, b) for k, a in enumerate(used) for b in used[k + 1 :]), default=0.0)


class SimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step_s: float = Field(1.0, gt=0, description="model step; 1 s as in the issue")
    record_every_s: float = Field(5.0, gt=0, description="timeseries resolution (Prometheus scrape = 5 s)")
    buffer_s: PositiveFloat = Field(
        2.0, description="queued input a network buffer holds, in seconds of the operator's capacity"
    )
    taskmanager_cpu: PositiveFloat | None = Field(
        None, description="CPUs one task manager may use; null = the experiment's local.taskmanager_cpu_quota, "
                          "so `--backend sim` of a local experiment is the same experiment")
    profile: Literal["calibrated", "first_guess"] = Field(
        "calibrated", description="costs from queries/topologies/calibrated/<q>.cpu-<quota>.yaml (the quota "
                     "nearest the task managers' CPUs) when one exists, or the "
                                  "first guess in queries/topologies/<q>.yaml")
    readings: Literal["flink", "exact"] = Field(
        "flink", description="flink: readings sampled and averaged like Flink's meters and Prometheus, with the "
                             "calibrated bias and noise; exact: the model's true values (tests)")
    noise_seed: int | None = Field(
        None, description="seed of the readings' noise; null = the experiment's seed (repetitions of one "
                          "experiment that keep the load identical vary this); with several calibrated cold starts "
                          "it also picks the run's (experiment seed + noise seed, 0 when null, mod their number)")
    scrape_interval_s: PositiveFloat = Field(5.0, description="Prometheus scrape interval (local: 5 s)")
    meter_interval_s: PositiveFloat = Field(
        5.0, description="busy/idle/backpressured gauges update every this many seconds, and the CPU signals average "
                         "over it (Flink's metric view interval; a calibrated profile overrides it)")
    meter_window_s: PositiveFloat = Field(  # harness.gauge_window.GAUGE_WINDOW_S (numpy-free here: `bench validate`)
        60.0, description="a busy/idle/backpressured gauge reports the mean of its updates over this many seconds, "
                          "counted from its task's start after a (re)start (Flink 1.17+ TimerGauge: 60 s, 12 updates; "
                          "at most meter_interval_s: each update alone, as Flink before 1.17 reports)")
    taskmanager_startup_s: NonNegativeFloat | None = Field(
        None, description="a new task manager's start-up before a scale-up takes effect; null = calibrated "
                          "(0 without a calibrated profile)")
    taskmanager_warmup: bool = Field(
        True, description="fresh task managers take nothing for the measured dead time, then start slow and warm "
                          "up as the calibrated profile measured (`warmup`: consumers, class loading and the JIT, "
                          "by the CPU time they had); false, or a profile without it: every task manager is warm "
                          "from its first second")
    host_share: bool = Field(
        True, description="task managers started together share the host CPU the rest of the stack leaves, as "
                          "the calibrated profile measured it (`host`); false, or a profile without it: each "
                          "new task manager starts in the time one took alone")
    startup_inside_downtime: bool = Field(
        False, description="new task managers start after the job stopped, so their start-up is downtime (the "
                           "thesis' redeploy, ch. 6.4.1); false: they start first while the job runs (local)")
    jobmanager_redeploy_s: NonNegativeFloat | None = Field(
        0.0, description="extra downtime to redeploy the job manager on each restart (thesis ch. 6.4.1); "
                         "null = as long as a task manager's start-up")
    cpu_max: float = Field(
        0.9, gt=0, le=1, description="first guess only: JVM CPU load at a fully used quota"
    )
    cpu_base: float = Field(0.03, ge=0, lt=1, description="first guess only: CPU of an idle task manager")
    backpressure_threshold: float = Field(
        0.1, ge=0, le=1, description="exact readings: isBackPressured when the backpressured fraction exceeds this"
    )
    lag_deriv_window_s: PositiveFloat | None = Field(
        None, description="window of deriv(lag); null = the loop's metrics window, as the PromQL catalogue")
    interarrival_sample: NonNegativeInt = Field(5000, description="inter-arrival times per snapshot (0: none)")
    interarrival_window_s: PositiveFloat = Field(60.0, description="the sample covers this many recent seconds")
    vertical_downtime_s: NonNegativeFloat = Field(
        0.0, description="downtime of a CPU-share-only change (in-place resize: none)"
    )
    rescale_downtime_s: NonNegativeFloat | None = Field(
        None, description="override: downtime of every parallelism change, replacing the calibrated per-method "
                          "model (costs.rescale_downtime; start-up is still priced by it); for a paper's stated "
                          "restart on other hardware (Gesscale's 120 s Raspberry Pi restart). null = the model"
    )
    network: NetworkConfig | None = Field(None, description="fog nodes with network delays (Gesscale, sec. V-A)")
