"""Typed knobs of the simulator (recorded in run.yaml)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SimConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    step_s: float = Field(1.0, gt=0, description="model step; 1 s as in the issue")
    record_every_s: float = Field(5.0, gt=0, description="timeseries resolution (Prometheus scrape = 5 s)")
