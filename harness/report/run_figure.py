"""One run on one page: the figure `bench run --plot` saves.

Four panels sharing the time axis - input rate vs throughput, task managers
with the scaling actions marked, latency, parallelism per operator - so a
reader sees at a glance whether the autoscaler kept up and what it cost.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.record import RunRecord, read_run_record  # noqa: E402
from harness.vocabulary import EventKind, Metric  # noqa: E402


def _minutes(record: RunRecord, metric: str, operator: str = ""):  # type: ignore[no-untyped-def]
    s = record.series(metric, operator).sort_index()
    return s.index.to_numpy() / 60.0, s.to_numpy()


def plot_run(run_dir: Path, out: Path) -> Path:
    record = read_run_record(run_dir)
    cfg = record.meta.get("config", {})
    fig, axes = plt.subplots(4, 1, figsize=(9, 10), sharex=True)
    fig.subplots_adjust(left=0.1, right=0.97, top=0.94, bottom=0.06, hspace=0.25)
    fig.suptitle(
        f"{cfg.get('autoscaler', {}).get('name', '?')} on {cfg.get('query', '?')} / "
        f"{cfg.get('pattern', {}).get('name', '?')} ({cfg.get('backend', '?')}) - {record.status}"
    )
    ax = axes[0]
    for metric, label in ((Metric.INPUT_RATE, "input rate"), (Metric.THROUGHPUT, "throughput")):
        t, v = _minutes(record, metric)
        ax.plot(t, v, label=label, linewidth=1.0)
    ax.set_ylabel("records/s")
    ax.legend(fontsize="small")

    ax = axes[1]
    t, v = _minutes(record, Metric.TASKMANAGERS)
    ax.step(t, v, where="post", color="tab:green")
    for action in record.events_of(EventKind.ACTION):
        ax.axvline(action["ts"] / 60.0, color="grey", alpha=0.3, linewidth=0.8)
    ax.set_ylabel("task managers")

    ax = axes[2]  # gaps (NaN: nothing measured) stay gaps
    for metric, label, style in ((Metric.LATENCY_KAFKA, "time in Kafka", "-"),
                                 (Metric.LATENCY_E2E_MEAN, "end to end (mean)", "--"),
                                 (Metric.LATENCY_E2E_MAX, "end to end (max)", ":")):
        t, v = _minutes(record, metric)
        if len(t):
            ax.plot(t, v, style, color="tab:red", linewidth=1.0, label=label)
    ax.set_ylabel("latency (s)")
    ax.legend(fontsize="small")

    ax = axes[3]
    ts = record.timeseries
    operators = sorted(ts.loc[(ts.metric == Metric.PARALLELISM) & (ts.operator != ""), "operator"].unique())
    for op in operators:
        t, v = _minutes(record, Metric.PARALLELISM, op)
        ax.step(t, v, where="post", label=op)
    ax.set_ylabel("parallelism")
    ax.set_xlabel("time (min)")
    if operators:
        ax.legend(fontsize="small", ncols=3)
    for a in axes:
        a.grid(alpha=0.3)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
