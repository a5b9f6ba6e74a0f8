"""Comparison tables, the analyze/report commands and the report page (pandas engine, fast)."""

from __future__ import annotations

import base64
import math
import re
from pathlib import Path

import pandas as pd
import typer
from typer.testing import CliRunner

from harness.analysis.tables import build_tables, fmt, row_labels, to_latex
from harness.report.commands import register


def _cells(**extra: object) -> pd.DataFrame:
    base = {"matrix": "m", "query": "q1", "pattern": "convergence", "autoscaler": ["ds2", "ds2", "dhalion"],
            "params": ['{"op": 1.0, "w": 2}', '{"op": 1.2, "w": 2}', "{}"], "cell_id": ["a", "b", "c"],
            "runs": [3, 3, 1], "tm_avg": [10.0, 12.5, 8.0], "tm_avg_ci": [1.0, math.nan, math.nan],
            "tm_avg_n": [3, 3, 1]}
    base.update(extra)
    return pd.DataFrame(base)


def test_labels_name_only_the_parameters_that_vary():
    assert row_labels(_cells()) == ["ds2 (op=1.0)", "ds2 (op=1.2)", "dhalion"]


def test_format_mean_and_interval():
    assert fmt(12.5, 1.25) == "12.5 ± 1.2"  # the interval to two significant figures, the mean to match
    assert fmt(1_234_567.0) == "1,234,567"
    assert fmt(math.nan) == "-" and fmt(3.0, math.nan) == "3"


def test_thesis_table_rows_and_columns():
    tables = {t.kind: t for t in build_tables(_cells())}
    thesis = tables["thesis"]
    assert list(thesis.shown["configuration"]) == ["dhalion", "ds2 (op=1.0)", "ds2 (op=1.2)"]
    assert list(thesis.shown["avg(TM)"]) == ["8", "10 ± 1", "12.5"]
    assert list(thesis.raw["n"]) == [1, 3, 3]
    tex = to_latex(thesis.shown, "t_1 & 50%", "tab:x")
    assert r"t\_1 \& 50\%" in tex and r"$\pm$" in tex and r"\toprule" in tex


def test_convergence_table_prints_40_plus_when_not_converged():
    conv = pd.DataFrame({
        "matrix": "m", "cell_id": ["a", "a", "b", "b", "c"], "stage": "stage1",
        "converged": [False, False, True, False, True], "time_min_pattern": [math.nan, math.nan, 12.0, math.nan, 5.0],
        "actions": [9, 11, 3, 8, 2], "length_min_pattern": 40.0,
    })
    table = {t.kind: t for t in build_tables(_cells(), conv)}["convergence"]
    times = dict(zip(table.shown["configuration"], table.shown["stage1 time (min)"], strict=True))
    assert times["ds2 (op=1.0)"] == "40+"
    assert times["ds2 (op=1.2)"].startswith("12 (1/2")
    assert times["dhalion"] == "5"
    actions = dict(zip(table.shown["configuration"], table.shown["stage1 actions"], strict=True))
    assert actions["ds2 (op=1.0)"] == "10"


def test_analyze_and_report_commands(small_matrix: Path, tmp_path: Path):
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    out = tmp_path / "analysis"
    res = runner.invoke(app, ["analyze", str(small_matrix), "--out", str(out), "--engine", "pandas"])
    assert res.exit_code == 0, res.output
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 13
    cells = pd.read_csv(out / "cells.csv")
    assert set(cells["runs"]) == {1, 2}
    md = (out / "tables" / "synthetic" / "q1-cosine-thesis.md").read_text()
    assert "avg(TM)" in md and "hpa-cpu" in md
    assert (out / "tables" / "synthetic" / "q1-convergence-convergence.tex").exists()
    report_dir = tmp_path / "report"
    res = runner.invoke(app, ["report", str(small_matrix), "--out", str(report_dir), "--analysis", str(out)])
    assert res.exit_code == 0, res.output
    page = (report_dir / "report.html").read_text()
    images = re.findall(r"src='data:image/png;base64,([^']+)'", page)
    assert len(images) >= 9  # 4 figures per group + convergence stages
    assert base64.b64decode(images[0]).startswith(b"\x89PNG")
    assert "Convergence stages" in page and "<table" in page
    assert "![Task managers over time](figures/" in (report_dir / "report.md").read_text()


def test_bad_engine_and_missing_dir_exit_2(tmp_path: Path):
    app = typer.Typer()
    register(app)
    runner = CliRunner()
    assert runner.invoke(app, ["analyze", str(tmp_path), "--engine", "dask"]).exit_code == 2
    assert runner.invoke(app, ["analyze", str(tmp_path / "nope")]).exit_code == 2
    assert runner.invoke(app, ["analyze", str(tmp_path), "--engine", "pandas"]).exit_code == 2  # nothing to analyse


def test_latency_table_shows_both_latencies_labelled_in_ms_below_a_second_and_the_lost_load():
    """Issue 8.3/8.4: tables show `kafka` (time in Kafka) and `e2e` (sink - event time) side by side,
    in ms below 1 s, with the load shortfall, its flag and the skipped decisions."""
    cells = _cells(latency_kafka_avg=[0.004, 2.5, math.nan], latency_kafka_avg_ci=[0.001, math.nan, math.nan],
                   latency_kafka_p95=[0.0078, 35.2, math.nan], latency_e2e_avg=[0.02, 1.5, math.nan],
                   latency_e2e_p95=[0.35, 41.5, math.nan], latency_e2e_max=[0.9, 60.0, math.nan],
                   load_shortfall=[0.0, 0.015, math.nan], shortfall_flagged=[0.0, 1.0, math.nan],
                   decisions_skipped=[0.0, 2.0, math.nan])
    table = {t.kind: t for t in build_tables(cells)}["latency"]
    rows = table.shown.set_index("configuration")
    assert {"kafka avg", "kafka p95", "e2e avg", "e2e p95", "e2e max", "load shortfall", "shortfall > 1 %",
            "skipped decisions"} <= set(rows.columns)
    ms, s = rows.loc["ds2 (op=1.0)"], rows.loc["ds2 (op=1.2)"]
    assert (ms["kafka avg"], ms["kafka p95"], ms["e2e p95"], ms["e2e max"]) == ("4 ms ± 1 ms", "7.8 ms", "350 ms",
                                                                                 "900 ms")
    assert (s["kafka p95"], s["e2e p95"], s["e2e max"]) == ("35.2 s", "41.5 s", "60 s")
    assert (s["load shortfall"], ms["load shortfall"]) == ("1.5 %", "0 %")
    assert rows.loc["dhalion", "e2e p95"] == "-"  # unmeasured is not zero


def test_report_lists_the_runs_flagged_for_load_shortfall():
    from harness.report.render import SHORTFALL_TITLE, _header, shortfall_runs

    runs = pd.DataFrame({"run_id": ["m/a-r0", "m/a-r1", "m/b-r0"], "flagged": [False, False, True],
                         "load_shortfall": [0.015, 0.004, math.nan], "load_skipped": [150.0, 40.0, math.nan],
                         "load_expired": [0.0, 0.0, math.nan], "shortfall_flagged": [True, False, math.nan]})
    short = shortfall_runs(runs)
    assert list(short["run_id"]) == ["m/a-r0"] and list(short["load_shortfall"]) == ["1.5 %"]
    header = _header(Path("results"), runs, 0)
    assert "1 flagged for load shortfall (more than 1%" in header and "e2e = sink time - event time" in header
    assert SHORTFALL_TITLE == "Runs flagged for load shortfall (> 1%)"
