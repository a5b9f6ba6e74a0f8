"""Injecting scheduled faults (`harness.faults`) into a run as the loop advances the clock.

`FaultInjector` wraps the run's backend: it advances the backend's clock to each fault's moment, asks
the backend to inject it (and, after `for_s`, to end it) and records every injection as a `fault`
event with `injected: true`, so the run completes flagged and analysis can measure the recovery. A
backend offers `inject_fault` and `end_fault` (`local` on the real processes, `sim` as a model of the
same outage).
"""

from __future__ import annotations

from typing import Any, Protocol

from harness.backends.base import Backend, BackendEvent
from harness.faults import FaultSpec
from harness.vocabulary import EventKind


class FaultTarget(Protocol):
    """What a backend offers to break itself on purpose; both return facts for the event."""

    def inject_fault(self, fault: FaultSpec) -> dict[str, Any]: ...

    def end_fault(self, fault: FaultSpec) -> dict[str, Any]: ...


class FaultInjector:
    """A backend wrapper that injects scheduled faults as the loop advances the clock."""

    def __init__(self, backend: Backend, faults: list[FaultSpec] | tuple[FaultSpec, ...] = ()) -> None:
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
