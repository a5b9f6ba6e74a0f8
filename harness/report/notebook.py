"""Small helpers that keep the notebooks in `notebooks/` short: load analysis outputs, plot with CIs.

Notebooks read `BENCH_RESULTS` (a results directory) and analyse it with the
pandas engine if `bench analyze` has not been run yet or its outputs are stale
(run records added, removed or rewritten since; `BENCH_ENGINE=spark` to use
Spark instead). Bad input raises `NotebookInputError` with a one-line message.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from harness.analysis import freshness
from harness.analysis.pipeline import NoRunRecords, analyze, default_out, load_outputs
from harness.analysis.tables import build_tables, row_labels

ENGINES = ("pandas", "spark")


class NotebookInputError(ValueError):
    """A results directory, engine or matrix name the notebooks cannot use (one-line message)."""


def load_analysis(results_dir: str | Path) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(runs, cells, convergence, operators); (re-)analyses the results first when needed."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        raise NotebookInputError(f"BENCH_RESULTS {results_dir}: no such directory")
    engine = os.environ.get("BENCH_ENGINE", "pandas")
    if engine not in ENGINES:
        raise NotebookInputError(f"BENCH_ENGINE {engine!r}: valid choices: {', '.join(ENGINES)}")
    out = default_out(results_dir)
    state = freshness.check(results_dir, out)
    if not state.fresh:
        if state.why != "no analysis yet":
            print(f"analysis in {out} is stale: {state.why}; re-analysing with {engine}")
        try:
            analyze(results_dir, out, engine=engine,  # type: ignore[arg-type]
                    warn=lambda s: print(f"warning: {s.line()}"))
        except NoRunRecords as exc:
            raise NotebookInputError(str(exc)) from None
    frames = load_outputs(out)
    for frame in frames:
        for col in ("matrix", "cell_id", "query", "pattern", "params", "autoscaler", "config_hash"):
            if col in frame:
                frame[col] = frame[col].fillna("").astype(str)
    return frames


def select_matrix(df: pd.DataFrame, name: str) -> pd.DataFrame:
    """Rows of the matrix `name` (or of matrices whose name starts with it, e.g. `thesis-2`).

    An unknown name is an error listing the matrices there are - never a silent fall-back to all."""
    if df.empty or "matrix" not in df:
        return df
    known = sorted(set(df["matrix"].astype(str)))
    sel = df[df["matrix"].astype(str) == name]
    if sel.empty:
        sel = df[df["matrix"].astype(str).str.startswith(name)]
    if sel.empty:
        raise NotebookInputError(f"BENCH_MATRIX {name!r}: no such matrix in these results; "
                                 f"known: {', '.join(known)}")
    return sel


def with_labels(cells: pd.DataFrame) -> pd.DataFrame:
    """Adds `label`: autoscaler plus the parameters that vary, as in the comparison tables."""
    out = cells.sort_values(["autoscaler", "params", "cell_id"]).reset_index(drop=True)
    out["label"] = row_labels(out) if not out.empty else []
    return out


def table(cells: pd.DataFrame, kind: str = "thesis") -> pd.DataFrame:
    """The formatted comparison tables of one kind, stacked, with their query/pattern."""
    frames = [t.shown.assign(query=t.query, pattern=t.pattern) for t in build_tables(cells) if t.kind == kind]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def require(frame: pd.DataFrame, columns: list[str], what: str) -> None:
    """Stop with one clear line when the analysed matrix lacks what a notebook plots (never a bare KeyError)."""
    if frame.empty:
        raise NotebookInputError(f"{what}: nothing to plot - these results have no rows for it")
    missing = [c for c in columns if c not in frame]
    if missing:
        known = ", ".join(c for c in frame.columns if not c.endswith(("_ci", "_n")))
        raise NotebookInputError(f"{what}: the analysed results have no column(s) {', '.join(missing)}; "
                                 f"they have: {known}")


def unit(metric: str, values: pd.Series | list[float]) -> tuple[float, str]:
    """(factor, suffix) to show a metric in: latencies in ms when all are below 1 s, else s."""
    if not metric.startswith("latency_"):
        return 1.0, ""
    arr = np.asarray(values, dtype=float)
    arr = arr[~np.isnan(arr)]
    return (1000.0, " (ms)") if len(arr) and np.abs(arr).max() < 1.0 else (1.0, " (s)")


def bar_ci(ax: plt.Axes, cells: pd.DataFrame, metric: str, group: list[str] | str = "pattern",
           title: str | None = None) -> None:
    """Grouped bars: one group per `group` value, one bar per configuration (coloured by autoscaler), 95 % CI
    as error bars, the metric's unit on the y axis."""
    from harness.report.colours import variant_styles
    from harness.report.units import label_of

    group = [group] if isinstance(group, str) else group
    require(cells, [metric, *group, "autoscaler", "params", "cell_id"], f"bar chart of {metric}")
    factor, suffix = unit(metric, cells[metric]) if metric in cells else (1.0, "")
    cells = with_labels(cells)
    keys = sorted({tuple(r) for r in cells[group].itertuples(index=False)})
    labels = list(dict.fromkeys(cells["label"]))
    owner = {lab: str(a) for lab, a in zip(cells["label"], cells["autoscaler"], strict=True)}
    styles = dict(zip(labels, variant_styles([owner[lab] for lab in labels]), strict=True))
    width = 0.8 / max(1, len(labels))
    x = np.arange(len(keys))
    for i, label in enumerate(labels):
        mine = cells[cells["label"] == label]
        vals, errs = [], []
        for k in keys:
            row = mine[(mine[group] == pd.Series(k, index=group)).all(axis=1)]
            vals.append(float(row[metric].mean()) if not row.empty else math.nan)
            ci = row.get(f"{metric}_ci")
            errs.append(float(ci.mean()) if ci is not None and not row.empty and not ci.isna().all() else 0.0)
        colour, _line, hatch = styles[label]
        ax.bar(x + i * width - 0.4 + width / 2, [v * factor for v in vals], width, yerr=[e * factor for e in errs],
               capsize=3, label=label, color=colour, hatch=hatch, edgecolor="black", linewidth=0.4)
    ax.set_xticks(x, ["/".join(k) for k in keys])
    name, unit_label = label_of(metric)
    ax.set_title(title or name)
    ax.set_ylabel(suffix.strip(" ()") or unit_label)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")


