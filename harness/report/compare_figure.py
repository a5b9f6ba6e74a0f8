"""`bench compare --plot FILE`: one small bar chart per metric, one bar per side, 95 % CI error bars.

Each side keeps its colour in every panel; a panel's title is the metric, its y label the unit
(`harness.report.units`). The dots are the individual runs, so a reader sees n and the spread.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from harness.analysis.compare import Comparison  # noqa: E402
from harness.report.units import label_of  # noqa: E402

MAX_PANELS = 24


def plot_comparison(comparison: Comparison, path: Path) -> Path:
    metrics = comparison.metrics[:MAX_PANELS]
    ncols = min(4, max(1, len(metrics)))
    nrows = max(1, math.ceil(len(metrics) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.9 * nrows + 0.6), squeeze=False)
    colours = [f"C{i % 10}" for i in range(len(comparison.sides))]
    x = np.arange(len(comparison.sides))
    for ax, metric in zip(axes.flat, metrics, strict=False):
        stats = [comparison.stats(i, metric) for i in range(len(comparison.sides))]
        means = [s.mean for s in stats]
        errs = [0.0 if math.isnan(s.ci) else s.ci for s in stats]
        ax.bar(x, means, yerr=errs, capsize=4, color=colours, alpha=0.75)
        for i, side in enumerate(comparison.sides):
            vals = side.runs[metric][~np.isnan(side.runs[metric])]
            jitter = np.linspace(-0.15, 0.15, len(vals)) if len(vals) > 1 else np.zeros(len(vals))
            ax.plot(x[i] + jitter, vals, "o", color="black", markersize=2.5, alpha=0.7)
        title, unit = label_of(metric)
        ax.set_title(title, fontsize="medium")
        ax.set_ylabel(unit, fontsize="small")
        ax.set_xticks(x, [chr(ord("A") + i) for i in range(len(comparison.sides))])
        ax.grid(axis="y", alpha=0.3)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    handles = [matplotlib.patches.Patch(color=c, label=f"{chr(ord('A') + i)}: {s.spec} (n={s.n_runs})")
               for i, (c, s) in enumerate(zip(colours, comparison.sides, strict=True))]
    fig.legend(handles=handles, loc="upper center", ncols=min(3, len(handles)), fontsize="small", frameon=False)
    fig.text(0.99, 0.005, "bars: mean; error bars: 95 % CI of the mean; dots: runs", ha="right", va="bottom",
             fontsize="x-small", color="#555")
    fig.tight_layout(rect=(0, 0.02, 1, 1 - 0.45 / (2.9 * nrows + 0.6)))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)
