"""Per-cell aggregates over repetitions: mean, 95 % t-interval half-width, n.

A cell is one point of an experiment matrix (matrix, query, pattern,
autoscaler and its parameters, plus whatever else its cell id encodes) made
with one configuration (its config hash: an edited cell is another row, never
mixed in); its repetitions differ only in seed. The thesis ran each cell once;
we report the spread (METRICS.md "Across repetitions").

Interrupted runs (a Ctrl-C) are neither successes nor crashes: they are left
out of means, intervals and crash rates, and counted in `interrupted`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from harness.analysis.columns import CELL_KEYS as CELL_KEYS  # the cell's keys, imported from here too
from harness.analysis.columns import NOT_METRICS
from harness.analysis.metrics import t_factor
from harness.run_status import RunStatus


def with_cell_keys(summary: pd.DataFrame) -> pd.DataFrame:
    """Summaries from before config hashes (or hand-made ones) get an empty hash column."""
    if "config_hash" not in summary:
        summary = summary.assign(config_hash="")
    return summary


def split_interrupted(summary: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(runs that count, interrupted runs per cell as CELL_KEYS + `interrupted`)."""
    summary = with_cell_keys(summary)
    if summary.empty or "status" not in summary:
        return summary, pd.DataFrame(columns=CELL_KEYS + ["interrupted"])
    mask = summary["status"].astype(str) == RunStatus.INTERRUPTED.value
    stopped = summary[mask]
    counts = (stopped.groupby(CELL_KEYS, dropna=False).size().rename("interrupted").reset_index()
              if not stopped.empty else pd.DataFrame(columns=CELL_KEYS + ["interrupted"]))
    return summary[~mask].reset_index(drop=True), counts


def attach_interrupted(cells: pd.DataFrame, counts: pd.DataFrame) -> pd.DataFrame:
    """Add the `interrupted` count per cell (cells with only interrupted runs get a row with runs = 0)."""
    if counts.empty:
        return cells.assign(interrupted=0) if not cells.empty else cells.assign(interrupted=pd.Series(dtype=int))
    keys = counts[CELL_KEYS].astype(str)
    counts = counts.assign(**{k: keys[k] for k in CELL_KEYS})
    cells = cells.copy()
    left = cells[CELL_KEYS].astype(str) if not cells.empty else pd.DataFrame(columns=CELL_KEYS)
    merged = left.merge(counts, on=CELL_KEYS, how="outer", indicator=True)
    cells["interrupted"] = merged.loc[merged["_merge"] != "right_only", "interrupted"].fillna(0).astype(int).to_numpy()
    only = merged[merged["_merge"] == "right_only"]
    if len(only):
        extra = only[CELL_KEYS].assign(runs=0, interrupted=only["interrupted"].astype(int))
        cells = pd.concat([cells, extra], ignore_index=True)
    return cells


def metric_columns(summary: pd.DataFrame) -> list[str]:
    """Numeric (and boolean) summary columns that get aggregated."""
    return [c for c in summary.columns
            if c not in NOT_METRICS
            and (pd.api.types.is_numeric_dtype(summary[c]) or pd.api.types.is_bool_dtype(summary[c]))]


def aggregate_cells(summary: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per cell: `<m>` mean, `<m>_ci` half-width, `<m>_n` count of non-NaN values; `runs` in total."""
    summary = with_cell_keys(summary)
    if summary.empty:
        return pd.DataFrame(columns=CELL_KEYS + ["runs"])
    cols = metric_columns(summary)
    values = summary[cols].astype(float)
    grouped = values.groupby([summary[k] for k in CELL_KEYS], sort=True, dropna=False)
    mean = grouped.mean()
    sd = grouped.std(ddof=1)
    n = grouped.count()
    data: dict[str, object] = {}
    for c in cols:
        data[c] = mean[c]
        data[f"{c}_ci"] = pd.Series([ci_half_width(s, int(k), level) for s, k in zip(sd[c], n[c], strict=True)],
                                    index=mean.index)
        data[f"{c}_n"] = n[c].astype(int)
    data["runs"] = grouped.size()
    out = pd.DataFrame(data, index=mean.index)
    return out.reset_index()


def ci_half_width(sd: float, n: int, level: float = 0.95) -> float:
    if n < 2 or sd is None or (isinstance(sd, float) and math.isnan(sd)):
        return math.nan
    return _t_factor(n, level) * float(sd) / math.sqrt(n)


# a cell x metric table asks for the same few quantiles thousands of times; scipy's ppf is slow per call
_t_factor = functools.lru_cache(maxsize=1024)(t_factor)


def crash_rates(summary: pd.DataFrame) -> pd.DataFrame:
    """Per autoscaler: runs, flagged runs, crashed runs and the crash rate; interrupted runs counted apart.

    A crash is a failed run or a fault nobody injected (METRICS.md "Failures": kept, flagged,
    counted); an injected fault flags a run without making it a crash. Interrupted runs are in
    neither the numerator nor the denominator."""
    cols = ["autoscaler", "runs", "flagged", "crashed", "crash_rate", "interrupted"]
    if summary.empty:
        return pd.DataFrame(columns=cols)
    status = summary["status"].astype(str) if "status" in summary else pd.Series("completed", index=summary.index)
    stopped = status == RunStatus.INTERRUPTED.value
    kept = summary[~stopped]
    crashed = kept["crashed"] if "crashed" in kept else kept["flagged"]
    g = kept.groupby("autoscaler")
    out = pd.DataFrame({"runs": g.size(), "flagged": g["flagged"].sum().astype(int),
                        "crashed": crashed.groupby(kept["autoscaler"]).sum().astype(int)})
    out = out.reindex(sorted(set(summary["autoscaler"])), fill_value=0)
    out["crash_rate"] = [c / r if r else math.nan for c, r in zip(out["crashed"], out["runs"], strict=True)]
    out["interrupted"] = summary[stopped].groupby("autoscaler").size().reindex(out.index, fill_value=0).astype(int)
    return out.reset_index(names="autoscaler")[cols]


def compare_frames(a: pd.DataFrame, b: pd.DataFrame, keys: list[str], rtol: float = 1e-6,
                   atol: float = 1e-9) -> list[str]:
    """Differences between two engines' outputs (empty list: they agree)."""
    problems: list[str] = []
    a = a.sort_values(keys).reset_index(drop=True)
    b = b.sort_values(keys).reset_index(drop=True)
    if len(a) != len(b):
        return [f"row count differs: {len(a)} vs {len(b)}"]
    for c in sorted(set(a.columns) | set(b.columns)):
        if c not in a or c not in b:
            problems.append(f"column {c} only in one frame")
            continue
        x, y = a[c], b[c]
        if pd.api.types.is_numeric_dtype(x) or pd.api.types.is_bool_dtype(x):
            xf, yf = x.astype(float).to_numpy(), y.astype(float).to_numpy()
            ok = np.isclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True)
            if not ok.all():
                i = int(np.argmin(ok))
                problems.append(f"{c}: {int((~ok).sum())} rows differ, e.g. {xf[i]!r} vs {yf[i]!r}")
        elif not (x.astype(str).to_numpy() == y.astype(str).to_numpy()).all():
            problems.append(f"{c}: values differ")
    return problems
