"""What the two wall-clock backends, `local` and `k8s`, share.

Both run a real Flink job: time is wall-clock time since the job first ran, the backend supervises
the job while the loop sleeps, a rescale is a real outage measured by polling the REST API until
every subtask runs again, and each rescale is kept for the run record. `sim` owns a model clock
instead and does none of this.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from harness.backends.base import RescaleResult
from harness.backends.flink_rest import JobDetails


@dataclass(frozen=True)
class Timing:
    """How long a rescale kept the job from processing (clock readings of the backend's clock)."""

    requested: float  # time of the request
    down_from: float | None  # first moment seen not fully running (None: polling never saw it down)
    running_at: float  # time every subtask ran again

    @property
    def downtime_s(self) -> float:
        """The outage; when polling missed it (it fit between two polls of a slow job manager),
        the whole time since the request: an upper bound rather than a made-up zero."""
        start = self.down_from if self.down_from is not None else self.requested
        return max(0.0, self.running_at - min(start, self.running_at))


def wait_until_running(
    read_job: Callable[[], JobDetails],
    matches: Callable[[JobDetails], bool],
    *,
    since: float,
    timeout_s: float,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    poll_s: float,
    retry_on: tuple[type[BaseException], ...],
    what: str = "job",
) -> tuple[JobDetails, Timing]:
    """Poll until the job runs every subtask and `matches` it; note when it was first seen down.

    `retry_on`: errors that mean "not answering yet" (a job manager restarting), polled through;
    anything else propagates. TimeoutError after `timeout_s` since `since`, with the last state seen.
    """
    down_from: float | None = None
    last = "no answer"
    while True:
        now = clock()
        fully_running = False
        try:
            job = read_job()
            fully_running = job.running  # still at the old parallelism: records flow
            if fully_running and matches(job):
                return job, Timing(since, down_from, now)
            last = f"{job.state} {[(v.name, v.parallelism, v.status) for v in job.vertices]}"
        except retry_on as exc:
            last = f"{type(exc).__name__}: {exc}"
            fully_running = False
        if not fully_running and down_from is None:
            down_from = now
        if now - since > timeout_s:
            raise TimeoutError(f"{what} not running as asked after {timeout_s:.0f} s: {last}")
        sleep(poll_s)


class WallClockBackend:
    """Base of `LocalBackend` and `K8sBackend`: the clock, supervision while waiting, rescale bookkeeping.

    A subclass sets `clock`, `sleep`, `state` (parallelism, cpu_share, ...), `rescaler` and `method`,
    sets `_t0` when the job first runs, and implements `_supervise` (faults, observed changes),
    `_mark_downtime` (the processing series) and `_after_rescale`.
    """

    supervise_every_s: float = 1.0
    clock: Callable[[], float] = staticmethod(time.monotonic)
    sleep: Callable[[float], None] = staticmethod(time.sleep)
    state: Any
    rescaler: Any
    method: str

    def __init__(self) -> None:
        self._t0: float | None = None
        self._last_supervise = 0.0
        self._rescales: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- clock
    def now(self) -> float:
        return 0.0 if self._t0 is None else self.clock() - self._t0

    def advance_to(self, t: float) -> None:
        """Sleep until `t`, in slices of `supervise_every_s`, supervising the job between them."""
        while True:
            left = t - self.now()
            if left <= 0:
                return
            self.sleep(min(left, self.supervise_every_s))
            if self.clock() - self._last_supervise >= self.supervise_every_s:
                self._supervise()

    def _supervise(self) -> None:
        raise NotImplementedError

    # ---------------------------------------------------------------- execute
    def rescale(self, parallelism: dict[str, int], cpu_share: dict[str, float] | None) -> RescaleResult:
        """Apply a configuration through the backend's rescaler; the outage shows in the processing series
        and every rescale (before, after, method, downtime, error) goes to run.yaml."""
        t = self.now()
        self._mark_downtime(True)
        before = dict(self.state.parallelism)
        self.state, result = self.rescaler.rescale(self.method, self.state, parallelism, cpu_share)
        self._after_rescale()
        self._rescales.append({"t": t, "before": before, "after": result.parallelism, "method": result.method,
                               "downtime_s": result.downtime_s, "ok": result.ok, "error": result.error})
        self._mark_downtime(False)
        return result

    def _mark_downtime(self, down: bool) -> None:
        raise NotImplementedError

    def _after_rescale(self) -> None:
        raise NotImplementedError
