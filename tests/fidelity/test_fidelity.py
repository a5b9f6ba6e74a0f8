"""`bench fidelity`: the runs it plans, the numbers it takes from a run, the targets, Kendall tau, the report.

The local side of a real fidelity check needs the stack (docs/fidelity-*.md is its output); here the
pipeline is checked on sim records, with sim records standing in for local ones where a test says so.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from harness.cli import app
from harness.config import Matrix, validate_model
from harness.fidelity.compare import (
    RunMetrics,
    compare_cell,
    kendall,
    rank_agreement,
    repeat_agreement,
    run_metrics,
)
from harness.fidelity.runner import fidelity_runs
from harness.record import read_run_record
from harness.runner import run_experiment

TINY = """
name: fid-tiny
description: two autoscalers on a short q1 cosine; the scale is whatever keeps a test short
base:
  backend: local
  query: q1
  pattern: {name: cosine, scale: 0.1, time_scale: 20, params: {duration_min: 60}}
  autoscaler: ds2
  initial_parallelism: 1
  loop: {period_s: 15, metrics_window_s: 15, cooldown_s: 30}
  scale_manager: {max_taskmanagers: 8}
  local: {taskmanager_cpu_quota: 0.25}
axes:
  autoscaler: [ds2, hpa-varga]
"""


def matrix(tmp_path: Path) -> tuple[Matrix, Path]:
    import yaml

    path = tmp_path / "fid.yaml"
    path.write_text(TINY)
    return validate_model(Matrix, yaml.safe_load(TINY), str(path)), path


def test_runs_keep_the_local_experiment_and_vary_only_the_readings_noise(tmp_path: Path) -> None:
    m, src = matrix(tmp_path)
    runs = fidelity_runs(m, str(src), tmp_path / "results", reps=3, local_reps=1)
    assert [r.backend for r in runs].count("local") == 2 and [r.backend for r in runs].count("sim") == 6
    local = next(r for r in runs if r.backend == "local" and r.cell_id == "ds2")
    sims = [r for r in runs if r.backend == "sim" and r.cell_id == "ds2"]
    assert {s.experiment.sim.noise_seed for s in sims} == {1, 2, 3}
    for s in sims:
        assert s.experiment.seed == local.experiment.seed
        assert s.experiment.pattern == local.experiment.pattern
        assert s.experiment.local == local.experiment.local  # the same task-manager quota: the same capacities
    assert local.run_dir == tmp_path / "results" / "fid-tiny" / "local" / "ds2-r0"


def test_run_metrics_of_a_sim_run(tmp_path: Path) -> None:
    m, src = matrix(tmp_path)
    run = next(r for r in fidelity_runs(m, str(src), tmp_path, 1, 1) if r.backend == "sim")
    rec = read_run_record(run_experiment(run.experiment, run.run_dir))
    v = run_metrics(rec)
    first = rec.series("taskmanagers").index.min()
    assert v["tm_minutes"] == pytest.approx(v["avg_tm"] * (rec.meta["duration_s"] - first) / 60, rel=1e-6)
    assert v["scale_count"] == len(rec.events_of("action")) > 0
    assert v["first_action_s"] == min(a["ts"] for a in rec.events_of("action"))
    assert v["load_shortfall"] == 0.0  # the sim offers every record and nothing expires without retention
    assert v["latency_p95"] >= v["latency_avg"] * 0.5 >= 0


def test_run_metrics_cover_the_experiments_duration_only(tmp_path: Path) -> None:
    """A local run whose loop overran its duration on a busy host (recorded 240 s of a 240-s cell as
    295 s and 350 s) is compared over the same window as the sim's."""
    m, src = matrix(tmp_path)
    recs = [read_run_record(run_experiment(r.experiment, r.run_dir))
            for r in fidelity_runs(m, str(src), tmp_path, 1, 1) if r.backend == "sim"]
    rec = next(x for x in recs if len(x.events_of("action")) >= 2)  # a run that acted twice (either scaler)
    actions = sorted(a["ts"] for a in rec.events_of("action"))
    cut = (actions[0] + actions[1]) / 2  # as if the run had been meant to end between its first two actions
    rec.meta["duration_s"] = cut
    v = run_metrics(rec)
    tms = rec.series("taskmanagers").dropna().sort_index()
    kept = tms[tms.index <= cut]
    widths = np.diff(np.append(kept.index.to_numpy(dtype=float), cut))
    assert v["tm_minutes"] == pytest.approx(float((widths * kept.to_numpy()).sum()) / 60, rel=1e-9)
    assert v["scale_count"] == 1
    lat = rec.series("latency_kafka").dropna()
    assert v["latency_avg"] == pytest.approx(float(lat[lat.index <= cut].mean()))


def _m(**kw: float) -> RunMetrics:
    base = {"tm_minutes": 100.0, "avg_tm": 5.0, "latency_avg": 1.0, "latency_p95": 1.5, "e2e_avg": float("nan"),
            "e2e_p95": float("nan"), "scale_count": 10.0, "first_action_s": 30.0, "load_shortfall": 0.0}
    return RunMetrics({**base, **kw}, "completed")


def test_targets_per_cell() -> None:
    ok = compare_cell("c", "g", "ds2", [_m()], [_m(tm_minutes=110.0), _m(tm_minutes=112.0), _m(tm_minutes=108.0)])
    assert ok.rel["tm_minutes"] == pytest.approx(0.10)
    assert ok.checks["tm_minutes"] is True and ok.checks["scale_count"] is True
    assert ok.checks["latency_p95"] is True  # both under 2 s, within 1 s
    assert ok.checks["e2e_p95"] is None  # not measured: no verdict
    assert ok.sim["tm_minutes"].n == 3 and ok.sim["tm_minutes"].half_width > 0
    bad = compare_cell("c", "g", "ds2", [_m()], [_m(tm_minutes=130.0, scale_count=13.0, latency_p95=3.5)])
    assert bad.checks["tm_minutes"] is False and bad.checks["scale_count"] is False
    assert bad.checks["latency_p95"] is False  # 1.5 vs 3.5: not both small, +133 %
    big = compare_cell("c", "g", "ds2", [_m(latency_p95=10.0)], [_m(latency_p95=12.5)])
    assert big.checks["latency_p95"] is True  # +25 %


def test_kendall_tau_of_rankings() -> None:
    assert kendall([1, 2, 3, 4], [10, 20, 30, 40])[0] == pytest.approx(1.0)
    assert kendall([1, 2, 3, 4], [40, 30, 20, 10])[0] == pytest.approx(-1.0)
    cells = [compare_cell(f"q1_{a}", "q1", a, [_m(avg_tm=lo)], [_m(avg_tm=si)])
             for a, lo, si in (("x", 3.0, 3.5), ("y", 5.0, 4.0), ("z", 7.0, 8.0))]
    taus = {(t.scope, t.metric): t for t in rank_agreement(cells)}
    assert taus[("q1", "avg_tm")].tau == pytest.approx(1.0) and taus[("q1", "avg_tm")].n == 3
    assert ("all cells", "latency_avg") in taus


