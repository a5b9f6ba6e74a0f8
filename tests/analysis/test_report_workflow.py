"""The publishable report: its HTML structure (figures present, contents links resolve, legend for ±),
bands over repetitions by hand, tables only where they apply, and notebook helpers that fail clearly."""

from __future__ import annotations

import base64
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from harness.analysis.tables import build_tables, write_tables  # noqa: E402
from harness.report import notebook as nb  # noqa: E402
from harness.report.applicability import applies  # noqa: E402
from harness.report.bands import band, held_on_grid  # noqa: E402
from harness.report.colours import colour_of  # noqa: E402
from harness.report.render import build_report  # noqa: E402


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.links: list[str] = []
        self.images: list[str] = []
        self.in_nav = False
        self.headings: list[str] = []
        self._h = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "nav":
            self.in_nav = True
        if tag == "a" and self.in_nav and a.get("href"):
            self.links.append(str(a["href"]))
        if tag == "img":
            self.images.append(str(a.get("src", "")))
        self._h = tag in ("h2", "h3")

    def handle_endtag(self, tag: str) -> None:
        if tag == "nav":
            self.in_nav = False
        if tag in ("h2", "h3"):
            self._h = False

    def handle_data(self, data: str) -> None:
        if self._h:
            self.headings.append(data)


