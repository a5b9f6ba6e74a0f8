"""The fidelity report: Markdown and a self-contained HTML twin (figures inline as PNG).

Sections: what was run (file, scale, time scale and how the scale was chosen, seeds, n, host load
of the local runs, the calibrated profiles used), whether the profile and the local runs came from machines of
the same speed (flagged when not), the targets met per cell, per-cell tables of
local vs sim with the sim's 95 % CI and the relative difference, Kendall's tau of the rankings, the local
busy readings against the sim's reading model, both sides' CPU readings by load, what the operators took at their
limit against the calibrated capacity,
and per cell a figure of task managers and latency over time (local vs each sim repetition).
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from harness.analysis.metrics import MeanCI  # noqa: E402
from harness.fidelity.compare import LABELS, METRICS, CellComparison, Tau  # noqa: E402
from harness.fidelity.cpu_readings import MIN_SECONDS as CPU_MIN_SECONDS  # noqa: E402
from harness.fidelity.machines import WARNING  # noqa: E402
from harness.fidelity.readings import AFTER_RESTART_S as READINGS_AFTER_RESTART_S  # noqa: E402
from harness.fidelity.saturation import SATURATED_CPU, WAITED_S  # noqa: E402
from harness.record import RunRecord  # noqa: E402
from harness.vocabulary import Metric  # noqa: E402

CSS = """
body{font-family:system-ui,sans-serif;max-width:1150px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.85em}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3} img{max-width:100%} h2{border-bottom:2px solid #ddd;padding-bottom:.2em}
.ok{color:#176f2c}.miss{color:#b3261e}.muted{color:#777;font-size:.9em}
"""


REPEATS_TITLE = "Ranking agreement of the local runs with themselves (Kendall tau)"
REPEATS_INTRO = ("The same cells run again on the local stack, each pair of local repetitions ranked against each "
                 "other: how far the real system's own ranking repeats, and so how far the sim-vs-local tau above "
                 "can be read (the local column there is the mean over these runs).")


@dataclass
class ReportInput:
    title: str
    source: str
    notes: list[str]  # free text: scale, time scale, how chosen, host load, profiles
    cells: list[CellComparison]
    taus: list[Tau]
    records: dict[str, tuple[list[RunRecord], list[RunRecord]]] = field(default_factory=dict)  # cell -> (local, sim)
    machines: list[str] = field(default_factory=list)  # the profile's machine speed vs the local runs' (machines.py)
    readings: tuple[list[str], list[list[str]]] | None = None  # local busy readings vs the sim's model (readings.py)
    cpu: tuple[list[str], list[list[str]]] | None = None  # both sides' CPU readings by load (cpu_readings.py)
    repeats: list[Tau] = field(default_factory=list)  # local repetitions ranked against each other (compare.py)
    saturation: tuple[list[str], list[list[str]]] | None = None  # rates at the limit vs the profile (saturation.py)
    ages: tuple[list[str], list[list[str]]] | None = None  # the same, by time since the (re)start (saturation.py)


def _count_digits(v: float) -> int:
    """A count shown whole, a mean of counts over several local runs with its half (4.5 is not 4)."""
    return 0 if math.isfinite(v) and float(v).is_integer() else 1


def _fmt(v: float, digits: int = 2) -> str:
    if not math.isfinite(v):
        return "n/a"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:.{digits}f}"


def _ci(m: MeanCI) -> str:
    if m.n == 0 or not math.isfinite(m.mean):
        return "n/a"
    return _fmt(m.mean) + (f" ± {_fmt(m.half_width)}" if math.isfinite(m.half_width) else "")


def _pct(v: float) -> str:
    return "n/a" if not math.isfinite(v) else f"{v * 100:+.0f} %"


def _check(v: bool | None) -> str:
    return "n/a" if v is None else ("yes" if v else "**no**")


def _summary_rows(cells: Sequence[CellComparison]) -> list[list[str]]:
    rows = []
    for c in cells:
        scale = c.local['scale_count'].mean
        rows.append([
            c.cell_id,
            f"{_fmt(c.local['tm_minutes'].mean, 1)} / {_ci(c.sim['tm_minutes'])} ({_pct(c.rel['tm_minutes'])}) "
            f"{_check(c.checks['tm_minutes'])}",
            f"{_fmt(c.local['latency_p95'].mean)} / {_ci(c.sim['latency_p95'])} ({_pct(c.rel['latency_p95'])}) "
            f"{_check(c.checks['latency_p95'])}",
            f"{_fmt(c.local['e2e_p95'].mean)} / {_ci(c.sim['e2e_p95'])} {_check(c.checks['e2e_p95'])}",
            f"{_fmt(scale, _count_digits(scale))} / {_ci(c.sim['scale_count'])} {_check(c.checks['scale_count'])}",
        ])
    return rows


def _cell_rows(c: CellComparison) -> list[list[str]]:
    return [[LABELS[k], _ci(c.local[k]), _ci(c.sim[k]), _pct(c.rel[k])] for k in METRICS]


def _tau_rows(taus: Sequence[Tau]) -> list[list[str]]:
    return [[t.scope, LABELS.get(t.metric, t.metric), _fmt(t.tau), _fmt(t.p_value), str(t.n)] for t in taus]


def _md_warning(line: str) -> str:
    return f"**{WARNING}**{line[len(WARNING):]}" if line.startswith(WARNING) else line


def _html_warning(line: str) -> str:
    esc = html.escape(line)
    return f"<b class='miss'>{WARNING}</b>{esc[len(WARNING):]}" if line.startswith(WARNING) else esc


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def _html_table(header: list[str], rows: list[list[str]]) -> str:
    def cell(v: str) -> str:
        esc = html.escape(v).replace("**no**", "<b class='miss'>no</b>").replace(" yes", " <span class='ok'>yes</span>")
        return esc

    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(v)}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _table_section(md: list[str], h: list[str], title: str, intro: str,
                   table: tuple[list[str], list[list[str]]]) -> None:
    """A section of a titled intro and a table, appended to both the Markdown and the HTML report."""
    md.append(f"\n## {title}\n\n{intro}\n\n" + _md_table(*table))
    h.append(f"<h2>{title}</h2><p>{html.escape(intro)}</p>" + _html_table(*table))


def _figure(cell: str, local: list[RunRecord], sim: list[RunRecord]) -> bytes:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.2))
    for ax, metric, label in ((axes[0], Metric.TASKMANAGERS, "task managers"),
                              (axes[1], Metric.LATENCY_KAFKA, "latency_kafka (s)")):
        for rec in local:
            s = rec.series(metric).dropna().sort_index()
            ax.step(s.index / 60, s.values, where="post", color="black", lw=1.6, label="local")
        for i, rec in enumerate(sim):
            s = rec.series(metric).dropna().sort_index()
            ax.step(s.index / 60, s.values, where="post", color="tab:orange", lw=0.9, alpha=0.8,
                    label="sim" if i == 0 else None)
        ax.set_xlabel("minutes")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper right", fontsize=8)
    fig.suptitle(cell, fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    plt.close(fig)
    return buf.getvalue()


def write_report(inp: ReportInput, out_dir: Path, stem: str) -> tuple[Path, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    fig_dir = out_dir / f"{stem}-figures"
    fig_dir.mkdir(exist_ok=True)
    summary_head = ["cell", "TM-minutes local / sim (diff) within 15 %", "p95 latency_kafka s local / sim (diff) ok",
                    "p95 e2e s local / sim ok", "scale count local / sim within 2"]
    tau_head = ["scope", "metric", "Kendall tau", "p", "n"]
    cell_head = ["metric", "local", "sim (mean ± 95 % CI)", "sim vs local"]
    met = {k: sum(1 for c in inp.cells if c.checks.get(k)) for k in ("tm_minutes", "latency_p95", "scale_count")}
    measurable = {k: sum(1 for c in inp.cells if c.checks.get(k) is not None) for k in met}
    headline = [f"{LABELS[k]}: target met in {met[k]} of {measurable[k]} cells" for k in met]
    md = [f"# {inp.title}\n", f"Produced by `bench fidelity {inp.source}`.\n"]
    md += [f"- {n}\n" for n in inp.notes]
    if inp.machines:
        md.append("\n## Machine speed (profile vs local runs)\n\n"
                  + "".join(f"- {_md_warning(x)}\n" for x in inp.machines))
    md.append("\n## Headline\n\n" + "".join(f"- {h}\n" for h in headline))
    for t in inp.taus:
        if t.scope == "all cells":
            md.append(f"- Kendall tau on {LABELS.get(t.metric, t.metric)} over all cells: {_fmt(t.tau)} (n = {t.n})\n")
    md.append("\n## Targets per cell\n\n" + _md_table(summary_head, _summary_rows(inp.cells)))
    md.append("\n## Ranking agreement (Kendall tau, local vs sim)\n\n" + _md_table(tau_head, _tau_rows(inp.taus)))
    if inp.repeats:
        md.append(f"\n## {REPEATS_TITLE}\n\n{REPEATS_INTRO}\n\n" + _md_table(tau_head, _tau_rows(inp.repeats)))
    h = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(inp.title)}</title>"
         f"<style>{CSS}</style></head><body><h1>{html.escape(inp.title)}</h1>",
         f"<p class='muted'>Produced by <code>bench fidelity {html.escape(inp.source)}</code>.</p><ul>"]
    h += [f"<li>{html.escape(n)}</li>" for n in inp.notes]
    h.append("</ul>")
    if inp.machines:
        h.append("<h2>Machine speed (profile vs local runs)</h2><ul>" + "".join(
            f"<li>{_html_warning(x)}</li>" for x in inp.machines) + "</ul>")
    h.append("<h2>Headline</h2><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in headline) + "</ul>")
    h.append("<h2>Targets per cell</h2>" + _html_table(summary_head, _summary_rows(inp.cells)))
    h.append("<h2>Ranking agreement (Kendall tau, local vs sim)</h2>" + _html_table(tau_head, _tau_rows(inp.taus)))
    if inp.repeats:
        h.append(f"<h2>{html.escape(REPEATS_TITLE)}</h2><p>{html.escape(REPEATS_INTRO)}</p>"
                 + _html_table(tau_head, _tau_rows(inp.repeats)))
    if inp.readings and inp.readings[1]:
        intro = ("The local runs' busy readings (the mean over an operator's subtasks) against the model the sim "
                 "draws them from (offset + gain x true utilisation; where records waited at its input, the "
                 "calibrated backlogged level; recorded in each sim run): the residual's "
                 "mean, and how far the deployments' mean residuals scatter (a deployment runs from a restart of "
                 "the job to the next; the samples' own noise taken out as if independent, though successive "
                 "readings share most of their window's noise), beside the error the profile has each "
                 "subtask hold for a deployment and what that alone makes of a mean over p subtasks (held / sqrt(p), "
                 "averaged over the deployments). Readings at another CPU share or within "
                 f"{READINGS_AFTER_RESTART_S:.0f} s of a (re)start are left out (warm-up).")
        _table_section(md, h, "Busy readings: local vs the sim's model", intro, inp.readings)
    if inp.cpu and inp.cpu[1]:
        intro = ("The CPU reading (CPU time / the task manager's quota, as HPA-CPU reads it; the mean over an "
                 "operator's task managers) of the local run and of the sim runs, by the operator's load per subtask "
                 "over the reading's span (its records per subtask / the sim's calibrated capacity per subtask; 1+: "
                 "more than that, a backlog read), at one subtask and at two or more. Per band: the local mean "
                 "(its reading time) / the sim's mean over its runs' means (the runs counted); a run counts in a "
                 f"band with {CPU_MIN_SECONDS:.0f} s of readings there, n/a: none did. Readings at another CPU share, "
                 f"within {READINGS_AFTER_RESTART_S:.0f} s of a (re)start or over a span with a rate missing are "
                 "left out.")
        _table_section(md, h, "CPU readings by load: local vs sim", intro, inp.cpu)
    if inp.saturation and inp.saturation[1]:
        intro = ("What an operator took per subtask where it was at its limit, against the capacity the sim runs it "
                 "at in the same input layout (a subtask fed over several channels, by key or round-robin from 2+ "
                 "upstream subtasks, at the fraction its calibration measured there, where it did): a backlog drains "
                 "at that rate, so where the local runs took less the sim drains sooner and its latencies come out "
                 "lower. At its limit over a CPU reading's span: the CPU reading "
                 f"at least {SATURATED_CPU:.2f} of what it read saturated in its calibration (its share of the "
                 "quota then), not itself backpressured, and records waiting at its "
                 f"input (an upstream operator backpressured, or, for a source, records {WAITED_S:.0f} s or more in "
                 "Kafka). Pooled per query over its cells' runs; spans at another CPU share, within "
                 f"{READINGS_AFTER_RESTART_S:.0f} s of a (re)start or with a rate missing are left out; n/a: never "
                 "seen at its limit.")
        _table_section(md, h, "Rates at the limit: local vs the sim's capacity", intro, inp.saturation)
    if inp.ages and inp.ages[1]:
        intro = ("The same spans at the limit as a share of the capacity the sim runs the operator at in its input "
                 "layout, by the time from the job's latest (re)start to the span's end: local / sim median share "
                 "(their time at the limit). A task manager that keeps running may speed up past the warm-up the "
                 "profile measured (q1's map, session 26: a rising local row) or slow down under a long overload "
                 "(q11's window, session 27); the sim's follow the measured warm-up only. The time "
                 "since the (re)start is the youngest task manager's age at most: a rescale keeps the running ones. "
                 "Spans of an unknown input layout are left out; n/a: not at its limit in that band.")
        _table_section(md, h, "Rates at the limit by time since the (re)start", intro, inp.ages)
    md.append("\n## Cells\n")
    h.append("<h2>Cells</h2>")
    for c in inp.cells:
        md.append(f"\n### {c.cell_id}\n\n" + _md_table(cell_head, _cell_rows(c)))
        h.append(f"<h3>{html.escape(c.cell_id)}</h3>" + _html_table(cell_head, _cell_rows(c)))
        local, sim = inp.records.get(c.cell_id, ([], []))
        if local or sim:
            png = _figure(c.cell_id, local, sim)
            fig_name = c.cell_id.replace("/", "_") + ".png"  # a cell of one of several matrices: matrix/cell
            (fig_dir / fig_name).write_bytes(png)
            md.append(f"\n![{c.cell_id}]({fig_dir.name}/{fig_name})\n")
            h.append(f"<img alt='{html.escape(c.cell_id)}' src='data:image/png;base64,"
                     f"{base64.b64encode(png).decode()}'>")
    h.append("</body></html>")
    md_path, html_path = out_dir / f"{stem}.md", out_dir / f"{stem}.html"
    md_path.write_text("".join(md))
    html_path.write_text("".join(h))
    return md_path, html_path
