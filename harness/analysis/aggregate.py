"""Per-cell aggregates over repetitions: mean, 95 % t-interval half-width, n.

A cell is one point of an experiment matrix (matrix, query, pattern,
autoscaler and its parameters, plus whatever else its cell id encodes); its
repetitions differ only in seed. The thesis ran each cell once; we report
the spread (METRICS.md "Across repetitions").
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pandas as pd

from harness.analysis.metrics import t_factor

CELL_KEYS = ["matrix", "query", "pattern", "autoscaler", "params", "cell_id"]


def metric_columns(summary: pd.DataFrame) -> list[str]:
    """Numeric (and boolean) summary columns that get aggregated."""
    skip = set(CELL_KEYS) | {"run_id", "repetition", "seed", "experiment", "backend", "status"}
    return [c for c in summary.columns
            if c not in skip and (pd.api.types.is_numeric_dtype(summary[c]) or pd.api.types.is_bool_dtype(summary[c]))]


def aggregate_cells(summary: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """One row per cell: `<m>` mean, `<m>_ci` half-width, `<m>_n` count of non-NaN values; `runs` in total."""
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
    """Flagged runs per autoscaler (METRICS.md "Failures": kept, flagged, counted)."""
    if summary.empty:
        return pd.DataFrame(columns=["autoscaler", "runs", "flagged", "crash_rate"])
    g = summary.groupby("autoscaler")
    out = pd.DataFrame({"runs": g.size(), "flagged": g["flagged"].sum().astype(int)})
    out["crash_rate"] = out["flagged"] / out["runs"]
    return out.reset_index()


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