@pytest.fixture(scope="module")
def report(small_matrix: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("report")
    paths = build_report(small_matrix, out, tmp_path_factory.mktemp("analysis"))
    return out, paths.html.read_text()


def test_report_html_structure(report):
    out, page = report
    parsed = _Page()
    parsed.feed(page)
    # a table of contents whose every link lands on a section of the page
    assert parsed.links and all(link.startswith("#") for link in parsed.links)
    assert all(link[1:] in parsed.ids for link in parsed.links), set(parsed.links) - {f"#{i}" for i in parsed.ids}
    assert "#synthetic-q1--cosine" in parsed.links and "#synthetic-q1--convergence" in parsed.links
    # figures are embedded PNGs: per group time series over all repetitions, and one bar chart per metric
    pngs = [s for s in parsed.images if s.startswith("data:image/png;base64,")]
    assert len(pngs) == len(parsed.images) >= 15
    assert all(base64.b64decode(s.split(",", 1)[1])[:4] == b"\x89PNG" for s in pngs)
    assert page.count("<h3>Per metric: mean and 95 % CI</h3>") == 3  # three (matrix, query, pattern) groups
    assert "Task managers over time" in parsed.headings and "Input rate vs throughput" in parsed.headings
    assert "Convergence stages (first repetition)" in parsed.headings
    # what ± means, in the report and in analyze's index.md; never floating-point noise after it
    assert "half-width of the 95 % confidence interval" in page
    assert not re.search(r"±\s*[0-9.]+e-", page)
    md = (out / "report.md").read_text()
    assert "## Contents" in md and "- [synthetic: q1 / cosine](#synthetic-q1--cosine)" in md
    assert "## synthetic: q1 / cosine" in md  # the anchor above is this heading's GitHub slug
    bars = out / "figures" / "synthetic-q1-cosine-per-metric.png"
    assert bars.read_bytes()[:4] == b"\x89PNG" and "![Per metric: mean and 95 % CI (tm_avg, tm_max," in md


def test_papers_tables_only_where_they_apply(report):
    _out, page = report
    # the synthetic runs have no vertical scaling: no MEAD table, and the page says why
    assert "MEAD metrics" not in page and "No MEAD table: no vertical scaling" in page
    cells = pd.DataFrame({"autoscaler": ["ds2", "mead"], "spec_ideal_avg": [math.nan, math.nan],
                          "saso_control_steps": [0, 0], "mead_cpu_share": [1.0, 0.5]})
    assert not applies("spec", cells) and not applies("saso", cells) and applies("mead", cells)
    assert applies("spec", cells.assign(spec_ideal_avg=[3.0, math.nan])) and applies("thesis", cells)


def test_index_md_explains_plus_minus(small_matrix, tmp_path):
    cells = pd.DataFrame({"matrix": ["m"], "query": ["q1"], "pattern": ["cosine"], "autoscaler": ["ds2"],
                          "params": ["{}"], "cell_id": ["a"], "runs": [3], "tm_avg": [1.0], "tm_avg_ci": [1.41e-15]})
    write_tables(build_tables(cells), tmp_path)
    index = (tmp_path / "index.md").read_text()
    assert "`±` is the half-width of the 95 % confidence interval" in index
    assert "| ds2 | 3 | 1 |" in index and "e-15" not in index  # 1 ± 1.41e-15 shows as 1


def test_band_median_and_percentiles_by_hand():
    t = np.array([0.0, 1.0, 2.0, 3.0])
    runs = [pd.Series([1.0, 1.0, 1.0, 1.0], index=t), pd.Series([2.0, 2.0, 2.0, 2.0], index=t),
            pd.Series([9.0, 9.0, 9.0, 9.0], index=t)]
    b = band(runs)
    assert b.runs == 3 and list(b.t) == [0.0, 1.0, 2.0, 3.0]
    assert list(b.median) == [2.0] * 4  # median of 1, 2, 9
    # numpy's linear percentile of (1, 2, 9): 5 % -> 1 + 0.1 * (2 - 1) = 1.1; 95 % -> 2 + 0.9 * (9 - 2) = 8.3
    assert b.low == pytest.approx([1.1] * 4) and b.high == pytest.approx([8.3] * 4)
    # a value holds until the next sample; a long gap stays a gap; nothing after a run's last sample
    # (sampling period 1: a value is held for at most 3 periods)
    s = pd.Series([5.0, 5.0, 7.0, 7.0, 8.0], index=[0.0, 1.0, 2.0, 3.0, 10.0])
    held = held_on_grid(s, np.array([0.5, 2.5, 8.0, 10.0, 11.0]))
    assert held[0] == 5.0 and held[1] == 7.0 and math.isnan(held[2]) and held[3] == 8.0 and math.isnan(held[4])


def test_notebook_helpers_fail_clearly_and_colour_by_autoscaler():
    with pytest.raises(nb.NotebookInputError, match="no convergence stages"):
        nb.convergence_summary(pd.DataFrame())
    cells = pd.DataFrame({"matrix": ["m", "m"], "query": ["q1", "q1"], "pattern": ["cosine", "cosine"],
                          "autoscaler": ["ds2", "dhalion"], "params": ["{}", "{}"], "cell_id": ["a", "b"],
                          "tm_avg": [4.0, 6.0], "tm_avg_ci": [0.5, 0.2], "runs": [3, 3]})
    fig, ax = plt.subplots()
    with pytest.raises(nb.NotebookInputError, match="no column.*lat_p95"):
        nb.bar_ci(ax, cells, "lat_p95")
    nb.bar_ci(ax, cells, "tm_avg")
    colours = {c.get_label(): matplotlib.colors.to_hex(c.patches[0].get_facecolor()) for c in ax.containers
               if hasattr(c, "patches")}
    assert colours == {"dhalion": colour_of("dhalion"), "ds2": colour_of("ds2")}
    assert ax.get_ylabel() == "task managers"
    plt.close(fig)


def test_convergence_figure_colours_by_autoscaler_and_keeps_stage_names_under_the_title():
    from harness.analysis.metrics import Stage
    from harness.report.figures import Trace, convergence

    def trace(autoscaler: str, tms: list[float]) -> Trace:
        ts = pd.DataFrame({"ts": [0.0, 60.0, 120.0], "metric": "taskmanagers", "operator": "", "subtask": -1,
                           "value": tms})
        return Trace(f"{autoscaler} (label)", ts, pd.DataFrame(), (Stage("stage0", 0.0, 60.0),
                                                                  Stage("stage1", 60.0, 120.0)), autoscaler)

    # listed in the other order than the registry: colours follow the autoscaler, not the position
    fig = convergence([trace("hpa-cpu", [1, 4, 4]), trace("ds2", [1, 3, 3])], "Convergence stages")
    ax = fig.axes[0]
    steps = {line.get_label(): matplotlib.colors.to_hex(line.get_color()) for line in ax.get_lines()
             if not line.get_label().startswith("_")}
    assert steps == {"hpa-cpu (label)": colour_of("hpa-cpu"), "ds2 (label)": colour_of("ds2")}
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    title = ax.title.get_window_extent(renderer)
    names = [t for t in ax.texts if t.get_text().startswith("stage")]
    assert len(names) == 2
    assert all(t.get_window_extent(renderer).y1 <= min(title.y0, ax.get_window_extent(renderer).y1) for t in names)
    plt.close(fig)
