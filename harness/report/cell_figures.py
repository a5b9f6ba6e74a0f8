"""Report figures over all repetitions of each cell (functions return Figures and do no I/O but reading runs).

Over time: every repetition of a cell is one line - the median over the repetitions with a 5-95 %
band (`harness.report.bands`); the title says so and the legend gives n. Per metric: one bar chart,
a bar per configuration with its 95 % CI error bar. Autoscalers keep their colour everywhere
(`harness.report.colours`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from harness.report.bands import band  # noqa: E402
from harness.report.colours import variant_styles  # noqa: E402
from harness.report.units import label_of  # noqa: E402
from harness.vocabulary import Metric  # noqa: E402

# headline metrics for the bar charts, in order; the first of each group that the cells have is used
BAR_METRICS: list[tuple[str, ...]] = [
    ("tm_avg",), ("tm_max",), ("spec_cost_replica_min",),
    ("latency_kafka_avg", "lat_avg"), ("latency_kafka_p95", "lat_p95"), ("latency_e2e_avg",), ("latency_e2e_p95",),
    ("throughput_ratio",), ("load_shortfall",), ("scale_count",),
]
TIME_METRICS = [Metric.TASKMANAGERS, Metric.LATENCY_KAFKA, Metric.INPUT_RATE, Metric.THROUGHPUT]


@dataclass
class CellRuns:
    """The job-level series of every counted repetition of one cell, with the cell's table label."""

    label: str
    autoscaler: str
    runs: list[pd.DataFrame] = field(default_factory=list)

    def series(self, metric: str) -> list[pd.Series]:
        out = []
        for ts in self.runs:
            sel = ts[ts["metric"] == metric].sort_values("ts")
            if not sel.empty:
                out.append(pd.Series(sel["value"].to_numpy(dtype=float), index=sel["ts"].to_numpy() / 60.0))
        return out


def read_job_series(path: Path, metrics: list[str]) -> pd.DataFrame:
    """Job-level samples (operator "", subtask -1) of these metrics from one timeseries.parquet."""
    table = pq.read_table(path, columns=["ts", "metric", "operator", "subtask", "value"],
                          filters=[("metric", "in", list(metrics)), ("operator", "=", ""), ("subtask", "=", -1)])
    return table.to_pandas()


def load_cell_runs(results_dir: Path, runs: pd.DataFrame, cells: pd.DataFrame, labels: list[str],
                   metrics: list[str]) -> list[CellRuns]:
    """Every non-interrupted repetition of each cell of `cells` (same matrix, cell id and config hash)."""
    out = []
    for (_, cell), label in zip(cells.iterrows(), labels, strict=True):
        sel = runs[(runs["cell_id"].astype(str) == str(cell["cell_id"]))
                   & (runs["matrix"].astype(str) == str(cell["matrix"]))]
        if "config_hash" in cells and "config_hash" in runs:
            sel = sel[sel["config_hash"].fillna("").astype(str) == str(cell["config_hash"])]
        if "status" in sel:
            sel = sel[sel["status"].astype(str) != "interrupted"]
        item = CellRuns(label, str(cell["autoscaler"]))
        for run_id in sel.sort_values("repetition")["run_id"]:
            path = Path(results_dir) / str(run_id) / "timeseries.parquet"
            if path.exists():
                item.runs.append(read_job_series(path, metrics))
        if item.runs:
            out.append(item)
    return out


def _axes(title: str, ylabel: str) -> tuple[Figure, plt.Axes]:
    fig, ax = plt.subplots(figsize=(9, 3.8))
    ax.set_title(title)
    ax.set_xlabel("time (min)")
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    return fig, ax


def _what(cells: list[CellRuns]) -> str:
    """The figure's second title line: what a line and a band are."""
    counts = sorted({len(c.runs) for c in cells}) or [0]
    if counts[-1] <= 1:
        return "one run per cell"
    n = f"{counts[0]}" if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    return f"median of {n} repetitions per cell, band: 5-95 %"