def varying_parameter(cells: pd.DataFrame) -> dict[str, str]:
    """Per autoscaler, the parameter whose value changes across its cells (if exactly one does)."""
    out = {}
    for name, grp in cells.groupby("autoscaler"):
        params = [json.loads(p) if p else {} for p in grp["params"]]
        keys = sorted({k for p in params for k in p})
        varying = [k for k in keys if len({json.dumps(p.get(k)) for p in params}) > 1]
        if len(varying) == 1:
            out[str(name)] = varying[0]
    return out


def sensitivity(axes: list[plt.Axes], cells: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """Each metric against each autoscaler's varying parameter, with CIs; returns the plotted points."""
    from harness.report.colours import variant_styles
    from harness.report.units import label_of

    require(cells, [*metrics, "autoscaler", "params", "query", "pattern"], "parameter sensitivity")
    rows = []
    for name, param in varying_parameter(cells).items():
        for r in cells[cells["autoscaler"] == name].itertuples(index=False):
            value = json.loads(r.params).get(param)
            rows.append({"autoscaler": name, "parameter": param, "value": float(value), "query": r.query,
                         "pattern": r.pattern,
                         **{m: getattr(r, m) for m in metrics},
                         **{f"{m}_ci": getattr(r, f"{m}_ci", math.nan) for m in metrics}})
    points = pd.DataFrame(rows)
    if points.empty:
        for ax in axes:
            ax.set_title("no parameter varies in these results")
        return points
    for ax, metric in zip(axes, metrics, strict=False):
        factor, suffix = unit(metric, points[metric])
        groups = list(points.groupby(["autoscaler", "query", "pattern"]))
        styles = variant_styles([str(k[0]) for k, _ in groups])
        for ((name, query, pattern), grp), (colour, line, _h) in zip(groups, styles, strict=True):
            grp = grp.sort_values("value")
            ax.errorbar(grp["value"], grp[metric] * factor, yerr=grp[f"{metric}_ci"].fillna(0.0) * factor,
                        marker="o", capsize=3, color=colour, linestyle=line,
                        label=f"{name} {query}/{pattern} ({grp['parameter'].iloc[0]})")
        title, unit_label = label_of(metric)
        ax.set_title(title)
        ax.set_ylabel(suffix.strip(" ()") or unit_label)
        ax.set_xlabel("parameter value")
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    return points


def convergence_summary(convergence: pd.DataFrame) -> pd.DataFrame:
    """Per cell and stage: fraction converged, mean time (pattern minutes) and mean actions.

    Results without convergence stages (no `convergence` pattern in the matrix) are an error that says
    so, not an empty frame that fails later with a KeyError."""
    require(convergence, ["matrix", "query", "autoscaler", "params", "cell_id", "stage", "converged",
                          "time_min_pattern", "actions", "length_min_pattern"],
            "convergence: no convergence stages in these results (run a matrix with the `convergence` pattern, "
            "e.g. experiments/thesis-4-convergence.yaml)")
    keys = ["matrix", "query", "autoscaler", "params", "cell_id"]
    if "config_hash" in convergence:
        keys.append("config_hash")
    if "status" in convergence:
        convergence = convergence[convergence["status"].astype(str) != "interrupted"]
    g = convergence.groupby([*keys, "stage"])
    out = pd.DataFrame({
        "converged": g["converged"].mean(),
        "time_min": g["time_min_pattern"].mean(),
        "actions": g["actions"].mean(),
        "stage_min": g["length_min_pattern"].first(),
        "runs": g.size(),
    }).reset_index()
    out["label"] = [f"{a} {p} {q}" if p not in ("", "{}") else f"{a} {q}"
                     for a, p, q in zip(out["autoscaler"], out["params"], out["query"], strict=True)]
    out["shown"] = [f"{t:.3g}" if c == 1 else (f"{s:.0f}+" if c == 0 else f"{t:.3g} ({c:.0%})")
                    for t, c, s in zip(out["time_min"], out["converged"], out["stage_min"], strict=True)]
    return out


def convergence_bars(ax: plt.Axes, summary: pd.DataFrame) -> None:
    """Stage convergence times; not-converged cells drawn hatched at the stage's full length ("40+")."""
    if summary.empty:
        ax.set_title("no convergence stages in these results")
        return
    stages = sorted(summary["stage"].unique())
    from harness.report.colours import variant_styles

    cells = list(dict.fromkeys(summary["label"]))
    owner = {lab: str(a) for lab, a in zip(summary["label"], summary["autoscaler"], strict=True)}
    styles = variant_styles([owner[c] for c in cells])
    width = 0.8 / max(1, len(cells))
    x = np.arange(len(stages))
    for i, cell in enumerate(cells):
        mine = summary[summary["label"] == cell].set_index("stage")
        vals = [float(mine.loc[s, "time_min"]) if s in mine.index and mine.loc[s, "converged"] > 0
                else (float(mine.loc[s, "stage_min"]) if s in mine.index else 0.0) for s in stages]
        hatch = ["" if s in mine.index and mine.loc[s, "converged"] > 0 else "//" for s in stages]
        bars = ax.bar(x + i * width - 0.4 + width / 2, vals, width, label=cell, color=styles[i][0],
                      edgecolor="black", linewidth=0.4)
        for b, h in zip(bars, hatch, strict=True):
            b.set_hatch(h)
    ax.set_xticks(x, stages)
    ax.set_ylabel("minutes (hatched: not converged)")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small")