def test_the_local_runs_are_ranked_against_themselves() -> None:
    """Two local runs per cell: the real system's own ranking agreement, per group and pooled; the sim's
    comparison uses their mean. One local run per cell: nothing to rank against."""
    runs = {"x": (3.0, 6.0), "y": (5.0, 5.0), "z": (7.0, 4.0), "w": (9.0, 7.0)}  # r0 ranks x<y<z<w, r1 z<y<x<w
    cells = [compare_cell(f"q1_{a}", "q1", a, [_m(avg_tm=r0), _m(avg_tm=r1)], [_m(avg_tm=r0)])
             for a, (r0, r1) in runs.items()]
    assert cells[0].local["avg_tm"].mean == pytest.approx(4.5) and cells[0].local_runs[1]["avg_tm"] == 6.0
    taus = {(t.scope, t.metric): t for t in repeat_agreement(cells)}
    pooled = taus[("all cells: local r0 vs r1", "avg_tm")]
    assert pooled.n == 4 and pooled.tau == pytest.approx(kendall([3, 5, 7, 9], [6, 5, 4, 7])[0])
    assert pooled.tau == pytest.approx(0.0)  # the second run swapped three of the six pairs
    assert taus[("q1: local r0 vs r1", "avg_tm")].tau == pytest.approx(pooled.tau)
    # a cell with one local run takes no part; a group without two such cells gets no row
    cells.append(compare_cell("q11_x", "q11", "x", [_m(avg_tm=2.0)], [_m(avg_tm=2.0)]))
    scopes = {(t.scope, t.n) for t in repeat_agreement(cells) if t.metric == "avg_tm"}
    assert scopes == {("all cells: local r0 vs r1", 4), ("q1: local r0 vs r1", 4)}
    assert repeat_agreement([compare_cell("c", "g", "x", [_m()], [_m()])]) == []


def test_local_runs_are_paired_by_their_repetition_numbers_not_their_order() -> None:
    """A cell whose r0 is missing has its r1 and r2 only: its r1 is ranked with the other cells' r1, never as
    their r0; with three runs every pair is ranked."""
    full = [compare_cell(f"q1_{a}", "q1", a, [_m(avg_tm=v), _m(avg_tm=v), _m(avg_tm=10 - v)], [_m()])
            for a, v in (("x", 3.0), ("y", 5.0))]
    gap = compare_cell("q1_z", "q1", "z", [_m(avg_tm=9.0), _m(avg_tm=1.0)], [_m()], local_reps=[1, 2])
    assert set(gap.local_runs) == {1, 2} and gap.local_runs[1]["avg_tm"] == 9.0
    taus = {t.scope: t for t in repeat_agreement([*full, gap]) if t.metric == "avg_tm"}
    assert taus["all cells: local r0 vs r1"].n == 2 and taus["all cells: local r0 vs r1"].tau == pytest.approx(1.0)
    assert taus["all cells: local r1 vs r2"].n == 3  # x 3 -> 7, y 5 -> 5, z 9 -> 1: every pair swapped
    assert taus["all cells: local r1 vs r2"].tau == pytest.approx(-1.0)
    assert taus["all cells: local r0 vs r2"].n == 2


def test_the_report_shows_the_local_runs_own_agreement_only_when_there_are_two(tmp_path: Path) -> None:
    from harness.fidelity.report import REPEATS_TITLE, ReportInput, write_report

    two = [compare_cell(f"q1_{a}", "q1", a, [_m(avg_tm=v), _m(avg_tm=v + d)], [_m(avg_tm=v)])
           for a, v, d in (("x", 3.0, 4.0), ("y", 5.0, 0.0), ("z", 7.0, -3.0))]
    md, html_path = write_report(ReportInput("t", "src", [], two, rank_agreement(two), repeats=repeat_agreement(two)),
                                 tmp_path, "two")
    text = md.read_text()
    assert REPEATS_TITLE in text and "| all cells: local r0 vs r1 | avg TMs |" in text
    assert REPEATS_TITLE in html_path.read_text()
    one = [compare_cell("q1_x", "q1", "x", [_m()], [_m()]), compare_cell("q1_y", "q1", "y", [_m()], [_m()])]
    md, _ = write_report(ReportInput("t", "src", [], one, rank_agreement(one), repeats=repeat_agreement(one)),
                         tmp_path, "one")
    assert REPEATS_TITLE not in md.read_text()


