"""The live panel of a run in progress (rich), drawn from its `harness.live.LiveStatus`.

`bench run` on `local` and `k8s` redraws it after every monitoring step; `bench status` draws the same
panel for runs started in another shell. Unmeasured values read "n/a" (never 0).
"""

from __future__ import annotations

import math

from rich.panel import Panel
from rich.table import Table

from harness.live import LiveStatus


def _num(value: float | int | None, fmt: str = "{:,.0f}", unit: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return fmt.format(value) + unit


def _ms(seconds: float) -> str:
    return _num(seconds * 1000 if math.isfinite(seconds) else math.nan, "{:,.0f}", " ms")


def live_panel(status: LiveStatus) -> Panel:
    """Input, throughput, task managers, both latencies and the last decision of one run."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    done = f"{status.t:,.0f} / {status.duration_s:,.0f} s" if status.duration_s else f"{status.t:,.0f} s"
    grid.add_row("phase", f"{status.phase} ({done})")
    grid.add_row("input rate", _num(status.input_rate, unit=" rec/s"))
    ratio = status.throughput / status.input_rate if status.input_rate else math.nan  # NaN stays NaN
    share = f" ({ratio:.0%} of input)" if math.isfinite(ratio) else ""
    grid.add_row("throughput", _num(status.throughput, unit=" rec/s") + share)
    par = ", ".join(f"{op} {p}" for op, p in status.parallelism.items())
    grid.add_row("task managers", _num(status.taskmanagers) + (f"  ({par})" if par else ""))
    grid.add_row("latency in Kafka", _ms(status.latency_kafka_s))
    grid.add_row("latency end to end", f"mean {_ms(status.latency_e2e_s)}, p95 {_ms(status.latency_e2e_p95_s)}")
    last = status.last_decision
    if last is None:
        grid.add_row("last decision", f"none yet ({status.decisions} decisions)")
    else:
        target = f" -> {', '.join(f'{op} {p}' for op, p in last.target.items())}" if last.target else ""
        grid.add_row("last decision", f"t={last.t:,.0f} s {last.kind}{target}: {last.reason}")
    if status.not_measured:
        grid.add_row("not measured", ", ".join(status.not_measured))
    title = f"{status.experiment}: {status.autoscaler} on {status.query} ({status.backend}, pid {status.pid})"
    return Panel(grid, title=title, subtitle=f"updated {status.updated_at}", expand=False)