def band_over_time(cells: list[CellRuns], metric: str, title: str, ylabel: str, log: bool = False,
                   step: bool = False) -> Figure:
    """Median over the repetitions with a 5-95 % band, one per cell (`step`: drawn as a step function)."""
    fig, ax = _axes(f"{title}\n{_what(cells)}", ylabel)
    styles = variant_styles([c.autoscaler for c in cells])
    drawn = False
    for cell, (colour, line, _hatch) in zip(cells, styles, strict=True):
        b = band(cell.series(metric))
        if b.empty:
            continue
        drawn = True
        ax.plot(b.t, b.median, line, color=colour, linewidth=1.3, label=f"{cell.label} (n={b.runs})",
                drawstyle="steps-post" if step else "default")
        if b.runs > 1:
            ax.fill_between(b.t, b.low, b.high, color=colour, alpha=0.15, linewidth=0, step="post" if step else None)
    if log and drawn:
        ax.set_yscale("symlog", linthresh=1.0)
    if drawn:
        ax.legend(fontsize="small", ncols=2)
    else:
        ax.text(0.5, 0.5, "not measured in these runs", transform=ax.transAxes, ha="center", color="#777")
    return fig


def input_vs_throughput(cells: list[CellRuns]) -> Figure:
    """The input rate (median over every run shown, black) and each cell's median throughput with its band."""
    fig, ax = _axes(f"Input rate vs throughput\n{_what(cells)}", "records/s")
    inputs = band([s for c in cells for s in c.series(Metric.INPUT_RATE)])
    if not inputs.empty:
        ax.plot(inputs.t, inputs.median, color="black", linewidth=2.0, alpha=0.6, label="input rate")
    for cell, (colour, line, _h) in zip(cells, variant_styles([c.autoscaler for c in cells]), strict=True):
        b = band(cell.series(Metric.THROUGHPUT))
        if b.empty:
            continue
        ax.plot(b.t, b.median, line, color=colour, linewidth=1.0, label=f"throughput: {cell.label}")
        if b.runs > 1:
            ax.fill_between(b.t, b.low, b.high, color=colour, alpha=0.12, linewidth=0)
    ax.legend(fontsize="small", ncols=2)
    return fig


def bar_metrics(cells: pd.DataFrame) -> list[str]:
    """The headline metrics these cells measured (first present name of each group)."""
    out = []
    for group in BAR_METRICS:
        for name in group:
            if name in cells and cells[name].astype(float).notna().any():
                out.append(name)
                break
    return out


def _bars_on(ax: plt.Axes, cells: pd.DataFrame, labels: list[str], metric: str) -> None:
    title, unit = label_of(metric)
    x = np.arange(len(labels))
    means = cells[metric].astype(float).to_numpy()
    ci = cells[f"{metric}_ci"].astype(float).fillna(0.0).to_numpy() if f"{metric}_ci" in cells else np.zeros(len(x))
    styles = variant_styles([str(a) for a in cells["autoscaler"]])
    bars = ax.bar(x, np.nan_to_num(means), yerr=ci, capsize=4, color=[s[0] for s in styles], alpha=0.85,
                  edgecolor="black", linewidth=0.5)
    for b, (_c, _l, hatch), m in zip(bars, styles, means, strict=True):
        b.set_hatch(hatch)
        if math.isnan(m):
            b.set_alpha(0.0)
    n = cells["runs"].astype(int).tolist() if "runs" in cells else []
    ax.set_xticks(x, [f"{lab}\n(n={k})" for lab, k in zip(labels, n, strict=False)] if n else labels,
                  fontsize="small", rotation=20 if len(labels) > 3 else 0, ha="right" if len(labels) > 3 else "center")
    ax.set_title(title, fontsize="medium")
    ax.set_ylabel(unit)
    ax.grid(axis="y", alpha=0.3)


def metric_bars(cells: pd.DataFrame, labels: list[str], metrics: list[str], ncols: int = 3) -> Figure:
    """One bar chart per metric (a panel each): a bar per configuration, the mean over its repetitions and
    the 95 % CI as an error bar. One figure, so a report pays for one rendering per group."""
    ncols = max(1, min(ncols, len(metrics)))
    nrows = max(1, math.ceil(len(metrics) / ncols))
    width = max(3.4, 0.9 * len(labels) + 1.6)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 3.0 * nrows + 0.4), squeeze=False)
    for ax, metric in zip(axes.flat, metrics, strict=False):
        _bars_on(ax, cells, labels, metric)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fig.suptitle("Per metric: mean over the repetitions, error bars: 95 % CI")
    fig.tight_layout()
    return fig
