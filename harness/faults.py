"""Scheduled faults: what an experiment may break, and when.

`faults: [{kind: kill-taskmanager, at_s: 300}, {kind: stop-prometheus, at_s: 600, for_s: 60}]` in an
experiment (or `--fault KIND@T[+D]` on the command line). This module is what a fault *is* (read by
the experiment's config); `harness.fault_injection` is how a run injects it.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, model_validator


class FaultKind(StrEnum):
    KILL_TASKMANAGER = "kill-taskmanager"  # SIGKILL one task manager that hosts a subtask
    KILL_JOBMANAGER = "kill-jobmanager"  # SIGKILL the job manager
    RESTART_KAFKA = "restart-kafka"  # stop the broker, (for_s later) start it again
    STOP_PROMETHEUS = "stop-prometheus"  # no monitoring for for_s: the loop must not decide blind
    PAUSE_GENERATOR = "pause-generator"  # no input for for_s (records not offered: load shortfall)


NEEDS_DURATION = (FaultKind.STOP_PROMETHEUS, FaultKind.PAUSE_GENERATOR)
TAKES_DURATION = (*NEEDS_DURATION, FaultKind.RESTART_KAFKA)


class FaultSpec(BaseModel):
    """One fault of an experiment (times in the run's seconds, as `duration_s`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: FaultKind
    at_s: NonNegativeFloat = Field(..., description="seconds after the run started")
    for_s: PositiveFloat | None = Field(None, description="how long the outage lasts (stop-prometheus, "
                                                          "pause-generator; restart-kafka: broker down time)")

    @model_validator(mode="after")
    def _duration(self) -> FaultSpec:
        if self.kind in NEEDS_DURATION and self.for_s is None:
            raise ValueError(f"{self.kind.value} needs for_s (how long it lasts)")
        if self.kind not in TAKES_DURATION and self.for_s is not None:
            raise ValueError(f"{self.kind.value} is instantaneous: drop for_s")
        return self

    @property
    def end_s(self) -> float:
        return self.at_s + (self.for_s or 0.0)


_FLAG = re.compile(r"^(?P<kind>[a-z-]+)@(?P<at>[0-9.]+)(?:\+(?P<for>[0-9.]+))?$")


class FaultFlagError(ValueError):
    """A `--fault` value that does not parse; the message says what would."""


def parse_fault_flag(text: str) -> dict[str, Any]:
    """`kill-taskmanager@300`, `stop-prometheus@600+60` -> a raw fault dict (validated with the experiment)."""
    m = _FLAG.match(text.strip())
    kinds = ", ".join(k.value for k in FaultKind)
    if m is None:
        raise FaultFlagError(f"--fault {text!r}: expected KIND@T[+D] (seconds), e.g. stop-prometheus@600+60; "
                             f"kinds: {kinds}")
    if m["kind"] not in {k.value for k in FaultKind}:
        raise FaultFlagError(f"--fault {text!r}: unknown kind {m['kind']!r}; valid kinds: {kinds}")
    try:
        out: dict[str, Any] = {"kind": m["kind"], "at_s": float(m["at"])}
        if m["for"] is not None:
            out["for_s"] = float(m["for"])
    except ValueError:
        raise FaultFlagError(f"--fault {text!r}: T and D must be numbers of seconds") from None
    return out
