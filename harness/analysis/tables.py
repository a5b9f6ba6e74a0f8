"""Comparison tables in the thesis' shape: one row per autoscaler or configuration.

One set of tables per (matrix, query, pattern); each is written as CSV (raw
numbers: mean, CI half-width, n), Markdown and LaTeX (mean +- CI). The
convergence table prints "40+" (the stage's length in pattern minutes and a
plus) where the autoscaler had not converged when the stage ended, as the
thesis does (Kanis 2023, ch. 7).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from harness.analysis.metrics import fmt_latency, fmt_share
from harness.analysis.rounding import PM_LEGEND, with_ci

# (column in the cell aggregates, header) per table kind
TABLE_COLUMNS: dict[str, list[tuple[str, str]]] = {
    "thesis": [("tm_avg", "avg(TM)"), ("tm_max", "max(TM)"), ("latency_kafka_avg", "kafka lat avg"),
               ("latency_kafka_p50", "kafka p50"), ("latency_kafka_p95", "kafka p95"),
               ("latency_kafka_max", "kafka max"), ("input_rate_avg", "input rec/s"),
               ("throughput_avg", "throughput rec/s"), ("throughput_ratio", "thr/input"),
               ("load_shortfall", "shortfall"), ("cpu_avg", "CPU"), ("scale_count", "scale count"),
               ("decisions_skipped", "skipped decisions"), ("flagged", "flagged")],
    # both latencies side by side (METRICS.md): time in Kafka (thesis) and end to end (sink - event time)
    "latency": [("latency_kafka_avg", "kafka avg"), ("latency_kafka_p50", "kafka p50"),
                ("latency_kafka_p95", "kafka p95"), ("latency_kafka_max", "kafka max"),
                ("latency_e2e_avg", "e2e avg"), ("latency_e2e_p50", "e2e p50"), ("latency_e2e_p95", "e2e p95"),
                ("latency_e2e_max", "e2e max"), ("load_shortfall", "load shortfall"),
                ("shortfall_flagged", "shortfall > 1 %"), ("decisions_skipped", "skipped decisions")],
    "spec": [("spec_accuracy_o", "accuracyO"), ("spec_accuracy_u", "accuracyU"),
             ("spec_timeshare_o", "timeshareO %"), ("spec_timeshare_u", "timeshareU %"),
             ("spec_excess_time", "excess time"), ("spec_reconfigurations", "#reconf."),
             ("spec_cost_replica_min", "cost (replica-min)")],
    "saso": [("saso_reconfigurations", "stability: #reconf."), ("saso_qos_violations", "QoS violations"),
             ("saso_qos_violation_pct", "violations %"), ("saso_amplitude", "amplitude"),
             ("saso_overshoot", "overshoot: mean TM"), ("saso_overshoot_vs_ideal", "TM - ideal")],
    "mead": [("mead_rt_mean", "mean RT s"), ("mead_rt_p95", "p95 RT s"), ("mead_rt_target", "target s"),
             ("mead_rt_ratio", "RT/target"), ("mead_target_met", "met"), ("mead_cpu_share", "CPU share")],
}


@dataclass(frozen=True)
class Table:
    matrix: str
    query: str
    pattern: str
    kind: str
    raw: pd.DataFrame  # label, n, <col>, <col>_ci ...
    shown: pd.DataFrame  # formatted strings with thesis headers

    @property
    def stem(self) -> str:
        return f"{self.query}-{self.pattern}-{self.kind}"

    @property
    def title(self) -> str:
        return f"{self.matrix}: {self.query} / {self.pattern} ({self.kind})"


def fmt(value: float, ci: float = math.nan) -> str:
    """Three significant figures, thousands grouped; 'mean ± ci' rounded to the interval's precision
    (`harness.analysis.rounding`: never `1 ± 1.41e-15`)."""
    return with_ci(value, ci)


def formatter(column: str) -> Any:
    """How a summary column is shown: latencies in ms/s, the load shortfall in %, the rest as numbers."""
    if column.startswith("latency_"):
        return fmt_latency
    if column == "load_shortfall":
        return fmt_share
    return fmt


def row_labels(cells: pd.DataFrame) -> list[str]:
    """Autoscaler name plus its parameters that vary among its cells here; cell id if still ambiguous."""
    params = [json.loads(p) if isinstance(p, str) and p else {} for p in cells["params"]]
    names = [str(n) for n in cells["autoscaler"]]
    varying: dict[str, list[str]] = {}
    for name in set(names):
        mine = [p for n, p in zip(names, params, strict=True) if n == name]
        keys = sorted({k for p in mine for k in p})
        varying[name] = [k for k in keys if len({json.dumps(p.get(k), sort_keys=True) for p in mine}) > 1]
    labels = []
    for name, p in zip(names, params, strict=True):
        extra = ", ".join(f"{k}={p.get(k)}" for k in varying[name] if k in p)
        labels.append(f"{name} ({extra})" if extra else name)
    if len(set(labels)) < len(labels):
        labels = [f"{lab} [{cid}]" for lab, cid in zip(labels, cells["cell_id"], strict=True)]
    if len(set(labels)) < len(labels) and "config_hash" in cells:  # one cell, two configurations: never merged
        labels = [f"{lab} #{h}" for lab, h in zip(labels, cells["config_hash"].astype(str), strict=True)]
    return labels


def _table(cells: pd.DataFrame, labels: list[str], columns: list[tuple[str, str]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    present = [(c, h) for c, h in columns if c in cells]
    raw: dict[str, Any] = {"configuration": labels, "n": cells["runs"].to_numpy()}
    shown: dict[str, Any] = {"configuration": labels, "n": cells["runs"].to_numpy()}
    for c, h in present:
        raw[c] = cells[c].to_numpy()
        raw[f"{c}_ci"] = cells[f"{c}_ci"].to_numpy() if f"{c}_ci" in cells else math.nan
        show = formatter(c)
        shown[h] = [show(v, e) for v, e in zip(cells[c], cells.get(f"{c}_ci", [math.nan] * len(cells)), strict=True)]
    return pd.DataFrame(raw), pd.DataFrame(shown)


def _convergence_table(cells: pd.DataFrame, labels: list[str],
                       convergence: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    if convergence is None or convergence.empty:
        return None
    conv = convergence[convergence["cell_id"].isin(cells["cell_id"]) & convergence["matrix"].isin(cells["matrix"])]
    if conv.empty:
        return None
    raw: dict[str, Any] = {"configuration": labels, "n": cells["runs"].to_numpy()}
    shown: dict[str, Any] = {"configuration": labels, "n": cells["runs"].to_numpy()}
    for stage in sorted(conv["stage"].unique()):
        times: list[str] = []
        acts: list[str] = []
        t_raw: list[float] = []
        a_raw: list[float] = []
        frac: list[float] = []
        hashes = cells["config_hash"].astype(str) if "config_hash" in cells else [None] * len(cells)
        for cell_id, chash in zip(cells["cell_id"], hashes, strict=True):
            sel = conv[(conv["cell_id"] == cell_id) & (conv["stage"] == stage)]
            if chash is not None and "config_hash" in sel:
                sel = sel[sel["config_hash"].fillna("").astype(str) == chash]
            if "status" in sel:
                sel = sel[sel["status"].astype(str) != "interrupted"]
            if sel.empty:
                times.append("-")
                acts.append("-")
                t_raw.append(math.nan)
                a_raw.append(math.nan)
                frac.append(math.nan)
                continue
            ok = sel[sel["converged"].astype(bool)]
            length = float(sel["length_min_pattern"].iloc[0])
            mean_t = float(ok["time_min_pattern"].mean()) if len(ok) else math.nan
            if ok.empty:
                times.append(f"{length:.0f}+")
            elif len(ok) < len(sel):
                times.append(f"{fmt(mean_t)} ({len(ok)}/{len(sel)}; rest {length:.0f}+)")
            else:
                times.append(fmt(mean_t))
            acts.append(fmt(float(sel["actions"].mean())))
            t_raw.append(mean_t)
            a_raw.append(float(sel["actions"].mean()))
            frac.append(len(ok) / len(sel))
        raw[f"{stage}_time_min"], raw[f"{stage}_actions"], raw[f"{stage}_converged_frac"] = t_raw, a_raw, frac
        shown[f"{stage} time (min)"], shown[f"{stage} actions"] = times, acts
    return pd.DataFrame(raw), pd.DataFrame(shown)


def build_tables(cells: pd.DataFrame, convergence: pd.DataFrame | None = None) -> list[Table]:
    """Every table kind for every (matrix, query, pattern) group of cells."""
    tables: list[Table] = []
    if cells.empty:
        return tables
    for (matrix, query, pattern), group in cells.groupby(["matrix", "query", "pattern"], sort=True):
        group = group.sort_values(["autoscaler", "params", "cell_id"]).reset_index(drop=True)
        labels = row_labels(group)
        for kind, columns in TABLE_COLUMNS.items():
            raw, shown = _table(group, labels, columns)
            tables.append(Table(str(matrix), str(query), str(pattern), kind, raw, shown))
        conv = _convergence_table(group, labels, convergence if convergence is not None else pd.DataFrame())
        if conv is not None:
            tables.append(Table(str(matrix), str(query), str(pattern), "convergence", *conv))
    return tables


def to_markdown(df: pd.DataFrame) -> str:
    cols = [str(c) for c in df.columns]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(str(v).replace("|", "\\|") for v in row) + " |")
    return "\n".join(lines) + "\n"


_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}


def _tex(text: Any) -> str:
    out = "".join(_TEX_ESCAPES.get(ch, ch) for ch in str(text))
    return out.replace("±", r"$\pm$")


def to_latex(df: pd.DataFrame, caption: str, label: str) -> str:
    """A booktabs table (needs \\usepackage{booktabs})."""
    spec = "l" + "r" * (len(df.columns) - 1)
    lines = [r"\begin{table}[htbp]", r"\centering", r"\small", rf"\caption{{{_tex(caption)}}}",
             rf"\label{{{label}}}", rf"\begin{{tabular}}{{{spec}}}", r"\toprule",
             " & ".join(_tex(c) for c in df.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(_tex(v) for v in row) + r" \\" for row in df.itertuples(index=False)]
    lines += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
    return "\n".join(lines) + "\n"


def write_tables(tables: list[Table], out_dir: Path) -> list[Path]:
    """`<out>/<matrix>/<query>-<pattern>-<kind>.{csv,md,tex}` plus an index.md of all of them."""
    out_dir = Path(out_dir)
    written: list[Path] = []
    index = ["# Comparison tables", "", PM_LEGEND, ""]
    for t in tables:
        d = out_dir / t.matrix
        d.mkdir(parents=True, exist_ok=True)
        csv, md, tex = d / f"{t.stem}.csv", d / f"{t.stem}.md", d / f"{t.stem}.tex"
        t.raw.to_csv(csv, index=False)
        md.write_text(f"### {t.title}\n\n" + to_markdown(t.shown))
        tex.write_text(to_latex(t.shown, t.title, f"tab:{t.matrix}-{t.stem}"))
        written += [csv, md, tex]
        index += [f"### {t.title}", "", to_markdown(t.shown)]
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "index.md").write_text("\n".join(index))
    written.append(out_dir / "index.md")
    return written
