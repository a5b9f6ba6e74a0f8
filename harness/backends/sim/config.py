"""Typed knobs of the simulator (recorded in run.yaml)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, PositiveFloat


class SimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step_s: float = Field(1.0, gt=0, description="model step; 1 s as in the issue")
    record_every_s: float = Field(5.0, gt=0, description="timeseries resolution (Prometheus scrape = 5 s)")
    buffer_s: PositiveFloat = Field(
        2.0, description="queued input a network buffer holds, in seconds of the operator's capacity"
    )
    cpu_max: float = Field(
        0.9, gt=0, le=1, description="JVM CPU load (Status.JVM.CPU.Load) at 100% busy (the thesis saw ~0.9)"
    )
    cpu_base: float = Field(0.03, ge=0, lt=1, description="TM CPU load of an idle task manager")
    backpressure_threshold: float = Field(
        0.1, ge=0, le=1, description="isBackPressured when the backpressured-time fraction exceeds this"
    )
    lag_deriv_window_s: PositiveFloat = Field(60.0, description="window of deriv(lag) (HPA-Varga uses 60 s)")
    interarrival_sample: NonNegativeInt = Field(5000, description="inter-arrival times per snapshot (0: none)")
    interarrival_window_s: PositiveFloat = Field(60.0, description="the sample covers this many recent seconds")
    vertical_downtime_s: NonNegativeFloat = Field(
        0.0, description="downtime of a CPU-share-only change (in-place resize: none)"
    )
