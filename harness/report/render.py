"""`bench report`: one self-contained HTML page (figures as base64 PNG) and a Markdown twin.

Reads the outputs of `bench analyze` - re-analysing with the pandas engine
when they are missing or stale (runs added, removed or rewritten since:
`harness.analysis.freshness`) - and, for figures over time, every counted
repetition of every cell (median and 5-95 % band; parallelism per operator and
the convergence stages show the first repetition, and say so). A table of
contents links the sections; SPEC / SASO / MEAD tables appear only where they
apply (`harness.report.applicability`). A reader opens `report.html` without
running anything.
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
from harness.analysis.rounding import PM_LEGEND
from harness.analysis.tables import Table, build_tables, fmt_share, row_labels, to_markdown
from harness.report import cell_figures, figures
from harness.report.applicability import applies, why_not
from harness.report.figures import Trace
from harness.vocabulary import Metric

CSS = """
body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3} img{max-width:100%} h2{border-bottom:2px solid #ddd;padding-bottom:.2em}
.muted{color:#777;font-size:.9em} figure{margin:1em 0} figcaption{color:#555;font-size:.85em}
nav ul{columns:2;font-size:.95em} .bars{display:flex;flex-wrap:wrap;gap:.5em} .bars figure{margin:.3em 0}

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
    anchor: str = ""
    notes: list[str] | None = None  # tables left out, and why
    bars: list[tuple[str, bytes, Path]] | None = None  # one bar chart per metric


def _png(fig: plt.Figure, tight: bool = True) -> bytes:
    """PNG bytes; `tight` crops to what is drawn (no clipped titles or legends), for figures not laid out already."""
    buf = io.BytesIO()
    if tight:
        fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", pad_inches=0.15)
    else:
        fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def _title_room(fig: plt.Figure) -> plt.Figure:
    """Half an inch above the panels for the figure's title, whatever the figure's height (no overlap)."""
    fig.subplots_adjust(top=1 - 0.5 / fig.get_figheight())
    return fig


def _slug(text: str) -> str:
    """A GitHub-style heading anchor (lower case, spaces to dashes, punctuation dropped)."""
    return "".join(ch if ch.isalnum() or ch in "-_" else "" for ch in text.lower().replace(" ", "-"))


def _traces(results_dir: Path, runs: pd.DataFrame, group_cells: pd.DataFrame) -> list[Trace]:
    """The lowest repetition of each cell, labelled as in the tables and coloured by its autoscaler."""
    labels = dict(zip(group_cells["cell_id"], row_labels(group_cells), strict=False))
    owners = dict(zip(group_cells["cell_id"], group_cells["autoscaler"].astype(str), strict=False))
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
        traces.append(Trace(label, ts, events, stages, owners[cell_id]))
    return traces


def _section_figures(traces: list[Trace], cell_runs: list[cell_figures.CellRuns], stem: str,
                     fig_dir: Path) -> list[tuple[str, bytes, Path]]:
    """Over time: all repetitions (median, 5-95 % band); per operator and convergence: the first repetition."""
    e2e = getattr(Metric, "LATENCY_E2E_MEAN", None)
    makers: list[tuple[str, Callable[[], plt.Figure]]] = [
        ("Task managers over time", lambda: cell_figures.band_over_time(
            cell_runs, Metric.TASKMANAGERS, "Task managers over time", "task managers", step=True)),
        ("Latency over time", lambda: cell_figures.band_over_time(
            cell_runs, Metric.LATENCY_KAFKA, "Latency (time in Kafka) over time", "latency (s)", log=True)),
    ]
    if e2e is not None and any(c.series(e2e) for c in cell_runs):
        makers.append(("End-to-end latency over time", lambda: cell_figures.band_over_time(
            cell_runs, e2e, "End-to-end latency over time (mean per interval)", "latency (s)", log=True)))
    makers += [
        ("Input rate vs throughput", lambda: cell_figures.input_vs_throughput(cell_runs)),
        ("Parallelism per operator (first repetition)",
         lambda: _title_room(figures.parallelism(traces, "Parallelism per operator (first repetition of each cell)"))),
    ]
    if any(tr.stages for tr in traces):
        makers.append(("Convergence stages (first repetition)",
                       lambda: figures.convergence(traces, "Convergence stages (first repetition of each cell)")))
    out = []
    for title, make in makers:
        data = _png(make())
        path = fig_dir / f"{stem}-{_slug(title)}.png"
        path.write_bytes(data)
        out.append((title, data, path))
    return out


def _bar_figures(group: pd.DataFrame, labels: list[str], stem: str, fig_dir: Path) -> list[tuple[str, bytes, Path]]:
    """One bar chart per headline metric, as the panels of one figure."""
    metrics = cell_figures.bar_metrics(group)
    if not metrics:
        return []
    data = _png(cell_figures.metric_bars(group, labels, metrics), tight=False)  # laid out by tight_layout
    path = fig_dir / f"{stem}-per-metric.png"
    path.write_bytes(data)
    return [("Per metric: mean and 95 % CI (" + ", ".join(metrics) + ")", data, path)]


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
        labels = row_labels(group)
        metrics = [m for m in cell_figures.TIME_METRICS] + [getattr(Metric, "LATENCY_E2E_MEAN", Metric.LATENCY_KAFKA)]
        cell_runs = cell_figures.load_cell_runs(results_dir, runs, group, labels, [str(m) for m in metrics])
        stem = f"{matrix}-{query}-{pattern}"
        mine = [t for t in tables if (t.matrix, t.query, t.pattern) == (matrix, query, pattern)]
        group_tables = [t for t in mine if applies(t.kind, group)]
        notes = [f"No {t.kind.upper()} table: {why_not(t.kind)}." for t in mine if not applies(t.kind, group)]
        title = f"{matrix}: {query} / {pattern}"
        sections.append(_Section(title, group_tables, _section_figures(traces, cell_runs, stem, fig_dir),
                                 anchor=_slug(title), notes=notes, bars=_bar_figures(group, labels, stem, fig_dir)))
    md = _markdown(results_dir, runs, crashes, recovery, skipped, sections, out_dir)
    page = _html(results_dir, runs, crashes, recovery, skipped, sections)
    (out_dir / "report.md").write_text(md)
    (out_dir / "report.html").write_text(page)
    return ReportPaths(out_dir / "report.html", out_dir / "report.md",
                       [p for s in sections for _, _, p in [*s.figures, *(s.bars or [])]])


def _header(results_dir: Path, runs: pd.DataFrame, skipped: int) -> str:
    flagged = int(runs["flagged"].sum()) if "flagged" in runs else 0
    short = int(runs["shortfall_flagged"].eq(True).sum()) if "shortfall_flagged" in runs else 0
    stopped = int((runs["status"].astype(str) == "interrupted").sum()) if "status" in runs else 0
    text = (f"{len(runs)} runs under `{results_dir}`; {flagged} flagged (crash, failed rescale, failed run or "
            f"injected fault; kept and counted); {short} flagged for load shortfall (more than {SHORTFALL_FLAG:.0%} "
            "of the pattern's records never offered: generator skips and records expired in Kafka).")
    if stopped:
        text += f" {stopped} interrupted (left out of means, intervals and crash rates)."
    if skipped:
        text += f" {skipped} corrupt run record(s) skipped (see skipped.csv)."
    return (text + " Latencies: kafka = time in Kafka (thesis), e2e = sink time - event time, in ms below 1 s. "
            + PM_LEGEND.replace("`", ""))


TABLE_TITLES = {"thesis": "Thesis metrics (ch. 5.3)", "latency": "Latency, both definitions",
                "spec": "SPEC metrics (Gesscale, sec. V)", "saso": "SASO metrics (De Matteis & Mencagli, sec. 5)",
                "mead": "MEAD metrics (Russo Russo et al. 2021)", "convergence": "Convergence per stage"}
CRASH_TITLE, RECOVERY_TITLE = "Crash rate per autoscaler", "Recovery after injected faults (s)"
SHORTFALL_TITLE = f"Runs flagged for load shortfall (> {SHORTFALL_FLAG:.0%})"


def _contents(crashes: pd.DataFrame, shortfall: pd.DataFrame, recovery: pd.DataFrame,
              sections: list[_Section]) -> list[tuple[str, str]]:
    """(title, anchor) of every top-level section, in page order."""
    out = []
    if not crashes.empty:
        out.append((CRASH_TITLE, _slug(CRASH_TITLE)))
    if not shortfall.empty:
        out.append((SHORTFALL_TITLE, _slug(SHORTFALL_TITLE)))
    if not recovery.empty:
        out.append((RECOVERY_TITLE, _slug(RECOVERY_TITLE)))
    return out + [(s.title, s.anchor or _slug(s.title)) for s in sections]


def shortfall_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Runs flagged for load shortfall, with what was lost (the report lists them by name)."""
    cols = ["run_id", "load_shortfall", "load_skipped", "load_expired"]
    if runs.empty or "shortfall_flagged" not in runs:
        return pd.DataFrame(columns=cols)
    sel = runs[runs["shortfall_flagged"].eq(True)]
    out = sel[[c for c in cols if c in sel]].copy()
    out["load_shortfall"] = [fmt_share(v) for v in out["load_shortfall"]]
    return out.reset_index(drop=True)


def _markdown(results_dir: Path, runs: pd.DataFrame, crashes: pd.DataFrame, recovery: pd.DataFrame, skipped: int,
              sections: list[_Section], out_dir: Path) -> str:
    short = shortfall_runs(runs)
    lines = ["# Autoscaler benchmark report", "", _header(results_dir, runs, skipped), "", "## Contents", ""]
    lines += [f"- [{title}](#{anchor})" for title, anchor in _contents(crashes, short, recovery, sections)] + [""]
    if not crashes.empty:
        lines += [f"## {CRASH_TITLE}", "", to_markdown(crashes), ""]
    if not short.empty:
        lines += [f"## {SHORTFALL_TITLE}", "", to_markdown(short), ""]
    if not recovery.empty:
        lines += [f"## {RECOVERY_TITLE}", "", to_markdown(recovery), ""]
    for s in sections:
        lines += [f"## {s.title}", ""]
        for t in s.tables:
            lines += [f"### {TABLE_TITLES.get(t.kind, t.kind)}", "", to_markdown(t.shown), ""]
        lines += [f"_{note}_" for note in s.notes or []] + ([""] if s.notes else [])
        if s.bars:
            lines += ["### Per metric: mean and 95 % CI", ""]
            lines += [f"![{metric}]({path.relative_to(out_dir)})" for metric, _d, path in s.bars] + [""]
        for title, _data, path in s.figures:
            lines += [f"![{title}]({path.relative_to(out_dir)})", ""]
    return "\n".join(lines)


def _img(title: str, data: bytes) -> str:
    b64 = base64.b64encode(data).decode("ascii")
    return f"<img alt='{html.escape(title)}' src='data:image/png;base64,{b64}'>"


def _html(results_dir: Path, runs: pd.DataFrame, crashes: pd.DataFrame, recovery: pd.DataFrame, skipped: int,
          sections: list[_Section]) -> str:
    body = [f"<h1>Autoscaler benchmark report</h1><p class='muted'>{html.escape(_header(results_dir, runs, skipped))}"
            "</p>"]
    short = shortfall_runs(runs)
    toc = "".join(f"<li><a href='#{anchor}'>{html.escape(title)}</a></li>"
                  for title, anchor in _contents(crashes, short, recovery, sections))
    body.append(f"<nav id='contents'><h2>Contents</h2><ul>{toc}</ul></nav>")
    if not crashes.empty:
        body.append(f"<h2 id='{_slug(CRASH_TITLE)}'>{CRASH_TITLE}</h2>"
                    + crashes.to_html(index=False, float_format="%.3g"))
    if not short.empty:
        body.append(f"<h2 id='{_slug(SHORTFALL_TITLE)}'>{html.escape(SHORTFALL_TITLE)}</h2>"
                    + short.to_html(index=False, float_format="%.3g"))
    if not recovery.empty:
        body.append(f"<h2 id='{_slug(RECOVERY_TITLE)}'>{RECOVERY_TITLE}</h2>"
                    + recovery.to_html(index=False, float_format="%.3g"))
    for s in sections:
        body.append(f"<section id='{s.anchor or _slug(s.title)}'><h2>{html.escape(s.title)}</h2>")
        for t in s.tables:
            body.append(f"<h3>{html.escape(TABLE_TITLES.get(t.kind, t.kind))}</h3>"
                        + t.shown.to_html(index=False, escape=True))
        body += [f"<p class='muted'>{html.escape(note)}</p>" for note in s.notes or []]
        if s.bars:
            body.append("<h3>Per metric: mean and 95 % CI</h3><div class='bars'>"
                        + "".join(f"<figure>{_img(m, d)}</figure>" for m, d, _p in s.bars) + "</div>")
        for title, data, _path in s.figures:
            body.append(f"<figure><h3>{html.escape(title)}</h3>{_img(title, data)}</figure>")
        body.append("</section>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>Autoscaler benchmark report</title>"
            f"<style>{CSS}</style></head><body>{''.join(body)}</body></html>")
