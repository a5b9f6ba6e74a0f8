"""Typed knobs of the local stack (recorded in run.yaml)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field


class LocalConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    workdir: Path = Field(Path(".bench"), description="where installs, data and logs live")
    port_offset: int = Field(0, ge=0, le=20000, description="added to every default port")
    taskmanager_cpu_quota: float = Field(
        0.25, gt=0, le=64, description="CPUs each task manager may use (cgroup quota); capacity grows with TMs"
    )
