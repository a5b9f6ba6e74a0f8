"""`bench report`: one self-contained HTML page (figures as base64 PNG) and a Markdown twin.

Reads the outputs of `bench analyze` - re-analysing with the pandas engine
when they are missing or stale (runs added, removed or rewritten since:
`harness.analysis.freshness`) - and, for figures over time, the first
repetition of every cell. A reader opens `report.html` without running anything.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pandas as pd
import pyarrow.parquet as pq

from harness.analysis import freshness
from harness.analysis.loader import read_events
from harness.analysis.meta import load_meta
from harness.analysis.metrics import SHORTFALL_FLAG
from harness.analysis.pipeline import analyze, default_out, load_outputs
from harness.analysis.tables import Table, build_tables, fmt_share, row_labels, to_markdown
from harness.report import figures
from harness.report.figures import Trace

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3} img{max-width:100%} h2{border-bottom:2px solid #ddd;padding-bottom:.2em}
.muted{color:#777;font-size:.9em}
"""


@dataclass(frozen=True)
class ReportPaths:
    html: Path
    markdown: Path
    figures: list[Path]


@dataclass
class _Section:
    title: str
    tables: list[Table]
    figures: list[tuple[str, bytes, Path]]


def _png(fig: plt.Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def _traces(results_dir: Path, runs: pd.DataFrame, group_cells: pd.DataFrame) -> list[Trace]:
    """The lowest repetition of each cell, labelled as in the tables."""
    labels = dict(zip(group_cells["cell_id"], row_labels(group_cells), strict=False))
    traces = []
    for cell_id, label in labels.items():
        sel = runs[(runs["cell_id"] == cell_id) & (runs["matrix"] == group_cells["matrix"].iloc[0])]
        if "config_hash" in group_cells and "config_hash" in runs:
            hashes = set(group_cells.loc[group_cells["cell_id"] == cell_id, "config_hash"].astype(str))
            sel = sel[sel["config_hash"].astype(str).isin(hashes)]
        if "status" in sel:
            sel = sel[sel["status"].astype(str) != "interrupted"]
        if sel.empty:
            continue
        run_dir = Path(results_dir) / str(sel.sort_values("repetition").iloc[0]["run_id"])
        ts_path = run_dir / "timeseries.parquet"
        if not ts_path.exists():
            continue
        ts = pq.read_table(ts_path).to_pandas()
        events = read_events(run_dir)
        stages = figures.stages_from_events(events) or load_meta(run_dir, results_dir).stages
        traces.append(Trace(label, ts, events, stages))
    return traces


def _section_figures(traces: list[Trace], stem: str, fig_dir: Path) -> list[tuple[str, bytes, Path]]:
    makers: list[tuple[str, Callable[[list[Trace]], plt.Figure]]] = [
        ("Task managers over time", figures.taskmanagers),
        ("Latency over time", figures.latency),
        ("Input rate vs throughput", figures.input_vs_throughput),
        ("Parallelism per operator", figures.parallelism),
    ]
    if any(tr.stages for tr in traces):
        makers.append(("Convergence stages", figures.convergence))
    out = []
    for title, make in makers:
        data = _png(make(traces))
        path = fig_dir / f"{stem}-{title.lower().replace(' ', '-')}.png"
        path.write_bytes(data)
        out.append((title, data, path))
    return out


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        return pd.read_csv(path) if path.exists() else pd.DataFrame()
    except pd.errors.EmptyDataError:
        return pd.DataFrame()


def build_report(results_dir: Path, out_dir: Path | None = None, analysis_dir: Path | None = None,
                 progress: Callable[[str], Any] | None = None,
                 notice: Callable[[str], Any] | None = None) -> ReportPaths:
    results_dir = Path(results_dir)
    analysis_dir = Path(analysis_dir) if analysis_dir else default_out(results_dir)
    out_dir = Path(out_dir) if out_dir else results_dir / "report"
    state = freshness.check(results_dir, analysis_dir)
    if not state.fresh:
        if notice and state.why != "no analysis yet":
            notice(f"analysis in {analysis_dir} is stale: {state.why}; re-analysing (pandas)")
        if progress:
            progress(f"{state.why}: analysing with pandas")
        analyze(results_dir, analysis_dir, engine="pandas",
                warn=(lambda s: notice(f"warning: {s.line()}")) if notice else None)
    runs, cells, convergence, _ops = load_outputs(analysis_dir)
    crashes = _read_csv(analysis_dir / "crash_rates.csv")
    recovery = _read_csv(analysis_dir / "fault_recovery.csv")
    skipped = len(_read_csv(analysis_dir / "skipped.csv"))
    for frame in (runs, cells, convergence):
        for col in ("cell_id", "matrix", "query", "pattern", "params", "config_hash"):
            if col in frame:
                frame[col] = frame[col].fillna("").astype(str)
    fig_dir = out_dir / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    tables = build_tables(cells, convergence)
    sections: list[_Section] = []
    for (matrix, query, pattern), group in cells.groupby(["matrix", "query", "pattern"], sort=True):
        if progress:
            progress(f"figures for {matrix} {query}/{pattern}")
        group = group.sort_values(["autoscaler", "params", "cell_id"]).reset_index(drop=True)
        traces = _traces(results_dir, runs, group)
        stem = f"{matrix}-{query}-{pattern}"
        group_tables = [t for t in tables if (t.matrix, t.query, t.pattern) == (matrix, query, pattern)]
        sections.append(_Section(f"{matrix}: {query} / {pattern}", group_tables,
                                 _section_figures(traces, stem, fig_dir)))
    md = _markdown(results_dir, runs, crashes, recovery, skipped, sections, out_dir)
    page = _html(results_dir, runs, crashes, recovery, skipped, sections)
    (out_dir / "report.md").write_text(md)
    (out_dir / "report.html").write_text(page)
    return ReportPaths(out_dir / "report.html", out_dir / "report.md", [p for s in sections for _, _, p in s.figures])


def _header(results_dir: Path, runs: pd.DataFrame, skipped: int) -> str:
    flagged = int(runs["flagged"].sum()) if "flagged" in runs else 0
    short = int(runs["shortfall_flagged"].fillna(False).astype(bool).sum()) if "shortfall_flagged" in runs else 0
    stopped = int((runs["status"].astype(str) == "interrupted").sum()) if "status" in runs else 0
    text = (f"{len(runs)} runs under `{results_dir}`; {flagged} flagged (crash, failed rescale, failed run or "
            f"injected fault; kept and counted); {short} flagged for load shortfall (more than {SHORTFALL_FLAG:.0%} "
            "of the pattern's records never offered: generator skips and records expired in Kafka).")
    if stopped:
        text += f" {stopped} interrupted (left out of means, intervals and crash rates)."
    if skipped:
        text += f" {skipped} corrupt run record(s) skipped (see skipped.csv)."
    return text + (" Latencies: kafka = time in Kafka (thesis), e2e = sink time - event time, in ms below 1 s. "
                   "Cells show mean ± 95 % t-interval half-width over repetitions; n = runs.")


def shortfall_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs flagged for load shortfall, with what was lost (the report lists them by name)."""
    cols = ["run_id", "load_shortfall", "load_skipped", "load_expired"]
    if runs.empty or "shortfall_flagged" not in runs:
        return pd.DataFrame(columns=cols)
    sel = runs[runs["shortfall_flagged"].fillna(False).astype(bool)]
    out = sel[[c for c in cols if c in sel]].copy()
    out["load_shortfall"] = [fmt_share(v) for v in out["load_shortfall"]]
    return out.reset_index(drop=True)


def _markdown(results_dir: Path, runs: pd.DataFrame, crashes: pd.DataFrame, recovery: pd.DataFrame, skipped: int,
              sections: list[_Section], out_dir: Path) -> str:
    lines = ["# Autoscaler benchmark report", "", _header(results_dir, runs, skipped), ""]
    if not crashes.empty:
        lines += ["## Crash rate per autoscaler", "", to_markdown(crashes), ""]
    short = shortfall_runs(runs)
    if not short.empty:
        lines += [f"## Runs flagged for load shortfall (> {SHORTFALL_FLAG:.0%})", "", to_markdown(short), ""]
    if not recovery.empty:
        lines += ["## Recovery after injected faults (s)", "", to_markdown(recovery), ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        for t in s.tables:
            lines += [f"### {t.kind}", "", to_markdown(t.shown), ""]
        for title, _data, path in s.figures:
            lines += [f"![{title}]({path.relative_to(out_dir)})", ""]
    return "\n".join(lines)


def _html(results_dir: Path, runs: pd.DataFrame, crashes: pd.DataFrame, recovery: pd.DataFrame, skipped: int,
          sections: list[_Section]) -> str:
    body = [f"<h1>Autoscaler benchmark report</h1><p class='muted'>{html.escape(_header(results_dir, runs, skipped))}"
            "</p>"]
    if not crashes.empty:
        body.append("<h2>Crash rate per autoscaler</h2>" + crashes.to_html(index=False, float_format="%.3g"))
    short = shortfall_runs(runs)
    if not short.empty:
        body.append(f"<h2>Runs flagged for load shortfall (&gt; {SHORTFALL_FLAG:.0%})</h2>"
                    + short.to_html(index=False, float_format="%.3g"))
    if not recovery.empty:
        body.append("<h2>Recovery after injected faults (s)</h2>" + recovery.to_html(index=False, float_format="%.3g"))
    for s in sections:
        body.append(f"<h2>{html.escape(s.title)}</h2>")
        for t in s.tables:
            body.append(f"<h3>{html.escape(t.kind)}</h3>" + t.shown.to_html(index=False, escape=True))
        for title, data, _path in s.figures:
            b64 = base64.b64encode(data).decode("ascii")
            body.append(f"<h3>{html.escape(title)}</h3><img alt='{html.escape(title)}' "
                        f"src='data:image/png;base64,{b64}'>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Autoscaler benchmark report</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")
