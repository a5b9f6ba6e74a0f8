"""`--engine auto`: pandas below the measured threshold, Spark from it or for a named master; long cell
names wrap in the console table instead of being cut."""

from __future__ import annotations

from pathlib import Path

import typer
from typer.testing import CliRunner

from harness.analysis.engine import LOG_NAME, SPARK_MIN_RUNS, choose_engine
from harness.analysis.pipeline import analyze
from harness.report.commands import register
from tests.analysis.conftest import hand_made_run


def test_auto_picks_by_run_count_and_master():
    assert choose_engine("auto", SPARK_MIN_RUNS - 1) == "pandas"
    assert choose_engine("auto", SPARK_MIN_RUNS) == "spark"
    assert choose_engine("auto", 1, master="spark://host:7077") == "spark"
    assert choose_engine("pandas", 10 * SPARK_MIN_RUNS) == "pandas"  # an explicit engine is kept
    assert choose_engine("spark", 1) == "spark"


def test_auto_analyses_a_small_directory_with_pandas_and_says_so(small_matrix: Path, tmp_path: Path):
    outputs = analyze(small_matrix, tmp_path / "a")
    assert outputs.engine == "pandas" and len(outputs.result.summary) == 13
    log = (tmp_path / "a" / LOG_NAME).read_text()
    assert "engine pandas (asked: auto" in log and f"Spark from {SPARK_MIN_RUNS} runs" in log


def test_help_names_the_threshold():
    from harness.cli import app

    help_text = " ".join(CliRunner().invoke(app, ["analyze", "--help"], terminal_width=200).output.split())
    assert f"pandas below {SPARK_MIN_RUNS:,} run records" in help_text and "docs/analysis.md" in help_text


def test_long_cell_names_wrap_at_80_columns(tmp_path: Path):
    name = "q11_cosine_ds2-overprovisioning-1.2-target-utilisation-0.7-with-a-long-name"
    hand_made_run(tmp_path / "matrix-with-a-long-name" / f"{name}-r0")
    app = typer.Typer()
    register(app)
    res = CliRunner(env={"COLUMNS": "80"}).invoke(app, ["analyze", str(tmp_path), "--engine", "pandas"])
    assert res.exit_code == 0, res.output
    out = res.output.splitlines()
    rule = next(i for i, ln in enumerate(out) if ln.startswith("─"))
    lines = [ln for ln in out[rule + 1:] if ln and not ln.startswith(" ")]  # the body, before the caption
    assert lines and max(len(ln) for ln in out[:rule + 1 + len(lines)]) <= 80  # the table (not the paths after it)
    first_column = "".join(ln.split()[0] for ln in lines)
    assert f"matrix-with-a-long-name/{name}" in first_column  # folded over lines, every character kept
    assert "…" not in res.output
