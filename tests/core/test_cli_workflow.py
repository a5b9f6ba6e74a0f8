"""`bench compare`, `bench runs` and `--json` / `--quiet` on run, matrix, analyze, compare and runs.

One small sim matrix (2 autoscalers x 3 repetitions, a few simulated minutes each) is the data.
`--json`: stdout parses with json.loads and holds nothing else (checked on the separated stdout, and
once in a subprocess, where file descriptor 1 is the real one)."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
from dataclasses import fields, is_dataclass
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.record import find_run_dirs, read_run_record
from harness.summary import RunSummary, summarise

runner = CliRunner()

MATRIX = """
name: pair
base:
  backend: sim
  query: q1
  pattern: {name: cosine, time_scale: 20, scale: 0.1}
  autoscaler: ds2
  initial_parallelism: 2
  loop: {period_s: 5, metrics_window_s: 5, cooldown_s: 15}
  sim: {profile: first_guess}  # the workflow commands, not q1's measured costs
axes:
  autoscaler: [ds2, dhalion]
repetitions: 3
"""


def as_json(stdout: str) -> dict:
    return json.loads(stdout)  # raises unless stdout is exactly one JSON document


@pytest.fixture(scope="module")
def matrix_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("wf")
    (root / "m.yaml").write_text(MATRIX)
    res = runner.invoke(app, ["matrix", str(root / "m.yaml"), "--results", str(root / "r"), "--workers", "1",
                              "--json"])
    assert res.exit_code == 0, res.output
    return root / "r", as_json(res.stdout)


def test_matrix_json_reports_the_runs(matrix_results):
    results, doc = matrix_results
    assert doc["matrix"] == "pair" and doc["ran"] == 6 and doc["failed"] == 0 and doc["already_complete"] == 0
    assert sorted(o["run_id"] for o in doc["outcomes"]) == sorted(
        f"{a}-r{i}" for a in ("ds2", "dhalion") for i in range(3))
    assert all(o["status"] == "completed" for o in doc["outcomes"])
    assert len(find_run_dirs(results)) == 6


def test_matrix_dry_run_json_and_quiet(matrix_results, tmp_path):
    results, _ = matrix_results
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX)
    res = runner.invoke(app, ["matrix", str(m), "--results", str(results), "--dry-run", "--json"])
    assert res.exit_code == 0, res.output
    doc = as_json(res.stdout)
    assert doc["dry_run"] and doc["counts"]["done"] == 6 and not any(r["would_run"] for r in doc["runs"])
    res = runner.invoke(app, ["matrix", str(m), "--results", str(results), "--quiet"])
    assert res.exit_code == 0 and res.stdout == "" and res.stderr == ""


def test_run_json_has_the_summary_tables_fields_and_quiet_prints_nothing(tmp_path):
    args = ["run", "--backend", "sim", "--scaler", "ds2", "--query", "q1", "--duration", "600",
            "--results", str(tmp_path / "r")]
    res = runner.invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = as_json(res.stdout)
    assert "avg task managers" not in res.stdout  # the table is not on stdout
    (run_dir,) = find_run_dirs(tmp_path / "r")
    assert doc["run_dir"] == str(run_dir) and doc["status"] == "completed" and doc["autoscaler"] == "ds2"
    expected = summarise(read_run_record(run_dir))
    assert set(doc["summary"]) == {f.name for f in fields(RunSummary)}
    def same(got: object, want: object) -> None:
        if is_dataclass(want) and not isinstance(want, type):  # e.g. a latency's avg/p50/p95/max
            assert isinstance(got, dict) and set(got) == {g.name for g in fields(want)}
            for g in fields(want):
                same(got[g.name], getattr(want, g.name))
        elif isinstance(want, float) and math.isnan(want):
            assert got is None  # NaN is not JSON: unknown is null
        else:
            assert got == (pytest.approx(want) if isinstance(want, float) else want)

    for f in fields(RunSummary):
        same(doc["summary"][f.name], getattr(expected, f.name))
    assert doc["summary"]["avg_tm"] > 1 and doc["summary"]["throughput"] > 0
    res = runner.invoke(app, [*args, "--quiet"])
    assert res.exit_code == 0 and res.stdout == ""


def test_analyze_json(matrix_results, tmp_path):
    results, _ = matrix_results
    res = runner.invoke(app, ["analyze", str(results), "--engine", "pandas", "--out", str(tmp_path / "a"), "--json"])
    assert res.exit_code == 0, res.output
    doc = as_json(res.stdout)
    assert doc["runs"] == 6 and len(doc["cells"]) == 2
    cells = pd.read_csv(tmp_path / "a" / "cells.csv")
    by_cell = {c["cell_id"]: c for c in doc["cells"]}
    for r in cells.itertuples():
        assert by_cell[r.cell_id]["runs"] == 3
        assert by_cell[r.cell_id]["tm_avg"] == pytest.approx(r.tm_avg)
    assert all(Path(p).exists() for p in doc["tables"])


def test_compare_cells_json_matches_the_runs(matrix_results):
    results, _ = matrix_results
    res = runner.invoke(app, ["compare", "pair/ds2", "autoscaler=dhalion", "--results", str(results), "--json"])
    assert res.exit_code == 0, res.output
    doc = as_json(res.stdout)
    assert [s["runs"] for s in doc["sides"]] == [3, 3]
    (pair,) = doc["comparisons"]
    assert pair["baseline"] == "pair/ds2" and pair["other"] == "autoscaler=dhalion"
    rows = {m["metric"]: m for m in pair["metrics"]}
    assert "tm_avg" in rows and "scale_count" in rows
    assert "repetition" not in rows and "seed" not in rows  # bookkeeping is not compared
    # the numbers are the runs' own: recompute the means from the records' summaries
    for side, name in ((rows["tm_avg"]["baseline"], "ds2"), (rows["tm_avg"]["other"], "dhalion")):
        values = [summarise(read_run_record(d)).avg_tm for d in find_run_dirs(results / "pair") if
                  d.name.startswith(f"{name}-")]
        assert side["n"] == 3 and side["mean"] == pytest.approx(sum(values) / 3, rel=1e-6)
    tm = rows["tm_avg"]
    assert tm["diff"] == pytest.approx(tm["other"]["mean"] - tm["baseline"]["mean"])
    assert tm["verdict"] in {"higher", "lower", "no significant difference", "unclear: the tests disagree",
                             "identical"}


def test_compare_table_plot_and_metric(matrix_results, tmp_path):
    results, _ = matrix_results
    png = tmp_path / "cmp.png"
    res = runner.invoke(app, ["compare", "pair/ds2", "pair/dhalion", "--results", str(results), "--metric",
                              "tm_avg", "--metric", "scale_count", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "B vs A" in res.stdout and "tm_avg" in res.stdout and "Welch" in res.stdout
    assert "verdict" in res.stdout and "95 % confidence interval" in res.stdout
    assert "lat_max" not in res.stdout  # only the metrics asked for
    assert png.stat().st_size > 10_000
    res = runner.invoke(app, ["compare", "pair/ds2", "pair/dhalion", "--results", str(results), "--quiet"])
    assert res.exit_code == 0 and res.stdout == ""


def test_compare_three_sides_and_a_folder(matrix_results):
    results, _ = matrix_results
    res = runner.invoke(app, ["compare", "autoscaler=ds2", str(results / "pair"), "pair/dhalion",
                              "--results", str(results), "--json"])
    assert res.exit_code == 0, res.output
    doc = as_json(res.stdout)
    assert [s["runs"] for s in doc["sides"]] == [3, 6, 3]
    assert [c["other"] for c in doc["comparisons"]] == [str(results / "pair"), "pair/dhalion"]


@pytest.mark.parametrize(("args", "says"), [
    (["nosuch", "pair/ds2"], "matrices: pair"),
    (["pair/ds2"], "at least two sides"),
    (["colour=red", "pair/ds2"], "unknown field 'colour'"),
    (["autoscaler=hpa-cpu", "pair/ds2"], "no run"),
    (["pair/ds2", "pair/dhalion", "--metric", "nope"], "not a summary metric"),
])
def test_compare_bad_sides_exit_2_with_a_reason(matrix_results, args, says):
    results, _ = matrix_results
    res = runner.invoke(app, ["compare", *args, "--results", str(results), "--json"])
    assert res.exit_code == 2 and says in res.stderr and res.stdout == ""


def test_runs_lists_every_status_and_filters(matrix_results, tmp_path):
    results = tmp_path / "r"
    shutil.copytree(matrix_results[0], results)
    shutil.rmtree(results / "analysis", ignore_errors=True)
    (results / "pair" / "ds2-r1" / "status").write_text("failed: boom\n")
    (results / "pair" / "ds2-r2" / "status").write_text("interrupted: SIGINT\n")
    res = runner.invoke(app, ["run", "--backend", "sim", "--scaler", "ds2", "--query", "q1", "--pattern", "cosine",
                              "--time-scale", "20", "--scale", "0.1", "--fault", "kill-taskmanager@60",
                              "--results", str(results), "--quiet"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["runs", str(results), "--json"])
    assert res.exit_code == 0, res.output
    runs = as_json(res.stdout)["runs"]
    status = {r["run_id"]: r["status"] for r in runs}
    assert len(runs) == 7
    assert status["pair/ds2-r0"] == "completed" and status["pair/ds2-r1"] == "failed"
    assert status["pair/ds2-r2"] == "interrupted"
    (flagged,) = [r for r in runs if r["status"] == "flagged"]
    assert flagged["faults"] >= 1 and flagged["injected_faults"] == 1 and flagged["backend"] == "sim"
    failed = next(r for r in runs if r["run_id"] == "pair/ds2-r1")
    assert failed["why"] == "boom" and failed["seed"] == 2 and failed["duration_s"] > 0 and failed["config_hash"]
    # filters: one condition, two in one filter, and status=flagged
    res = runner.invoke(app, ["runs", str(results), "autoscaler=dhalion,seed=2", "--json"])
    assert [r["run_id"] for r in as_json(res.stdout)["runs"]] == ["pair/dhalion-r1"]
    res = runner.invoke(app, ["runs", str(results), "status=flagged", "--json"])
    assert [r["status"] for r in as_json(res.stdout)["runs"]] == ["flagged"]
    # the table: one line per run, plus a header
    res = runner.invoke(app, ["runs", str(results)])
    assert res.exit_code == 0
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 8 and lines[0].split()[:3] == ["experiment", "cell", "rep"]
    assert sum("interrupted (SIGINT)" in line for line in lines) == 1
    assert "1 completed" not in res.stderr and "1 failed" in res.stderr
    res = runner.invoke(app, ["runs", str(results), "colour=red"])
    assert res.exit_code == 2 and "unknown field" in res.stderr


def test_compare_leaves_interrupted_runs_out(matrix_results, tmp_path):
    results = tmp_path / "r"
    shutil.copytree(matrix_results[0], results)
    shutil.rmtree(results / "analysis", ignore_errors=True)
    (results / "pair" / "ds2-r2" / "status").write_text("interrupted: SIGINT\n")
    res = runner.invoke(app, ["compare", "pair/ds2", "pair/dhalion", "--results", str(results), "--json"])
    doc = as_json(res.stdout)
    assert doc["sides"][0]["runs"] == 2 and doc["sides"][0]["interrupted_left_out"] == 1


def test_json_stdout_holds_only_the_document_in_a_real_process(matrix_results):
    """Through a real file descriptor 1: nothing but the document reaches stdout."""
    results, _ = matrix_results
    bench = Path(sys.executable).with_name("bench")
    proc = subprocess.run([str(bench), "runs", str(results), "--json"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)["runs"]) == 6


def test_compare_reads_only_the_sides_matrix_folder_with_the_same_numbers(matrix_results, tmp_path, monkeypatch):
    """MATRIX/CELL sides read the run records of RESULTS/MATRIX only (not every run.yaml of the folder),
    and give the numbers the full search gives (filters: every record is read)."""
    from harness.analysis import compare as compare_mod
    from harness.analysis import selection

    results = tmp_path / "r"
    shutil.copytree(matrix_results[0], results)
    shutil.rmtree(results / "analysis", ignore_errors=True)
    shutil.copytree(results / "pair", results / "elsewhere")  # another folder of records, never needed here
    read: list[Path] = []
    real = selection.read_run_yaml
    monkeypatch.setattr(selection, "read_run_yaml", lambda d: read.append(Path(d)) or real(d))
    narrow = compare_mod.compare(results, ["pair/ds2", "pair/dhalion"])
    assert read and all(results / "pair" in d.parents for d in read)
    read.clear()
    full = compare_mod.compare(results, ["matrix=pair,cell=ds2", "matrix=pair,cell=dhalion"])
    assert any(results / "elsewhere" in d.parents for d in read)
    assert [s.n_runs for s in narrow.sides] == [s.n_runs for s in full.sides] == [3, 3]
    assert [m.as_dict() for m in narrow.pairs[0].metrics] == [m.as_dict() for m in full.pairs[0].metrics]


def test_analyze_and_runs_quiet_print_nothing_and_json_alone_with_quiet(matrix_results, tmp_path):
    """`--quiet`: nothing but errors on either stream; `--quiet --json`: the document alone."""
    results, _ = matrix_results
    res = runner.invoke(app, ["analyze", str(results), "--engine", "pandas", "--out", str(tmp_path / "a"), "--quiet"])
    assert res.exit_code == 0 and res.stdout == "" and res.stderr == "", res.output
    assert (tmp_path / "a" / "cells.csv").exists()  # quiet, not idle
    res = runner.invoke(app, ["runs", str(results), "--quiet"])
    assert res.exit_code == 0 and res.stdout == "" and res.stderr == ""
    res = runner.invoke(app, ["runs", str(results), "--quiet", "--json"])
    assert res.exit_code == 0 and res.stderr == "" and len(as_json(res.stdout)["runs"]) == 6


def test_compare_from_a_fresh_analysis_matches_the_pandas_path_without_importing_pandas(matrix_results, tmp_path):
    """After `bench analyze`, compare reads runs.parquet (pyarrow, no pandas: a quick start) and gives the
    numbers the pandas engine gives on the spot; an analysis made stale by a new run is not used."""
    results = tmp_path / "r"
    shutil.copytree(matrix_results[0], results)
    shutil.rmtree(results / "analysis", ignore_errors=True)
    args = ["compare", "pair/ds2", "pair/dhalion", "--results", str(results), "--json"]
    cold = as_json(runner.invoke(app, args).stdout)
    assert cold["source"].startswith("computed now")
    assert runner.invoke(app, ["analyze", str(results), "--engine", "pandas", "--quiet"]).exit_code == 0
    script = ("import json, sys\nfrom harness.entry import main\nsys.argv = ['bench', *json.loads(sys.argv[1])]\n"
              "try:\n    main()\nexcept SystemExit:\n    pass\n"
              "sys.stderr.write('pandas imported' if 'pandas' in sys.modules else 'no pandas')\n")
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(args)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    warm = as_json(proc.stdout)
    assert warm["source"] == str(results / "analysis" / "runs.parquet")
    assert proc.stderr.endswith("no pandas")
    assert warm["sides"] == cold["sides"] and warm["left_out"] == cold["left_out"]
    assert warm["comparisons"] == cold["comparisons"]
    assert any(m["baseline"]["n"] == 3 and m["baseline"]["mean"] is not None
               for m in warm["comparisons"][0]["metrics"])
    shutil.copytree(results / "pair" / "ds2-r0", results / "pair" / "ds2-r9")  # the analysis is now stale
    stale = as_json(runner.invoke(app, args).stdout)
    assert stale["source"].startswith("computed now") and stale["sides"][0]["runs"] == 4


@pytest.mark.parametrize("terminal", [False, True])
def test_compare_table_never_folds_a_number_at_80_columns(matrix_results, terminal):
    """A pipe gets the table at its full width; an 80-column terminal one line per metric. Either way
    every cell (`12.3 ± 0.4 (3)`, a p-value, the verdict) is printed whole, never cut inside a number."""
    import io

    from rich.console import Console

    from harness.analysis.compare import compare
    from harness.report.compare_commands import _comparison_row, _print_comparison

    results, _ = matrix_results
    result = compare(results, ["pair/ds2", "pair/dhalion"])
    out = io.StringIO()
    _print_comparison(result, Console(file=out, width=80, force_terminal=terminal, color_system=None,
                                      soft_wrap=True))
    text = out.getvalue()
    lines = {line.split()[1] if line.startswith("│") else line.strip().split(":")[0]
             for line in text.splitlines() if line.startswith(("│", "  "))}
    assert {m.metric for m in result.pairs[0].metrics} <= lines
    for m in result.pairs[0].metrics:
        for cell in _comparison_row(m):
            assert cell in text, f"{cell!r} is not printed whole"
    assert ("┃ metric" in text) != terminal  # the table when piped, lines in the narrow terminal
