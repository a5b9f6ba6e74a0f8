"""The one interface every autoscaler implements.

An autoscaler is pure logic: it reads a `MetricsSnapshot` (plus the history
of earlier snapshots and applied actions) and returns a `ScalingDecision`, or
None to keep things as they are. No I/O, no knowledge of the backend. Its
parameters are a pydantic model whose defaults are the paper's, so a typo in
an experiment file is an error, not a silently ignored key.

It declares the metrics its decision rests on (`NEEDS`, or `needs()` when they
depend on the configuration). The MAPE loop does not ask it to decide while a
job-level need is unmeasured, and drops a decision that would change an
operator whose needs are unmeasured; an autoscaler itself leaves an operator
alone whose inputs are NaN rather than computing from them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NoReturn

from autoscalers.config import AutoscalerConfig, RunContext
from harness.metrics.snapshot import MetricsSnapshot, Needs
from harness.vocabulary import Metric, NodeChoice

__all__ = [
    "AppliedAction", "Autoscaler", "AutoscalerConfig", "History", "RunContext", "ScalingDecision",
]  # fmt: skip


@dataclass(frozen=True)
class ScalingDecision:
    """Target per operator. Operators left out keep their current value."""

    parallelism: dict[str, int] = field(default_factory=dict)
    cpu_share: dict[str, float] = field(default_factory=dict)  # vertical scaling (MEAD, MPC)
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    placement: NodeChoice = NodeChoice.ANY  # which nodes replicas go to, where nodes differ in delay

    def changed_operators(self, parallelism: dict[str, int], cpu_share: dict[str, float]) -> set[str]:
        """Operators this decision would change, given the current configuration."""
        out = {op for op, p in self.parallelism.items() if parallelism.get(op) != p}
        out |= {op for op, c in self.cpu_share.items() if abs(cpu_share.get(op, 1.0) - c) > 1e-9}
        return out


@dataclass(frozen=True)
class AppliedAction:
    """What the scale manager actually did (after its limits), as the autoscaler learns it."""

    t: float
    before: dict[str, int]
    after: dict[str, int]
    cpu_share_before: dict[str, float] = field(default_factory=dict)
    cpu_share_after: dict[str, float] = field(default_factory=dict)
    downtime_s: float = 0.0


@dataclass(frozen=True)
class History:
    """Earlier snapshots (oldest first, the current one excluded) and applied actions."""

    snapshots: Sequence[MetricsSnapshot] = ()
    actions: Sequence[AppliedAction] = ()

    @property
    def last_action(self) -> AppliedAction | None:
        return self.actions[-1] if self.actions else None


class _Unrecorded(Sequence[MetricsSnapshot]):
    """The past snapshots of an autoscaler that declared it reads none: reading them is a bug in the
    declaration, and fails loudly instead of seeing a history with gaps."""

    def _refuse(self) -> NoReturn:
        raise RuntimeError("this autoscaler declares READS_PAST_SNAPSHOTS = False, so the loop keeps no "
                           "past snapshots for it; set it to True to read history.snapshots")

    def __len__(self) -> int:
        self._refuse()

    def __getitem__(self, index: Any) -> Any:
        self._refuse()

    def __iter__(self) -> Iterator[MetricsSnapshot]:
        self._refuse()


UNRECORDED: Sequence[MetricsSnapshot] = _Unrecorded()


class Autoscaler(ABC):
    """Analyse + plan of the MAPE loop."""

    name: ClassVar[str]
    Config: ClassVar[type[AutoscalerConfig]]
    NEEDS: ClassVar[Needs] = Needs()
    # Whether decide() reads `history.snapshots`. An autoscaler that does not lets the loop skip the
    # monitor step while it cools down (nothing would read that snapshot); it then gets `UNRECORDED`.
    READS_PAST_SNAPSHOTS: ClassVar[bool] = True

    def __init__(self, config: AutoscalerConfig | None = None, context: RunContext | None = None) -> None:
        self.config = config if config is not None else self.Config()
        self.context = context if context is not None else RunContext()

    def needs(self) -> Needs:
        """The metrics a decision rests on (see the module docstring)."""
        return self.NEEDS

    def reads(self) -> frozenset[Metric]:
        """Every metric a decision looks at when it is there: the needs, plus any optional ones an
        autoscaler uses when measured and does without otherwise. A backend may leave out a costly
        reading that no one reads (the sim's inter-arrival sample)."""
        return self.needs().all()

    @abstractmethod
    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        """Return the wanted configuration, or None to leave the job as it is."""

    def on_applied(self, action: AppliedAction) -> None:  # noqa: B027 - optional hook
        """Learn what was really applied (after the scale manager's caps)."""
