"""`bench run` and `bench matrix` end to end on the simulator."""

from pathlib import Path

from typer.testing import CliRunner

from harness.cli import app
from harness.record import find_run_dirs, is_complete, read_run_record

runner = CliRunner()


def test_run_sim_prints_table_writes_record_and_plot(tmp_path):
    png = tmp_path / "run.png"
    res = runner.invoke(app, ["run", "--backend", "sim", "--scaler", "ds2", "--query", "q11", "--pattern", "cosine",
                              "--duration", "1800", "--parallelism", "2", "--results", str(tmp_path / "r"),
                              "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "avg task managers" in res.output
    assert "latency_kafka avg/p50/p95/max" in res.output and "latency_e2e avg/p50/p95/max" in res.output
    assert "load shortfall" in res.output and "0 % (0 skipped + 0 expired of" in res.output
    (run_dir,) = find_run_dirs(tmp_path / "r")
    rec = read_run_record(run_dir)
    assert rec.completed and rec.meta["config"]["autoscaler"]["name"] == "ds2"
    assert rec.meta["config"]["initial_parallelism"] == 2
    assert {"latency_kafka", "latency_e2e_p95", "skipped_total", "expired_total", "taskmanagers", "input_rate",
            "throughput", "parallelism"} <= set(rec.timeseries.metric)
    assert rec.series("taskmanagers").iloc[0] == 6
    assert len(rec.events_of("action")) >= 1
    assert png.stat().st_size > 10_000


MATRIX = """
name: tiny
base: {backend: sim, query: q1, pattern: cosine, autoscaler: ds2, duration_s: 900, initial_parallelism: 3}
axes:
  autoscaler: [ds2, dhalion]
repetitions: 2
"""


def test_matrix_runs_in_parallel_and_resumes(tmp_path):
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX)
    results = tmp_path / "r"
    res = runner.invoke(app, ["matrix", str(m), "--results", str(results), "--workers", "2"])
    assert res.exit_code == 0, res.output
    runs = find_run_dirs(results)
    assert len(runs) == 4 and all(is_complete(r) for r in runs)
    seeds = sorted(read_run_record(r).meta["seed"] for r in runs)
    assert seeds == [1, 1, 2, 2]
    mtimes = {r: (r / "status").stat().st_mtime_ns for r in runs}

    # an interrupted run runs again; the others are left alone
    victim = Path(runs[0])
    (victim / "status").write_text("interrupted: SIGINT\n")
    res = runner.invoke(app, ["matrix", str(m), "--results", str(results), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert "1 ran, 3 already complete" in res.output
    assert is_complete(victim)
    assert all((r / "status").stat().st_mtime_ns == mtimes[r] for r in runs if r != victim)

    # a failed run is data: kept, counted, and rerun only with --retry-failed
    (victim / "status").write_text("failed: boom\n")
    res = runner.invoke(app, ["matrix", str(m), "--results", str(results), "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert "0 ran, 3 already complete" in res.output and "1 failed earlier" in res.output
    assert not is_complete(victim)
    res = runner.invoke(app, ["matrix", str(m), "--results", str(results), "--workers", "1", "--retry-failed"])
    assert res.exit_code == 0, res.output
    assert "1 ran, 3 already complete" in res.output and is_complete(victim)
