"""Scheduled faults: what an experiment may break, when, and how the run injects it.

`faults: [{kind: kill-taskmanager, at_s: 300}, {kind: stop-prometheus, at_s: 600, for_s: 60}]` in an
experiment (or `--fault KIND@T[+D]` on the command line). `FaultInjector` wraps the run's backend:
it advances the backend's clock to each fault's moment, asks the backend to inject it (and, after
`for_s`, to end it) and records every injection as a `fault` event with `injected: true`, so the
run completes flagged and analysis can measure the recovery. A backend offers `inject_fault` and
`end_fault` (`local` on the real processes, `sim` as a model of the same outage).
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, PositiveFloat, model_validator

from harness.vocabulary import EventKind

if TYPE_CHECKING:  # the backend seam imports pandas: validating an experiment must not pay for it
    from harness.backends.base import Backend, BackendEvent


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


class FaultTarget(Protocol):
    """What a backend offers to break itself on purpose; both return facts for the event."""

    def inject_fault(self, fault: FaultSpec) -> dict[str, Any]: ...

    def end_fault(self, fault: FaultSpec) -> dict[str, Any]: ...


class FaultInjector:
    """A backend wrapper that injects scheduled faults as the loop advances the clock."""

    def __init__(self, backend: Backend, faults: list[FaultSpec] | tuple[FaultSpec, ...] = ()) -> None:
        from harness.backends.base import BackendEvent

        self._event = BackendEvent
        self.backend = backend
        self.name = backend.name
        steps: list[tuple[float, int, int, FaultSpec]] = []
        for i, f in enumerate(faults):
            steps.append((f.at_s, 0, i, f))
            if f.for_s is not None:
                steps.append((f.end_s, 1, i, f))
        self._steps = sorted(steps, key=lambda s: (s[0], s[1], s[2]))
        self._events: list[BackendEvent] = []
        self._open: list[tuple[int, str]] = []  # injected, not yet recovered: (fault id, kind)

    def __getattr__(self, name: str) -> Any:  # everything else is the backend's
        return getattr(self.backend, name)

    def advance_to(self, t: float) -> None:
        while self._steps and self._steps[0][0] <= t:
            when, end, index, fault = self._steps.pop(0)
            if when > self.backend.now():
                self.backend.advance_to(when)
            self._end(index, fault) if end else self._inject(index, fault)
        self.backend.advance_to(t)

    def _inject(self, index: int, fault: FaultSpec) -> None:
        now = self.backend.now()
        base = {"injected": True, "fault_kind": fault.kind.value, "fault_id": index, "at_s": fault.at_s,
                "for_s": fault.for_s}
        try:
            data = _target(self.backend).inject_fault(fault)
        except Exception as exc:  # noqa: BLE001 - a fault that could not be injected is recorded, the run goes on
            self._events.append(self._event(now, EventKind.FAULT, f"fault injection failed: {fault.kind.value}: {exc}",
                                             {**base, "injection_failed": True}))
            return
        self._events.append(self._event(now, EventKind.FAULT, f"injected fault: {fault.kind.value}", {**base, **data}))
        self._open.append((index, fault.kind.value))

    def _end(self, index: int, fault: FaultSpec) -> None:
        now = self.backend.now()
        try:
            data = _target(self.backend).end_fault(fault)
        except Exception as exc:  # noqa: BLE001
            self._events.append(self._event(now, EventKind.FAULT, f"ending fault failed: {fault.kind.value}: {exc}",
                                             {"fault_kind": fault.kind.value, "fault_id": index}))
            return
        self._events.append(self._event(now, EventKind.PHASE, f"fault ended: {fault.kind.value}",
                                         {"fault_kind": fault.kind.value, "fault_id": index, **data}))

    def finish(self) -> None:
        """End the outages still open when the run ends (a Prometheus left down would lose the export)."""
        not_started = {index for _when, end, index, _f in self._steps if not end}
        for _when, end, index, fault in list(self._steps):
            if end and index not in not_started:
                self._end(index, fault)
        self._steps = []

    def drain_events(self) -> list[BackendEvent]:
        """Injection events, then the backend's; a backend `recovery` naming a fault kind gets the id of
        the oldest open fault of that kind, so analysis can pair them."""
        out, self._events = self._events, []
        for ev in self.backend.drain_events():
            kind = ev.data.get("fault_kind")
            if ev.kind == EventKind.RECOVERY and kind and ev.data.get("fault_id") is None:
                match = next((o for o in self._open if o[1] == kind), None)
                if match is not None:
                    self._open.remove(match)
                    ev = self._event(ev.t, ev.kind, ev.reason, {**ev.data, "fault_id": match[0]})
            out.append(ev)
        return out


def _target(backend: Backend) -> FaultTarget:
    if not hasattr(backend, "inject_fault"):
        raise NotImplementedError(f"the {backend.name} backend cannot inject faults")
    return backend  # type: ignore[return-value]