def test_cli_runs_sim_reports_and_resumes(tmp_path: Path) -> None:
    _, src = matrix(tmp_path)
    results, out = tmp_path / "results", tmp_path / "report"
    runner = CliRunner()
    r = runner.invoke(app, ["fidelity", str(src), "--sim-only", "--reps", "2", "--results", str(results),
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert len(list((results / "fid-tiny" / "sim").iterdir())) == 4
    md = (out / "fid-tiny.md").read_text()
    assert "not (yet) recorded, left out: local/ds2-r0, local/hpa-varga-r0" in md
    # stand-ins for the local runs (the real ones need the stack): the report now compares cells
    for cell in ("ds2", "hpa-varga"):
        shutil.copytree(results / "fid-tiny" / "sim" / f"{cell}-r0", results / "fid-tiny" / "local" / f"{cell}-r0")
    r = runner.invoke(app, ["fidelity", str(src), "--report-only", "--reps", "2", "--results", str(results),
                            "--out", str(out)])
    assert r.exit_code == 0, r.output  # a sim record is no run of the local cell: stale, named, left out
    md = (out / "fid-tiny.md").read_text()
    assert "made with another configuration" in md and "local/ds2-r0, local/hpa-varga-r0" in md
    assert "| ds2 |" not in md  # no cell compared
    relabel_as_local(results, src)
    r = runner.invoke(app, ["fidelity", str(src), "--report-only", "--reps", "2", "--results", str(results),
                            "--out", str(out)])
    assert r.exit_code == 0, r.output
    md = (out / "fid-tiny.md").read_text()
    assert "## Targets per cell" in md and "| ds2 |" in md and "Kendall tau" in md
    # the stand-ins are sim records (no host measured); the committed q1 profile at 0.25 CPU records its machine's
    assert "local runs' host speed not measured" in md and "profile measured at" in md
    sim_meta = read_run_record(results / "fid-tiny" / "sim" / "ds2-r0").meta
    assert "speed_sha256_mb" not in sim_meta["host"] and "host_speed_sha256_mb" in sim_meta["backend"]["costs"]
    assert (out / "fid-tiny-figures" / "ds2.png").exists()
    html = (out / "fid-tiny.html").read_text()
    assert html.count("data:image/png;base64,") == 2
    # resumable: complete runs are not run again
    r = runner.invoke(app, ["fidelity", str(src), "--sim-only", "--reps", "2", "--results", str(results),
                            "--out", str(out)])
    assert r.exit_code == 0 and "4/4" in r.output


def relabel_as_local(results: Path, src: Path, reps: int = 2) -> None:
    """Give the copied sim records the local cell's identity, so they stand in for local runs."""
    import yaml

    from harness.identity import experiment_hash

    m = validate_model(Matrix, yaml.safe_load(src.read_text()), str(src))
    for run in fidelity_runs(m, str(src), results, reps, 1):
        if run.backend == "local":
            meta = yaml.safe_load((run.run_dir / "run.yaml").read_text())
            meta["identity"]["config_hash"] = experiment_hash(run.experiment)
            (run.run_dir / "run.yaml").write_text(yaml.safe_dump(meta))


def test_a_resumed_check_never_mixes_configurations(tmp_path: Path) -> None:
    """An edited file (or a recalibrated profile) makes the recorded runs stale: nothing runs until
    `--rerun-stale`, which replaces them; a report never compares them as the edited cells."""
    _, src = matrix(tmp_path)
    results, out = tmp_path / "results", tmp_path / "report"
    args = ["--sim-only", "--reps", "1", "--results", str(results), "--out", str(out)]
    runner = CliRunner()
    assert runner.invoke(app, ["fidelity", str(src), *args]).exit_code == 0
    run_yaml = results / "fid-tiny" / "sim" / "ds2-r0" / "run.yaml"
    before = run_yaml.read_text()
    src.write_text(TINY.replace("cooldown_s: 30", "cooldown_s: 45"))
    r = runner.invoke(app, ["fidelity", str(src), *args])
    assert r.exit_code == 2, r.output
    assert "2 run(s)" in r.output and "loop.cooldown_s: 30.0 -> 45.0" in r.output and "--rerun-stale" in r.output
    assert "sim/ds2-r0: " in r.output and "-r0-r0" not in r.output
    assert run_yaml.read_text() == before  # nothing ran
    r = runner.invoke(app, ["fidelity", str(src), "--report-only", "--reps", "1", "--results", str(results),
                            "--out", str(out)])
    assert r.exit_code == 0 and "sim/ds2-r0, sim/hpa-varga-r0" in (out / "fid-tiny.md").read_text()
    r = runner.invoke(app, ["fidelity", str(src), *args, "--rerun-stale"])
    assert r.exit_code == 0, r.output
    assert read_run_record(run_yaml.parent).meta["config"]["loop"]["cooldown_s"] == 45.0
    assert runner.invoke(app, ["fidelity", str(src), *args]).exit_code == 0  # now done: nothing stale


def test_several_files_make_one_report_ranked_across_all_their_cells(tmp_path: Path) -> None:
    """Two files (e.g. one per query, run in separate lock holds) compared in one report: every cell once,
    the Kendall tau over the cells of both."""
    _, one = matrix(tmp_path)
    two = tmp_path / "fid2.yaml"
    two.write_text(TINY.replace("name: fid-tiny", "name: fid-other").replace("query: q1", "query: q11"))
    results, out = tmp_path / "results", tmp_path / "report"
    runner = CliRunner()
    common = ["--sim-only", "--reps", "1", "--results", str(results), "--out", str(out)]
    r = runner.invoke(app, ["fidelity", str(one), str(two), *common])
    assert r.exit_code == 2 and "--name" in r.output  # which report would it be?
    r = runner.invoke(app, ["fidelity", str(one), str(one), *common, "--name", "both"])
    assert r.exit_code == 2 and "share the matrix name fid-tiny" in r.output
    r = runner.invoke(app, ["fidelity", str(one), str(two), *common, "--name", "both"])
    assert r.exit_code == 0, r.output
    assert len(list((results / "fid-tiny" / "sim").iterdir())) == 2
    assert len(list((results / "fid-other" / "sim").iterdir())) == 2
    md = (out / "both.md").read_text()
    assert md.startswith("# Fidelity: both") and f"`bench fidelity {one} {two}`" in md
    # both files have the cells ds2 and hpa-varga: told apart by their matrix
    assert ("not (yet) recorded, left out: fid-tiny/local/ds2-r0, fid-tiny/local/hpa-varga-r0, "
            "fid-other/local/ds2-r0, fid-other/local/hpa-varga-r0") in md
    for m in ("fid-tiny", "fid-other"):  # stand-ins for the local runs, as above
        for cell in ("ds2", "hpa-varga"):
            shutil.copytree(results / m / "sim" / f"{cell}-r0", results / m / "local" / f"{cell}-r0")
    for src in (one, two):
        relabel_as_local(results, src, reps=1)
    r = runner.invoke(app, ["fidelity", str(one), str(two), "--report-only", "--reps", "1", "--results", str(results),
                            "--out", str(out), "--name", "both"])
    assert r.exit_code == 0, (r.output, r.exception and "".join(__import__("traceback").format_exception(r.exception)))
    md = (out / "both.md").read_text()
    assert "| fid-tiny/ds2 |" in md and "| fid-other/hpa-varga |" in md
    assert "| all cells | avg TMs |" in md and md.count("| 4 |") >= 2  # ranked over the four cells
    assert (out / "both-figures" / "fid-other_hpa-varga.png").exists()
    assert "q1 cosine: scale" in md and "q11 cosine: scale" in md


def test_bad_input_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(TINY.replace("query: q1", "query: q99"))
    r = CliRunner().invoke(app, ["fidelity", str(bad), "--results", str(tmp_path)])
    assert r.exit_code == 2 and "q99" in r.output


def test_scale_chosen_from_the_calibrated_capacity(tmp_path: Path) -> None:
    from harness.fidelity.scale import describe_scale, needed_taskmanagers, scale_for

    m, src = matrix(tmp_path)
    exp = fidelity_runs(m, str(src), tmp_path, 1, 1)[0].experiment
    assert needed_taskmanagers(exp, 0.0) == 3  # one subtask per operator at least
    rates = [1e3, 1e4, 1e5, 1e6]
    tms = [needed_taskmanagers(exp, r) for r in rates]
    assert tms == sorted(tms) and tms[-1] > tms[0]
    s = scale_for(exp, peak_share=0.85)  # 0.85 x 8 -> the peak needs at most 6 task managers
    at = exp.model_copy(update={"pattern": exp.pattern.model_copy(update={"scale": s})})
    above = exp.model_copy(update={"pattern": exp.pattern.model_copy(update={"scale": s * 1.05})})
    assert describe_scale(at).peak_tms <= 6 < describe_scale(above).peak_tms
    # the report names where the capacities came from (never "calibrated" without a calibrated profile)
    from harness.calibrated_profile import load_profile

    said = describe_scale(at).describe()
    assert "needs" in said
    assert ("calibrated capacities" in said) == (load_profile(exp.query) is not None), said


class _Rec:
    """A record's metadata only: what the machine-speed comparison reads."""

    def __init__(self, meta: dict) -> None:
        self.meta = meta


def _local(speed: float | None) -> _Rec:
    return _Rec({"host": {"cpus": 2, **({"speed_sha256_mb": speed} if speed is not None else {})}})


def _sim(speed: float | None, calibrated: bool = True) -> _Rec:
    return _Rec({"backend": {"costs": {"source": "calibrated 2026-11-26 on a CPU at 0.1 CPU" if calibrated
                                       else "first guess (queries/topologies/q1.yaml)",
                                       "calibrated": calibrated, "host_speed_sha256_mb": speed}}})


def _report(tmp_path: Path, machines: list[str]) -> tuple[str, str]:
    from harness.fidelity.report import ReportInput, write_report

    md, html = write_report(ReportInput("t", "f.yaml", [], [], [], {}, machines), tmp_path, "t")
    return md.read_text(), html.read_text()


def test_a_profile_from_a_slower_machine_is_flagged_with_the_factor(tmp_path: Path) -> None:
    from harness.fidelity.machines import WARNING, speed_lines

    lines = speed_lines([_local(1950.0), _local(2050.0)], [_sim(600.0), _sim(600.0)])
    flagged = [x for x in lines if x.startswith(WARNING)]
    assert len(flagged) == 1
    assert "measured on a machine 3.3 x slower than the local runs" in flagged[0]
    assert "profile 600, local median 2000" in flagged[0] and "not rescaled" in flagged[0]
    faster = speed_lines([_local(600.0)], [_sim(2000.0)])
    assert any("3.3 x faster than the local runs" in x for x in faster)
    md, html = _report(tmp_path, lines)
    assert "## Machine speed (profile vs local runs)" in md and f"**{WARNING}** the sim's profile" in md
    assert f"<b class='miss'>{WARNING}</b>" in html


def test_equal_speeds_within_the_tolerance_raise_nothing(tmp_path: Path) -> None:
    from harness.fidelity.machines import WARNING, speed_lines

    lines = speed_lines([_local(2000.0)], [_sim(1800.0)])  # 11 % apart, tolerance 15 %
    assert not any(x.startswith(WARNING) for x in lines)
    assert any("the same machine speed within 15%" in x for x in lines)
    assert any(x.startswith(WARNING) for x in speed_lines([_local(2000.0)], [_sim(1700.0)]))  # 18 %: flagged
    md, _ = _report(tmp_path, lines)
    assert WARNING not in md


def test_an_unmeasured_speed_is_named_never_compared_as_zero() -> None:
    from harness.fidelity.machines import WARNING, speed_lines

    lines = speed_lines([_local(2000.0)], [_sim(None)])
    assert any("profile speed not measured" in x for x in lines) and not any(x.startswith(WARNING) for x in lines)
    lines = speed_lines([_local(None)], [_sim(600.0)])
    assert any("local runs' host speed not measured" in x for x in lines)
    assert any("the machines are not compared" in x for x in lines)
    lines = speed_lines([_local(2000.0)], [_sim(None, calibrated=False)])
    assert any("first guess, no measured profile" in x for x in lines)


def test_the_report_says_how_long_before_the_local_runs_each_profile_was_measured() -> None:
    """q1's capacity moved 10-15 % between hours at an unchanged speed probe: the age is part of the comparison."""
    from harness.fidelity.machines import age_lines

    def local_at(t: str | None) -> _Rec:
        return _Rec({"started_at": t} if t else {})

    def sim_at(t: str | None, source: str = "calibrated q1") -> _Rec:
        return _Rec({"backend": {"costs": {"source": source, "calibrated": True, "calibrated_at": t}}})

    runs = [local_at("2026-11-27T19:10:00+00:00"), local_at("2026-11-27T18:50:00+00:00")]
    (line,) = age_lines([(runs, [sim_at("2026-11-27T18:42:00+00:00")] * 3)])
    assert "0.1 h before the first local run and 0.5 h before the last" in line and "hour's" not in line
    (old,) = age_lines([(runs, [sim_at("2026-11-27T10:20:00+00:00")])])
    assert "8.5 h before the first local run and 8.8 h before the last" in old and "moved 10-15 %" in old
    (later,) = age_lines([(runs, [sim_at("2026-11-27T21:50:00+00:00")])])
    assert "3.0 h after the first local run" in later
    # each profile against the local runs of its own cells, not every cell's
    q11 = [local_at("2026-11-27T23:00:00+00:00")]
    lines = age_lines([(runs, [sim_at("2026-11-27T18:42:00+00:00")]),
                       (q11, [sim_at("2026-11-27T22:50:00+00:00", source="calibrated q11")])])
    assert len(lines) == 2 and not any("hour's" in x for x in lines)
    # a run that recorded the profile's time counts even beside one that did not (made before it was recorded)
    (mixed,) = age_lines([(runs, [sim_at(None), sim_at("2026-11-27T18:42:00+00:00")])])
    assert "0.1 h before" in mixed
    # unknown stays unknown: a profile or run without a recorded time is named, never read as time 0
    assert "its measurement time not recorded" in age_lines([(runs, [sim_at(None)])])[0]
    assert "the local runs' start times not recorded" in age_lines([([local_at(None)], [sim_at("2026-11-27")])])[0]
    assert "(1 of 2 local runs recorded their start)" in age_lines(
        [([runs[0], local_at(None)], [sim_at("2026-11-27T18:42:00+00:00")])])[0]
    # a first-guess profile has no measurement to date
    first_guess = _Rec({"backend": {"costs": {"source": "first guess", "calibrated": False}}})
    assert age_lines([(runs, [first_guess])]) == []


def test_the_report_checks_the_local_busy_readings_against_the_model_the_sim_draws_from(tmp_path: Path) -> None:
    """Per operator: the local readings' residual against the sim run's recorded reading model, and the spread
    of its deployments' means (a restart of the job to the next, whichever operator it rescaled), beside what
    the profile's held error makes of such a mean."""
    import copy

    from harness.fidelity.readings import AFTER_RESTART_S, readings_rows, readings_table
    from harness.record import RunRecord, timeseries_table

    m, src = matrix(tmp_path)
    run = next(r for r in fidelity_runs(m, str(src), tmp_path, 1, 1) if r.backend == "sim")
    sim = read_run_record(run_experiment(run.experiment, run.run_dir))
    meta = copy.deepcopy(sim.meta)
    costs = meta["backend"]["costs"]
    for op in ("bids_source", "map"):
        costs["busy_reading"][op]["held_sd"] = 0.12  # as a profile with deployment phases would have it
        # the line everywhere (this run has no backpressure series to tell a queued input by): the backlogged level
        # is set where it is under test, below
        costs["busy_reading"][op]["backlogged_mean"] = None
    # a local run of q1 at half of each operator's capacity per subtask: map goes from 1 subtask to 2 at
    # t = 200 s, which restarts the whole job. The readings sit 0.1 (the source: 0.05) above the model
    # before the restart and as far below after it; they read 1.0 while warming up after either start
    t = np.arange(5.0, 405.0, 5.0)
    n = len(t)
    warm = (t < AFTER_RESTART_S) | ((t >= 200) & (t < 200 + AFTER_RESTART_S))
    cols: list[tuple[str, str, np.ndarray]] = []
    for op, par, off, rate in (("bids_source", np.ones(n), 0.05, "records_out"),
                               ("map", np.where(t < 200, 1.0, 2.0), 0.1, "records_in")):
        g = costs["busy_reading"][op]
        level = g["offset"] + g["gain"] * 0.5
        busy = np.where(warm, 1.0, np.where(t < 200, level + off, level - off)) * 1000.0
        cols += [("busy_ms", op, busy), (rate, op, 0.5 * costs["capacity_per_subtask"][op] * par),
                 ("parallelism", op, par)]
    table = timeseries_table(np.tile(t, len(cols)), [c[0] for c in cols for _ in t], [c[1] for c in cols for _ in t],
                             [-1] * (n * len(cols)), np.concatenate([c[2] for c in cols]))
    local = RunRecord(tmp_path / "local", {"backend": {"name": "local"}}, table, sim.events_table, "completed")
    sim_rec = RunRecord(sim.path, meta, sim.table, sim.events_table, sim.status)
    rows = {r.operator: r for r in readings_rows({"ds2": ([local], [sim_rec])})}
    first = int(((t >= AFTER_RESTART_S) & (t < 200)).sum())
    second = int((t >= 200 + AFTER_RESTART_S).sum())
    mp, source = rows["map"], rows["bids_source"]
    assert (mp.samples, mp.deployments) == (first + second, 2)
    assert mp.mean_residual == pytest.approx(0.1 * (first - second) / (first + second), abs=1e-9)
    assert mp.between_sd == pytest.approx(0.2 / np.sqrt(2), rel=1e-9)
    assert mp.held_sd == pytest.approx(0.12) and mp.expected_sd == pytest.approx(0.12 * np.sqrt(0.75))
    # the source was not rescaled, but map's rescale restarted it too: two deployments, not one
    assert source.deployments == 2 and source.between_sd == pytest.approx(0.1 / np.sqrt(2), rel=1e-9)
    assert source.expected_sd == pytest.approx(0.12)
    # a profile that never measured the held error says so; it is not shown as 0
    costs["busy_reading"]["map"]["held_sd"] = None
    head, body = readings_table(readings_rows({"ds2": ([local], [sim_rec])}))
    (row,) = [b for b in body if b[1] == "map"]
    assert row[head.index("sim: held sd per subtask")] == row[head.index("held alone over p subtasks")] \
        == "not calibrated"
    # a map holding its source back (the source 70 % backpressured, the map itself not) has records waiting at its
    # input: it is compared with the calibrated backlogged level (0.9 here), not with the line, even where its
    # rate reads 3 % under the calibrated capacity; with its source only 10 % backpressured, with the line
    costs["busy_reading"]["map"].update(held_sd=0.12, backlogged_mean=0.9)
    g = costs["busy_reading"]["map"]
    cap_map = costs["capacity_per_subtask"]["map"]

    def run_with(source_bp: float) -> RunRecord:
        cols = [("busy_ms", "map", np.full(n, 900.0)), ("records_in", "map", np.full(n, 0.97 * cap_map)),
                ("parallelism", "map", np.ones(n)), ("backpressured_ms", "map", np.zeros(n)),
                ("backpressured_ms", "bids_source", np.full(n, source_bp))]
        table = timeseries_table(np.tile(t, len(cols)), [c[0] for c in cols for _ in t],
                                 [c[1] for c in cols for _ in t], [-1] * (n * len(cols)),
                                 np.concatenate([c[2] for c in cols]))
        return RunRecord(tmp_path / f"local-{source_bp:g}", {"backend": {"name": "local"}}, table, sim.events_table,
                         "completed")

    (held,) = [r for r in readings_rows({"ds2": ([run_with(700.0)], [sim_rec])}) if r.operator == "map"]
    assert held.mean_residual == pytest.approx(0.0, abs=1e-9)
    (free,) = [r for r in readings_rows({"ds2": ([run_with(100.0)], [sim_rec])}) if r.operator == "map"]
    assert free.mean_residual == pytest.approx(0.9 - (g["offset"] + g["gain"] * 0.97), abs=1e-9)
    # at two or more subtasks against the scaled-out line where the profile has one: the map reading its line at
    # one subtask before t = 200 s and 0.3 + 0.4 x utilisation at two after leaves no residual in either
    costs["busy_reading"]["map"].update(backlogged_mean=None, scaled_out={"offset": 0.3, "gain": 0.4,
                                                                          "subtasks": [2]})
    par = np.where(t < 200, 1.0, 2.0)
    cols = [("busy_ms", "map", np.where(t < 200, g["offset"] + g["gain"] * 0.5, 0.3 + 0.4 * 0.5) * 1000.0),
            ("records_in", "map", 0.5 * cap_map * par), ("parallelism", "map", par)]
    table = timeseries_table(np.tile(t, len(cols)), [c[0] for c in cols for _ in t], [c[1] for c in cols for _ in t],
                             [-1] * (n * len(cols)), np.concatenate([c[2] for c in cols]))
    wide = RunRecord(tmp_path / "local-wide", {"backend": {"name": "local"}}, table, sim.events_table, "completed")
    (both,) = [r for r in readings_rows({"ds2": ([wide], [sim_rec])}) if r.operator == "map"]
    assert both.deployments == 2 and both.mean_residual == pytest.approx(0.0, abs=1e-9)
    # as the sim reads it (`busy_at`): the backlogged level, measured at one subtask, holds at two: a map holding
    # its source back is compared with it at either, not with the scaled-out line (0.69 at 97 %)
    costs["busy_reading"]["map"]["backlogged_mean"] = 0.9
    cols = [("busy_ms", "map", np.full(n, 900.0)),
            ("records_in", "map", 0.97 * cap_map * par), ("parallelism", "map", par),
            ("backpressured_ms", "map", np.zeros(n)), ("backpressured_ms", "bids_source", np.full(n, 700.0))]
    table = timeseries_table(np.tile(t, len(cols)), [c[0] for c in cols for _ in t], [c[1] for c in cols for _ in t],
                             [-1] * (n * len(cols)), np.concatenate([c[2] for c in cols]))
    held_wide = RunRecord(tmp_path / "local-held-wide", {"backend": {"name": "local"}}, table, sim.events_table,
                          "completed")
    (queued_both,) = [r for r in readings_rows({"ds2": ([held_wide], [sim_rec])}) if r.operator == "map"]
    assert queued_both.deployments == 2 and queued_both.mean_residual == pytest.approx(0.0, abs=1e-9)
    costs["busy_reading"]["map"]["backlogged_mean"] = None
    # the gauge reports the mean of the last 60 s (Flink's TimerGauge, as the sim record models it): a map whose
    # load steps from 0.3 to 0.7 of its capacity at t = 300 s without a restart, read through that window, leaves
    # no residual against the line of its windowed utilisation, and one against the line of each 5-s span
    import pandas as pd

    from harness.gauge_window import window_means

    del costs["busy_reading"]["map"]["scaled_out"]
    line0 = {"offset": g["offset"], "gain": g["gain"]}
    costs["busy_reading"]["map"].update(offset=0.1, gain=0.8)
    load = pd.Series(np.where(t < 300, 0.3, 0.7), index=t)
    seen = window_means(t, load.to_numpy(), np.array([0.0]), t, 60.0)
    assert seen[t == 295][0] == pytest.approx(0.3) and seen[t == 360][0] == pytest.approx(0.7)
    assert seen[t == 330][0] == pytest.approx(0.3 + 0.4 * 7 / 12)  # 7 of its 12 samples (275-330 s) at 0.7
    assert window_means(t, load.to_numpy(), np.array([0.0, 320.0]), t, 60.0)[t == 330][0] == pytest.approx(0.7)
    cols = [("busy_ms", "map", (0.1 + 0.8 * seen) * 1000.0), ("records_in", "map", load * cap_map),
            ("parallelism", "map", np.ones(n))]
    table = timeseries_table(np.tile(t, len(cols)), [c[0] for c in cols for _ in t], [c[1] for c in cols for _ in t],
                             [-1] * (n * len(cols)), np.concatenate([c[2] for c in cols]))
    stepped = RunRecord(tmp_path / "local-step", {"backend": {"name": "local"}}, table, sim.events_table, "completed")
    meta.setdefault("config", {}).setdefault("sim", {})["meter_window_s"] = 60.0
    (through,) = [r for r in readings_rows({"ds2": ([stepped], [sim_rec])}) if r.operator == "map"]
    assert through.mean_residual == pytest.approx(0.0, abs=1e-9)
    meta["config"]["sim"]["meter_window_s"] = 0.0  # each reading against its own span's load: it lags, so it errs
    (plain,) = [r for r in readings_rows({"ds2": ([stepped], [sim_rec])}) if r.operator == "map"]
    meta["config"]["sim"]["meter_window_s"] = 60.0  # the window again for what follows
    # 11 readings after the step lag by 0.8 x 0.4 x (11 - k) / 12 each: their sum over the run's 75 readings
    assert plain.mean_residual == pytest.approx(-0.8 * 0.4 * sum((12 - k) / 12 for k in range(1, 12)) / 75, rel=0.05)
    costs["busy_reading"]["map"].update(line0)
    costs["busy_reading"]["map"]["scaled_out"] = {"offset": 0.3, "gain": 0.4, "subtasks": [2]}
    # a record from before the line was modelled (no `scaled_out`): the one line throughout
    del costs["busy_reading"]["map"]["scaled_out"]
    (old,) = [r for r in readings_rows({"ds2": ([wide], [sim_rec])}) if r.operator == "map"]
    assert old.mean_residual == pytest.approx(
        (0.3 + 0.4 * 0.5 - (g["offset"] + g["gain"] * 0.5)) * second / (first + second), abs=1e-9)


def test_the_report_sets_both_sides_cpu_readings_by_load_per_subtask_side_by_side(tmp_path: Path) -> None:
    """Each CPU reading is banded by the operator's records per subtask over the reading's own span (the mean of the
    rate samples since the previous reading; unknown with one missing) over the sim's capacity per subtask, apart
    at one subtask and at two or more; a source by the records it sends. Readings right after a (re)start or at
    another CPU share are left out; a run counts in a band with MIN_SECONDS of readings there, and a side's figure
    is the mean of its runs' means; n/a where none counts, never 0."""
    from harness.fidelity.cpu_readings import MIN_SECONDS, cpu_rows, cpu_table
    from harness.fidelity.readings import AFTER_RESTART_S
    from harness.record import RunRecord, timeseries_table

    m, src = matrix(tmp_path)
    run = next(r for r in fidelity_runs(m, str(src), tmp_path, 1, 1) if r.backend == "sim")
    sim = read_run_record(run_experiment(run.experiment, run.run_dir))
    caps = sim.meta["backend"]["costs"]["capacity_per_subtask"]
    end = 600.0

    def record(name: str, every: float, cpu: float, loads: Sequence[float] = (0.3, 0.3, 0.96),
               gap_at: float | None = None, share_low_after: float = 1e9, rescale_at: float = 300.0) -> RunRecord:
        """Map and source at 1 subtask until `rescale_at`, then at 2; per subtask, 5-s rate samples cycling
        through `loads` (x capacity); the CPU read every `every` s (0.1 s after a rate sample) at `cpu`."""
        t = np.arange(5.0, end, 5.0)
        par = np.where(t < rescale_at, 1.0, 2.0)
        share = np.where(t < share_low_after, 1.0, 0.5)
        frac = np.array([loads[k % len(loads)] for k in range(len(t))])
        if gap_at is not None:
            frac[np.argmin(np.abs(t - gap_at))] = np.nan
        read = np.arange(15.0, end, every) + 0.1
        parts: list[tuple[str, str, np.ndarray, np.ndarray]] = []
        for op, metric in (("map", "records_in"), ("bids_source", "records_out")):
            parts += [(metric, op, t, frac * caps[op] * par), ("parallelism", op, t, par),
                      ("cpu_share", op, t, share), ("cpu", op, read, np.full(len(read), cpu))]
        table = timeseries_table(np.concatenate([x[2] for x in parts]), [x[0] for x in parts for _ in x[2]],
                                 [x[1] for x in parts for _ in x[2]], [-1] * sum(len(x[2]) for x in parts),
                                 np.concatenate([x[3] for x in parts]))
        meta = sim.meta if name.startswith("sim") else {"backend": {"name": "local"}}
        return RunRecord(tmp_path / name, meta, table, sim.events_table, "completed")

    def rows(local: RunRecord, sims: list[RunRecord]) -> dict[tuple[str, bool], Any]:
        return {(r.operator, r.scaled_out): r for r in cpu_rows({"ds2": ([local], sims)})}

    # every 15 s locally the span holds samples at 0.3, 0.3, 0.96: its mean, 0.52, is band 0.50-0.75 (the last
    # sample alone would be 0.75-1.00, the next 0.25-0.50); on the sim every 5 s, each sample its own span
    local = record("local", 15.0, 0.70)
    got = rows(local, [record("sim-a", 5.0, 0.80, loads=(0.52,))])
    for op in ("map", "bids_source"):
        for wide in (False, True):
            r = got[(op, wide)]
            assert r.local.mean[2] == pytest.approx(0.70) and np.isnan(r.local.mean[1]) and np.isnan(r.local.mean[3])
            assert r.sim.mean[2] == pytest.approx(0.80) and np.isnan(r.sim.mean[3])
    # the sim's repetitions count alike: the mean of their means (0.5), not of their readings pooled (0.43),
    # though the second read that band for a fifth of the time only
    long_, short_ = record("sim-long", 5.0, 0.40, loads=(0.6,)), record("sim-short", 5.0, 0.60, loads=(0.6,),
                                                                        rescale_at=end - 90.0)
    wide_row = rows(local, [long_, short_])[("map", True)]
    assert wide_row.sim.mean[2] == pytest.approx(0.50) and wide_row.sim.runs[2] == 2
    head, body = cpu_table(list(rows(local, [long_, short_]).values()))
    (line,) = [b for b in body if b[1] == "map" and b[2] == "2+"]
    assert line[head.index("load 0.50-0.75")] == f"0.70 ({wide_row.local.seconds[2]:.0f} s) / 0.50 (2)"
    assert line[head.index("load 0.00-0.25")] == "n/a / n/a"
    # a missing rate sample leaves its span's reading out (unknown load, not a lower one)
    gapped = rows(record("local-gap", 15.0, 0.70, gap_at=400.0), [record("sim-a", 5.0, 0.80, loads=(0.52,))])[
        ("map", True)]
    assert gapped.local.seconds[2] == got[("map", True)].local.seconds[2] - 15.0
    # within AFTER_RESTART_S of the rescale at 300 s nothing counts, nor at another CPU share: halving the share
    # MIN_SECONDS after that leaves just enough; a reading sooner, too few (no band both sides read: no row)
    def scaled_out_rows(share_low_after: float) -> list[Any]:
        rec = record("local-short", 15.0, 0.70, share_low_after=share_low_after)
        return [r for r in cpu_rows({"ds2": ([rec], [record("sim-a", 5.0, 0.80, loads=(0.52,))])})
                if r.operator == "map" and r.scaled_out]

    (enough,) = scaled_out_rows(300.0 + AFTER_RESTART_S + MIN_SECONDS)
    assert enough.local.mean[2] == pytest.approx(0.70)
    assert scaled_out_rows(300.0 + AFTER_RESTART_S + MIN_SECONDS - 15.0) == []


def test_the_report_sets_what_each_operator_took_at_its_limit_beside_its_calibrated_capacity(tmp_path: Path) -> None:
    """An operator counts at its limit over a CPU reading's span only with its CPU at SATURATED_CPU of the quota
    or more, itself not held back, and records waiting at its input (upstream backpressured; for a source, records
    WAITED_S in Kafka); its rate is its records per subtask over the span. Spans right after a (re)start, or with
    a sample missing, are left out; both sides are pooled per query over the cells' runs; n/a, never 0. The same
    spans by the time since the (re)start, as shares of the sim's capacity in their layout, make their own table."""
    from harness.calibrated_profile import HELD_BACK
    from harness.fidelity.readings import AFTER_RESTART_S
    from harness.fidelity.report import ReportInput, write_report
    from harness.fidelity.saturation import (
        AGE_BANDS,
        SATURATED_CPU,
        WAITED_S,
        InputLayout,
        age_rows,
        age_table,
        at_limit,
        pool,
        saturation_rows,
        saturation_table,
    )
    from harness.record import RunRecord, timeseries_table

    m, src = matrix(tmp_path)
    run = next(r for r in fidelity_runs(m, str(src), tmp_path, 1, 1) if r.backend == "sim")
    sim = read_run_record(run_experiment(run.experiment, run.run_dir))
    caps = sim.meta["backend"]["costs"]["capacity_per_subtask"]
    end, rescale_at = 600.0, 300.0
    spans_per_run = len([t for t in np.arange(15.0, end, 15.0) + 0.1  # the run's start and the rescale restart it
                         if t - (0.0 if t < rescale_at else rescale_at) >= AFTER_RESTART_S])

    def record(name: str, took: float | np.ndarray = 0.8, cpu: float = 0.98, upstream_bp: float = 600.0,
               own_bp: float = 0.0, waited_s: float = 20.0, gap_at: float | None = None, as_sim: bool = False,
               map_after: float = 2.0) -> RunRecord:
        """Map and source at 1 subtask until `rescale_at`, then 2 (the map `map_after`), each taking `took` x its
        capacity per subtask (5-s samples), the CPU read every 15 s; the source backpressured `upstream_bp`, the
        map `own_bp` ms/s."""
        t = np.arange(5.0, end, 5.0)
        frac = np.broadcast_to(np.asarray(took, dtype=float), t.shape).copy()  # a share per 5-s sample, or one
        if gap_at is not None:
            frac[np.argmin(np.abs(t - gap_at))] = np.nan
        read = np.arange(15.0, end, 15.0) + 0.1
        parts: list[tuple[str, str, np.ndarray, np.ndarray]] = [
            ("latency_kafka", "", t, np.full(len(t), waited_s))]
        for op, metric, bp in (("map", "records_in", own_bp), ("bids_source", "records_out", upstream_bp)):
            par = np.where(t < rescale_at, 1.0, map_after if op == "map" else 2.0)
            parts += [(metric, op, t, frac * caps[op] * par), ("parallelism", op, t, par),
                      ("backpressured_ms", op, t, np.full(len(t), bp)), ("cpu", op, read, np.full(len(read), cpu))]
        table = timeseries_table(np.concatenate([x[2] for x in parts]), [x[0] for x in parts for _ in x[2]],
                                 [x[1] for x in parts for _ in x[2]], [-1] * sum(len(x[2]) for x in parts),
                                 np.concatenate([x[3] for x in parts]))
        meta = sim.meta if as_sim else {"backend": {"name": "local"}}
        return RunRecord(tmp_path / name, meta, table, sim.events_table, "completed")

    def spans(rec: RunRecord, op: str = "map") -> int:
        source = op == "bids_source"
        return len(at_limit(rec, op, source, [] if source else ["bids_source"]))

    # at its limit throughout: every span outside the restart's AFTER_RESTART_S counts, at 0.8 x capacity
    full = record("local")
    assert spans(full) == spans_per_run
    assert at_limit(full, "map", False, ["bids_source"]).rate.to_numpy() == pytest.approx(0.8 * caps["map"])
    # each condition fails alone: CPU under the quota's SATURATED_CPU, nothing waiting upstream, held back itself
    assert spans(record("cool", cpu=SATURATED_CPU - 0.02)) == 0
    # the CPU counted saturated from what the operator read saturated in its calibration (its quota's share)
    assert len(at_limit(record("cool1", cpu=0.92), "map", False, ["bids_source"])) == 0
    assert len(at_limit(record("cool2", cpu=0.92), "map", False, ["bids_source"], cpu_saturated=0.96)) == \
        spans_per_run
    assert spans(record("free", upstream_bp=HELD_BACK * 1000 - 50)) == 0
    assert spans(record("held", own_bp=HELD_BACK * 1000 + 50)) == 0
    # a source counts where records waited WAITED_S in Kafka (it has no upstream), not where they did not, nor
    # where it was itself held back (as in `full`, its map the bottleneck)
    assert spans(record("source-limit", upstream_bp=0.0), "bids_source") == spans_per_run
    assert spans(record("no-backlog", upstream_bp=0.0, waited_s=WAITED_S - 1), "bids_source") == 0
    assert spans(full, "bids_source") == 0
    # with two upstreams (a join) either held back counts; one whose reading is missing hides no other
    assert len(at_limit(full, "map", False, ["no_such_upstream", "bids_source"])) == spans_per_run
    assert len(at_limit(record("free2", upstream_bp=0.0), "map", False, ["no_such_upstream", "bids_source"])) == 0
    # a missing rate sample makes its span unknown: left out, not a lower rate
    assert spans(record("gap", gap_at=400.0)) == spans_per_run - 1
    # pooled per query over the cells: two cells' local runs; the sim's map never at its limit in one cell's run,
    # at its capacity in the other's
    cool_sim, full_sim = record("sim-cool", cpu=0.5, as_sim=True), record("sim-full", took=1.0, as_sim=True)
    rows = {r.operator: r for r in saturation_rows(pool({"a": ([full], [cool_sim]), "b": ([record("b", took=0.6)],
                                                                                     [full_sim])}))}
    mp = rows["map"]
    assert mp.query == "q1" and mp.capacity == pytest.approx(caps["map"]) and mp.local.runs == 2
    assert mp.local.seconds == pytest.approx(2 * 15.0 * spans_per_run)
    assert mp.local.q25 == pytest.approx(0.6 * caps["map"]) and mp.local.q75 == pytest.approx(0.8 * caps["map"])
    assert mp.sim.runs == 1 and mp.sim.median == pytest.approx(caps["map"])
    assert mp.layout is InputLayout.ONE_CHANNEL  # one source subtask, then forward pairs: one channel each
    head, body = saturation_table([mp])
    line = dict(zip(head, body[0], strict=True))
    assert line["local / the sim's"] == f"{mp.local.median / caps['map']:.2f}"
    assert line["sim at its limit: median (time)"] == f"{caps['map']:,.0f} ({15.0 * spans_per_run:.0f} s)"
    # a side never at its limit reads n/a, never 0
    (cool,) = [r for r in saturation_rows(pool({"a": ([record("c", cpu=0.5)], [full_sim])})) if r.operator == "map"]
    head, (row,) = saturation_table([cool])
    cols = dict(zip(head, row, strict=True))
    assert cols["local at its limit: median (quartiles)"] == "n/a" and cols["local / the sim's"] == "n/a"
    # spans fed over several channels (the map at 3 behind 2 source subtasks: round-robin) are kept apart from
    # those fed by one and set against the capacity the sim runs at there: the fed fraction where calibrated
    fed_sim = dataclasses.replace(record("sim-fed", cpu=0.5, as_sim=True), meta={**sim.meta, "backend": {
        **sim.meta["backend"], "costs": {**sim.meta["backend"]["costs"], "fed_scaled_out": {"map": 0.8}}}})
    split = {r.layout: r for r in saturation_rows(pool({"a": ([record("rr", map_after=3.0)], [fed_sim])}))
             if r.operator == "map"}
    assert set(split) == {InputLayout.ONE_CHANNEL, InputLayout.SEVERAL_CHANNELS}
    one, several = split[InputLayout.ONE_CHANNEL], split[InputLayout.SEVERAL_CHANNELS]
    assert one.sim_capacity == pytest.approx(caps["map"]) and several.sim_capacity == pytest.approx(0.8 * caps["map"])
    assert one.local.seconds + several.local.seconds == pytest.approx(15.0 * spans_per_run)
    assert several.local.seconds > 0 and one.local.seconds > 0
    head, (row,) = saturation_table([several])
    assert dict(zip(head, row, strict=True))["local / the sim's"] == "1.00"  # the record took 0.8 x capacity
    # a record from before the keyed flag was kept: forward or keyed cannot be told apart at equal parallelism
    old_meta = {**sim.meta, "topology": {**sim.meta["topology"], "operators": [
        {k: v for k, v in sp.items() if k != "keyed"} for sp in sim.meta["topology"]["operators"]]}}
    old_sim = dataclasses.replace(record("sim-old", as_sim=True), meta=old_meta)
    layouts = {r.layout for r in saturation_rows(pool({"a": ([full], [old_sim])})) if r.operator == "map"}
    assert layouts == {InputLayout.ONE_CHANNEL, InputLayout.UNKNOWN}  # 1 behind 1: one channel; 2 behind 2: unknown
    # by the time since the (re)start: each span's end, its rate as a share of the sim's capacity in its layout.
    # A map that takes 0.7 of its capacity until 120 s after each (re)start and 0.9 after it (the run's start and
    # the rescale at 300 s): 0.7 in the bands before 120 s, 0.9 from it (one 0.7 span ends at 120.1 s)
    t5 = np.arange(5.0, end, 5.0)
    aging = record("aging", took=np.where(np.where(t5 < rescale_at, t5, t5 - rescale_at) > 120.0, 0.9, 0.7))
    assert set(at_limit(aging, "map", False, ["bids_source"]).since.round(1)) == {
        round(x - (0.0 if x < rescale_at else rescale_at), 1) for x in np.arange(15.0, end, 15.0) + 0.1
        if x - (0.0 if x < rescale_at else rescale_at) >= AFTER_RESTART_S}
    (age,) = [r for r in age_rows(pool({"a": ([aging], [full_sim])})) if r.operator == "map"]
    assert len(age.local) == len(age.sim) == len(AGE_BANDS) - 1
    assert [s.median for s in age.local] == pytest.approx([0.7, 0.7, 0.9, 0.9])
    assert [s.median for s in age.sim] == pytest.approx([1.0] * 4)  # the sim's record at its capacity throughout
    assert sum(s.seconds for s in age.local) == pytest.approx(15.0 * spans_per_run)
    head, (row,) = age_table([age])
    assert dict(zip(head, row, strict=True))["120-240 s"].startswith("0.90 / 1.00 (")
    # each span as a share of the sim's capacity in its own layout: the map fed by one source subtask until the
    # rescale (0.8 of its capacity), then by several at the sim's fed fraction 0.8 (0.8 / 0.8): half of each band
    (fed_age,) = [r for r in age_rows(pool({"a": ([record("rr2", map_after=3.0)], [fed_sim])})) if r.operator == "map"]
    assert [s.median for s in fed_age.local] == pytest.approx([0.9] * 4)
    assert [x for s in fed_age.local for x in (s.q25, s.q75)] == pytest.approx([0.8, 1.0] * 4)
    # the report prints the section, with the table
    md, _ = write_report(ReportInput("t", "f.yaml", [], [], [], {}, ages=age_table([age])), tmp_path, "ages")
    assert "## Rates at the limit by time since the (re)start" in md.read_text() and row[2] in md.read_text()
    # spans of an unknown layout have no capacity to share: left out; a side never at its limit reads n/a
    (old,) = [r for r in age_rows(pool({"a": ([full], [old_sim])})) if r.operator == "map"]
    assert sum(s.seconds for s in old.local) == pytest.approx(15.0 * len([x for x in np.arange(15.0, rescale_at, 15.0)
                                                                          if x + 0.1 >= AFTER_RESTART_S]))
    (never,) = [r for r in age_rows(pool({"a": ([record("c2", cpu=0.5)], [full_sim])})) if r.operator == "map"]
    head, (row,) = age_table([never])
    assert all(cell.startswith("n/a / ") for cell in row[2:])


def test_an_archive_of_the_local_records_rebuilds_the_same_report_on_another_machine(tmp_path: Path) -> None:
    """results/ is per machine: the archive keeps the local records' data (not the TSDB snapshot, not the
    machine's paths) so a fresh clone's `--sim-only --local-results ARCHIVE` compares the same runs."""
    import yaml

    from harness.fidelity.archive import KEPT_FILES, WORKDIR_MARK

    _, src = matrix(tmp_path)
    results, archive = tmp_path / "results", tmp_path / "archive"
    runner = CliRunner()
    args = ["--reps", "2", "--results", str(results)]
    assert runner.invoke(app, ["fidelity", str(src), "--sim-only", *args, "--out", str(tmp_path / "a")]).exit_code == 0
    workdir = str(tmp_path / "machine-only" / ".bench")
    for cell in ("ds2", "hpa-varga"):  # stand-ins for local records, with what a real one holds besides its data
        local = results / "fid-tiny" / "local" / f"{cell}-r0"
        shutil.copytree(results / "fid-tiny" / "sim" / f"{cell}-r0", local)
        meta = yaml.safe_load((local / "run.yaml").read_text())
        meta["backend"]["workdir"] = workdir
        meta["backend"]["flink_conf"] = {"io.tmp.dirs": f"{workdir}/flink/tmp", "sibling": f"{workdir}-other/x"}
        (local / "run.yaml").write_text(yaml.safe_dump(meta))
        (local / "prometheus-snapshot" / "01ABC").mkdir(parents=True)
        (local / "prometheus-snapshot" / "01ABC" / "chunks").write_bytes(b"\0" * 1000)
        (local / "bench.log").write_text("log\n")
    relabel_as_local(results, src)
    r = runner.invoke(app, ["fidelity", str(src), "--report-only", *args, "--out", str(tmp_path / "a"),
                            "--archive", str(archive)])
    assert r.exit_code == 0, r.output
    assert "archived 2 local record(s)" in r.output
    kept = archive / "fid-tiny" / "local" / "ds2-r0"
    assert sorted(p.name for p in kept.iterdir()) == sorted(f for f in KEPT_FILES if (kept / f).exists())
    assert not (kept / "prometheus-snapshot").exists() and not (kept / "bench.log").exists()
    text = (kept / "run.yaml").read_text()
    assert f"{workdir}/" not in text and f"{WORKDIR_MARK}/flink/tmp" in text
    assert f"{workdir}-other/x" in text  # whole path segments only: a sibling directory is another path
    assert not [p for p in kept.parent.iterdir() if p.name.startswith(".")]  # no temp or old record left
    assert not (archive / "fid-tiny" / "sim").exists()  # the sim side is rebuilt, never archived
    # another machine: no results at all, the archive as the local side
    fresh = tmp_path / "fresh"
    r = runner.invoke(app, ["fidelity", str(src), "--sim-only", "--reps", "2", "--results", str(fresh),
                            "--local-results", str(archive), "--out", str(tmp_path / "b")])
    assert r.exit_code == 0, r.output
    assert not (fresh / "fid-tiny" / "local").exists()  # nothing ran locally, nothing read from --results
    # the archive is read, never written by a run: local cells need --results, a missing archive is named
    r = runner.invoke(app, ["fidelity", str(src), "--reps", "2", "--results", str(fresh), "--local-results",
                            str(archive), "--out", str(tmp_path / "c")])
    assert r.exit_code == 2 and "--sim-only or --report-only" in r.output
    r = runner.invoke(app, ["fidelity", str(src), "--sim-only", "--results", str(fresh), "--local-results",
                            str(tmp_path / "no-such-archive"), "--out", str(tmp_path / "c")])
    assert r.exit_code == 2 and "no such directory" in r.output
    r = runner.invoke(app, ["fidelity", str(src), "--report-only", "--reps", "2", "--results", str(fresh),
                            "--local-results", str(archive), "--archive", str(archive), "--out", str(tmp_path / "c")])
    assert r.exit_code == 2 and "archive's own" in r.output

    def targets(md: Path) -> str:
        text = md.read_text()
        return text[text.index("## Targets per cell"):text.index("## Ranking agreement")]

    assert "| ds2 |" in targets(tmp_path / "b" / "fid-tiny.md")
    assert targets(tmp_path / "b" / "fid-tiny.md") == targets(tmp_path / "a" / "fid-tiny.md")
