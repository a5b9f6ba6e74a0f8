"""The CLI through Typer's test runner: exit codes, messages, nothing written on bad input."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.cli import app

runner = CliRunner()


def test_list_shows_queries_and_patterns():
    res = runner.invoke(app, ["list"])
    assert res.exit_code == 0
    assert "q11" in res.output and "convergence" in res.output


def test_validate_ok_and_bad(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("name: g\nbackend: sim\nquery: q1\npattern: cosine\nautoscaler: static\n")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: b\nbackend: sim\nquery: q1\npattern: {name: cosine, scale: -2}\nautoscaler: static\n")
    res = runner.invoke(app, ["validate", str(good)])
    assert res.exit_code == 0 and "ok" in res.output
    res = runner.invoke(app, ["validate", str(good), str(bad)])
    assert res.exit_code == 2
    assert f"{bad}: pattern.scale" in res.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--scaler", "nope"], "unknown autoscaler 'nope'"),
        (["--query", "q42"], "unknown query 'q42'"),
        (["--pattern", "sawtooth"], "pattern.name"),
        (["--scale", "-1"], "pattern.scale"),
        (["--set", "loop.period_s=-3"], "loop.period_s"),
        (["--set", "autoscaler.params.bogus=1"], "params.bogus: unknown field"),
    ],
)
def test_run_rejects_bad_input_without_writing(tmp_path, args, needle):
    results = tmp_path / "results"
    res = runner.invoke(app, ["run", "--backend", "sim", "--scaler", "static", *args, "--results", str(results)])
    assert res.exit_code == 2, res.output
    assert needle in res.output
    assert not results.exists()


def test_pattern_prints_and_plots(tmp_path):
    png = tmp_path / "p.png"
    res = runner.invoke(app, ["pattern", "convergence", "--scale", "0.01", "--plot", str(png)])
    assert res.exit_code == 0
    assert "20,000" in res.output  # 2 M x 0.01 in stage 1
    assert png.stat().st_size > 1000


def test_pattern_bad_param():
    res = runner.invoke(app, ["pattern", "cosine", "--param", "noise=-5"])
    assert res.exit_code == 2 and "params.noise" in res.output


def test_matrix_refuses_bad_file_and_dry_run_lists(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text("name: m\nbase: {backend: sim, query: q1, pattern: cosine, autoscaler: static}\n"
                 "axes: {query: [q1, q11]}\nrepetitions: 2\n")
    res = runner.invoke(app, ["matrix", str(m), "--dry-run", "--results", str(tmp_path / "r")])
    assert res.exit_code == 0 and "4 run(s)" in res.output
    assert not (tmp_path / "r").exists()
    m.write_text(m.read_text().replace("[q1, q11]", "[q1, q0]"))
    res = runner.invoke(app, ["matrix", str(m), "--results", str(tmp_path / "r")])
    assert res.exit_code == 2 and "q0" in res.output
    assert not (tmp_path / "r").exists()


def test_thesis_matrices_validate():
    files = sorted(str(p) for p in Path("experiments").glob("*.yaml"))
    assert files
    res = runner.invoke(app, ["validate", *files])
    assert res.exit_code == 0, res.output
