"""Matplotlib figures of runs over time; each function returns a Figure and does no I/O.

A `Trace` is one run's long-format timeseries and events with the label its
row has in the comparison tables, so figures and tables name things alike, and
its autoscaler, whose colour it gets (`colours`: the same in every figure).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.analysis.metrics import Stage  # noqa: E402
from harness.report.colours import variant_styles  # noqa: E402
from harness.vocabulary import EventKind, Metric  # noqa: E402


@dataclass(frozen=True)
class Trace:
    label: str
    timeseries: pd.DataFrame
    events: pd.DataFrame
    stages: tuple[Stage, ...] = ()
    autoscaler: str = ""  # colours the trace; the label when not given

    def series(self, metric: str, operator: str = "") -> pd.Series:
        ts = self.timeseries
        sel = ts[(ts["metric"] == metric) & (ts["operator"] == operator) & (ts["subtask"] == -1)].sort_values("ts")
        return pd.Series(sel["value"].to_numpy(), index=sel["ts"].to_numpy() / 60.0)

    def operators(self) -> list[str]:
        ts = self.timeseries
        return sorted(ts.loc[(ts["metric"] == Metric.PARALLELISM) & (ts["operator"] != ""), "operator"].unique())

    def action_minutes(self) -> list[float]:
        ev = self.events
        return [] if ev is None or ev.empty else (ev.loc[ev["kind"] == EventKind.ACTION, "ts"] / 60.0).tolist()


def _styles(traces: list[Trace]) -> list[tuple[str, str, str]]:
    """(colour, line style, hatch) per trace: its autoscaler's colour, a style per configuration of it."""
    return variant_styles([tr.autoscaler or tr.label for tr in traces])


def _axes(title: str, ylabel: str) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(9, 3.6))
    fig.subplots_adjust(left=0.08, right=0.98, top=0.9, bottom=0.14)  # fixed margins: layout engines cost 2x
    ax.set_title(title)
    ax.set_xlabel("time (min)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def metric_over_time(traces: list[Trace], metric: str, title: str, ylabel: str, step: bool = True) -> Figure:
    """One line per autoscaler/configuration (task managers: a step function)."""
    fig, ax = _axes(title, ylabel)
    for tr, (colour, line, _h) in zip(traces, _styles(traces), strict=True):
        s = tr.series(metric)
        if s.empty:
            continue
        if step:
            ax.step(s.index, s.to_numpy(), line, where="post", color=colour, label=tr.label, linewidth=1.2)
        else:
            ax.plot(s.index, s.to_numpy(), line, color=colour, label=tr.label, linewidth=1.0)
    if traces:
        ax.legend(fontsize="small", ncols=2)
    return fig


def taskmanagers(traces: list[Trace], title: str = "Task managers over time") -> Figure:
    return metric_over_time(traces, Metric.TASKMANAGERS, title, "task managers")


def latency(traces: list[Trace], title: str = "Latency over time") -> Figure:
    """Both latencies per run: time in Kafka (solid, the thesis') and end to end (dashed, mean per interval).

    NaN samples (no record measured in the interval) stay gaps in the lines, never bridged."""
    fig, ax = _axes(title, "latency (s)")
    for tr, (colour, _line, _h) in zip(traces, _styles(traces), strict=True):
        for metric, style, what in ((Metric.LATENCY_KAFKA, "-", "kafka"), (Metric.LATENCY_E2E_MEAN, "--", "e2e")):
            s = tr.series(metric)
            if not s.empty:
                ax.plot(s.index, s.to_numpy(), style, color=colour, linewidth=1.0, label=f"{what}: {tr.label}")
    if traces:
        ax.legend(fontsize="small", ncols=2)
    if any((tr.series(m) > 0).any() for tr in traces for m in (Metric.LATENCY_KAFKA, Metric.LATENCY_E2E_MEAN)):
        ax.set_yscale("symlog", linthresh=1.0)
    return fig


def input_vs_throughput(traces: list[Trace], title: str = "Input rate vs throughput") -> Figure:
    fig, ax = _axes(title, "records/s")
    if traces:
        s = traces[0].series(Metric.INPUT_RATE)
        ax.plot(s.index, s.to_numpy(), color="black", linewidth=2.0, alpha=0.6, label="input rate")
    for tr, (colour, line, _h) in zip(traces, _styles(traces), strict=True):
        s = tr.series(Metric.THROUGHPUT)
        ax.plot(s.index, s.to_numpy(), line, color=colour, linewidth=1.0, label=f"throughput: {tr.label}")
    ax.legend(fontsize="small", ncols=2)
    return fig


def parallelism(traces: list[Trace], title: str = "Parallelism per operator", max_panels: int = 6) -> Figure:
    shown = traces[:max_panels]
    fig, axes = plt.subplots(len(shown) or 1, 1, figsize=(9, 2.2 * max(1, len(shown))), sharex=True,
                             squeeze=False)
    fig.subplots_adjust(left=0.1, right=0.98, top=0.94, bottom=0.08, hspace=0.15)
    fig.suptitle(title)
    for ax, tr in zip(axes[:, 0], shown, strict=False):
        for op in tr.operators():
            s = tr.series(Metric.PARALLELISM, op)
            ax.step(s.index, s.to_numpy(), where="post", label=op, linewidth=1.2)
        ax.set_ylabel(f"{tr.label}\nparallelism (tasks)", fontsize="small")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small", loc="upper right")
    axes[-1, 0].set_xlabel("time (min)")
    return fig


def convergence(traces: list[Trace], title: str = "Convergence stages") -> Figure:
    """Task managers with the pattern's stages shaded and every scaling action marked.

    Stages are shaded grey (alternating), not in colours an autoscaler could have, and named inside
    the axes, under the top edge (above it they ran into the title)."""
    fig, ax = _axes(title, "task managers")
    stages = next((tr.stages for tr in traces if tr.stages), ())
    for i, st in enumerate(stages):
        ax.axvspan(st.start_s / 60, st.end_s / 60, color="grey", alpha=0.06 if i % 2 else 0.14, linewidth=0)
        ax.text((st.start_s + st.end_s) / 120, 0.98, st.name, transform=ax.get_xaxis_transform(), ha="center",
                va="top", fontsize="small")
    for tr, (colour, line, _h) in zip(traces, _styles(traces), strict=True):
        s = tr.series(Metric.TASKMANAGERS)
        ax.step(s.index, s.to_numpy(), line, where="post", color=colour, label=tr.label)
        acts = tr.action_minutes()
        if acts and not s.empty:
            ys = [s[s.index <= a].iloc[-1] if (s.index <= a).any() else s.iloc[0] for a in acts]
            ax.plot(acts, ys, "o", color=colour, markersize=3)
    if stages:  # room under the top edge for the stage names, above the highest line
        low, high = ax.get_ylim()
        ax.set_ylim(low, high + 0.12 * (high - low))
    if traces:
        ax.legend(fontsize="small", ncols=2)
    return fig


def stages_from_events(events: pd.DataFrame) -> tuple[Stage, ...]:
    """Stages announced by phase events (data {stage, start, end})."""
    out = []
    if events is None or events.empty:
        return ()
    for r in events[events["kind"] == EventKind.PHASE].itertuples():
        data = json.loads(r.data) if r.data else {}
        if "stage" in data and "start" in data and "end" in data:
            out.append(Stage(str(data["stage"]), float(data["start"]), float(data["end"])))
    return tuple(sorted(out, key=lambda s: s.start_s))
