"""Injected faults on the simulator: every kind is an event, modelled as the real outage, and analysed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from harness.analysis.pipeline import analyze
from harness.cli import app
from harness.config import ConfigError, Experiment, validate_model
from harness.faults import FaultFlagError, parse_fault_flag
from harness.record import read_run_record
from harness.runner import run_experiment
from harness.vocabulary import Metric

BASE = {"name": "f", "backend": "sim", "query": "q1", "pattern": {"name": "constant",
        "params": {"rate": 100000, "duration_min": 15}}, "autoscaler": {"name": "ds2"}, "duration_s": 800,
        "initial_parallelism": 2, "loop": {"period_s": 15, "metrics_window_s": 15, "cooldown_s": 0},
        # the fault machinery, not q1's measured costs: a calibrated task-manager start-up defers the first fault
        "sim": {"profile": "first_guess"}}
FAULTS = [{"kind": "kill-taskmanager", "at_s": 100}, {"kind": "kill-jobmanager", "at_s": 200},
          {"kind": "restart-kafka", "at_s": 300, "for_s": 10}, {"kind": "stop-prometheus", "at_s": 400, "for_s": 60},
          {"kind": "pause-generator", "at_s": 550, "for_s": 30}]


def test_fault_flag_parses_and_names_what_is_valid() -> None:
    assert parse_fault_flag("kill-taskmanager@300") == {"kind": "kill-taskmanager", "at_s": 300.0}
    assert parse_fault_flag("stop-prometheus@600+60") == {"kind": "stop-prometheus", "at_s": 600.0, "for_s": 60.0}
    for bad in ("kill-taskmanager", "oops@3", "stop-prometheus@x", "kill-jobmanager@1.2.3"):
        with pytest.raises(FaultFlagError, match="--fault"):
            parse_fault_flag(bad)


@pytest.mark.parametrize("fault, needle", [
    ({"kind": "stop-prometheus", "at_s": 10}, "needs for_s"),
    ({"kind": "kill-taskmanager", "at_s": 10, "for_s": 5}, "instantaneous"),
    ({"kind": "kill-taskmanager", "at_s": -1}, "faults.0.at_s"),
    ({"kind": "melt-cpu", "at_s": 1}, "faults.0.kind"),
    ({"kind": "kill-taskmanager", "at_s": 900}, "after duration_s"),
])
def test_bad_faults_name_the_field(fault: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        validate_model(Experiment, {**BASE, "faults": [fault]}, "e.yaml")
    with pytest.raises(ConfigError, match="local and sim"):
        validate_model(Experiment, {**BASE, "backend": "k8s", "faults": [FAULTS[0]]}, "e.yaml")


@pytest.fixture(scope="module")
def faulty(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("faults")
    exp = Experiment.model_validate({**BASE, "faults": FAULTS})
    run_experiment(exp, results / "f" / "default-r0")
    return results


def test_every_fault_is_an_event_and_the_run_completes_flagged(faulty: Path) -> None:
    rec = read_run_record(faulty / "f" / "default-r0")
    assert rec.completed and rec.meta["flagged"] and rec.meta["injected_faults"] == 5
    injected = [f for f in rec.events_of("fault") if f.get("injected")]
    assert [f["fault_kind"] for f in injected] == [f["kind"] for f in FAULTS]
    assert [f["ts"] for f in injected] == [f["at_s"] for f in FAULTS]
    recovered = {r["fault_id"]: r for r in rec.events_of("recovery")}
    assert set(recovered) == {0, 1, 2}  # the outages the backend recovers from
    assert recovered[1]["ts"] - injected[1]["ts"] == pytest.approx(45.0)
    ended = [p for p in rec.events_of("phase") if p["reason"].startswith("fault ended")]
    assert [p["fault_kind"] for p in ended] == ["restart-kafka", "stop-prometheus", "pause-generator"]


def test_outages_are_modelled(faulty: Path) -> None:
    rec = read_run_record(faulty / "f" / "default-r0")
    proc = rec.series(Metric.PROCESSING)
    assert proc[(proc.index > 105) & (proc.index <= 130)].max() == 0  # TM recovery: no processing
    # recovered: processing again, except while a rescale of its own pauses the job (noisy readings
    # make DS2 act at cooldown 0)
    after = proc[(proc.index > 140) & (proc.index < 200)]
    paused = [(a["ts"], a["ts"] + a["downtime_s"] + 5.0) for a in rec.events_of("action")]
    running = after[[not any(t0 < t <= t1 for t0, t1 in paused) for t in after.index]]
    assert len(running) >= 5 and running.min() == 1
    rate = rec.series(Metric.INPUT_RATE)
    assert rate[(rate.index > 555) & (rate.index <= 580)].max() == 0  # paused generator: nothing offered
    assert rate[(rate.index > 305) & (rate.index <= 320)].max() == 0  # broker down: nothing produced
    assert rate[rate.index > 600].min() > 0
    lat = rec.series(Metric.LATENCY_KAFKA)  # Prometheus down: no samples at all (unknown, not zero)
    assert lat[(lat.index > 400) & (lat.index <= 460)].empty and not lat[lat.index > 465].empty
    par = rec.series(Metric.PARALLELISM, "map")  # the harness knows the parallelism itself
    assert not par[(par.index > 400) & (par.index <= 460)].empty
    # the loop is blind: no decision rests on the outage's snapshots (skipped, naming the reason)
    assert not [d for d in rec.events_of("decision") if 400 <= d["ts"] < 460]
    skipped = [d for d in rec.events_of("decision_skipped") if 400 <= d["ts"] < 460]
    assert skipped and all("prometheus stopped" in d["reason"] or "prometheus" in str(d) for d in skipped)


def test_analysis_reports_recovery_per_fault_kind_and_no_crash(faulty: Path) -> None:
    out = analyze(faulty, engine="pandas")
    row = out.result.summary.iloc[0]
    assert row.flagged and not row.crashed and row.injected_faults == 5
    rec = out.fault_recovery.set_index("fault_kind")
    assert set(rec.index) == {f["kind"] for f in FAULTS}
    assert (rec["recovered"] == 1).all()
    assert rec.loc["kill-jobmanager", "recovery_s"] >= 45  # at least the outage itself
    assert rec.loc["pause-generator", "recovery_s"] >= 30
    crash = (faulty / "analysis" / "crash_rates.csv").read_text()
    assert "ds2,1,1,0,0.0,0" in crash  # runs, flagged, crashed, crash_rate, interrupted


def test_fault_flag_on_the_command_line(tmp_path: Path) -> None:
    runner = CliRunner()
    args = ["run", "--backend", "sim", "--query", "q1", "--pattern", "cosine", "--duration", "600",
            "--results", str(tmp_path / "r")]
    res = runner.invoke(app, [*args, "--fault", "stop-prometheus@100+60", "--fault", "kill-taskmanager@300"])
    assert res.exit_code == 0, res.output
    (run_dir,) = (tmp_path / "r").glob("*/*")
    assert [f["kind"] for f in read_run_record(run_dir).meta["config"]["faults"]] == \
        ["stop-prometheus", "kill-taskmanager"]
    res = runner.invoke(app, [*args, "--fault", "stop-prometheus@100"])
    assert res.exit_code == 2 and "for_s" in res.output


def test_an_outage_still_open_at_the_end_is_ended(tmp_path: Path) -> None:
    exp = Experiment.model_validate({**BASE, "duration_s": 300,
                                     "faults": [{"kind": "stop-prometheus", "at_s": 250, "for_s": 600}]})
    rec = read_run_record(run_experiment(exp, tmp_path / "f" / "default-r0"))
    assert rec.completed
    ended = [p for p in rec.events_of("phase") if p["reason"] == "fault ended: stop-prometheus"]
    assert len(ended) == 1 and ended[0]["ts"] <= 300
