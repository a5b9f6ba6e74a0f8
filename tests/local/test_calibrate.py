"""`bench calibrate --quick` end to end on the real stack, reduced to q1 at half-length phases.

Brings up Kafka, Flink and Prometheus (port offset 7100, work directory $BENCH_CALIBRATE_WORKDIR or
/tmp/bench-calibrate-it), measures q1 through every quick phase (ladder, overload, a lower CPU share per
operator, in-place and savepoint rescales) and checks the profile it writes: numbers a user relies
on, in physically possible ranges and consistent with each other, plus its provenance; then that a
second run resumes from the recorded samples without measuring again. About 3 minutes; in `make test`.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import psutil
import pytest
import yaml
from typer.testing import CliRunner

from harness.calibrated_profile import load_profile, profile_file_name
from harness.calibration import fit
from harness.cli import app

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.calibration_e2e]  # make test-calibrate

WORKDIR = Path(os.environ.get("BENCH_CALIBRATE_WORKDIR", "/tmp/bench-calibrate-it"))


def test_calibrate_quick_q1_writes_a_consistent_profile(tmp_path: Path) -> None:
    state, out = tmp_path / "state", tmp_path / "profiles"
    args = ["calibrate", "--query", "q1", "--quick", "--time-scale", "0.5", "--state-dir", str(state),
            "--out", str(out), "--workdir", str(WORKDIR), "--port-offset", "7100"]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    prof = load_profile("q1", out)
    assert prof is not None
    # provenance: when, where, what, how busy the host was
    pv = prof.provenance
    assert pv.flink_version == "2.2.1" and pv.kafka_version == "4.1.1" and pv.taskmanager_cpu_quota == 0.25
    assert pv.cpu_model and pv.host_cpus == os.cpu_count() and "calibrate" in pv.command and pv.quick
    assert pv.taskmanager_jit == "c1"  # the default, which the runs use too
    assert pv.taskmanager_memory == "768m"  # the local stack's default, recorded
    assert pv.host_speed_sha256_mb is not None and pv.host_speed_sha256_mb > 0  # the machine's speed per CPU-second
    assert math.isfinite(pv.host_load.before_1m) and math.isfinite(pv.host_load.during_mean_1m)
    assert 0.0 <= pv.host_load.host_cpu_busy <= 1.0
    src, mp, sink = (prof.operators[n] for n in ("bids_source", "map", "sink"))
    # what the run measured: the sources' rate when overloaded at share 1.0, and every rate an operator
    # was seen to process at share 1.0 (the profile keeps them as its share points)
    sat_src = [pt.capacity for pt in src.shares if pt.saturated and pt.share == 1.0]
    assert sat_src, "the overload phase saturated no source at share 1.0"
    # a 0.25-CPU source parses thousands to tens of thousands of CSV bids per second, not millions
    assert 500 < max(sat_src) < 500_000
    # the fit keeps the median of what was seen at its limit (fit.envelope), no wild lift
    assert 0.99 * float(np.median(sat_src)) <= src.capacity < 5 * max(sat_src)
    for op in (src, mp, sink):
        pooled = {pt.share: pt.capacity for pt in fit.envelope(op.shares, 0.25)}
        seen = pooled.get(1.0) or max(pt.capacity for pt in op.shares if pt.share == 1.0 and not pt.fed_by_several)
        assert op.capacity >= 0.99 * seen, (op, seen)  # at least its median saturation, or what it was seen doing
        # less CPU, less capacity: the fitted line is increasing and has no negative overhead
        assert op.capacity_fit.capacity(0.25 * 0.25) < op.capacity_fit.capacity(0.5 * 0.25) < op.capacity
        assert op.capacity_fit.overhead_cores >= 0
    # CPU per record: measured for the map; a Kafka source polls at its quota whatever it reads, so its
    # slope may be unmeasurable (NaN: unknown, never 0; measured 2026-11-26: r2 0.09, idle 0.16 cores)
    assert 0 < mp.cpu.cores_per_record < 1e-3
    assert math.isnan(src.cpu.cores_per_record) or 0 < src.cpu.cores_per_record < 1e-3
    assert src.selectivity == pytest.approx(1.0, abs=0.05) and mp.selectivity == pytest.approx(1.0, abs=0.05)
    assert sink.selectivity == pytest.approx(0.0, abs=0.01)
    # Flink's busy time against the true load: fitted for every operator, a possible reading at no and at full
    # load; the sink, a tenth of the work per record, reads less busy than the source. (A Kafka source's busy
    # time need not rise with its load: measured flat at 0.3-0.45 on a 2,000 MB/s SHA-256 host at 0.25 CPU.)
    for op in (src, mp, sink):
        b = op.readings.busy
        assert b.n > 0 and -0.1 <= b.mean(0.0) <= 1.1 and -0.1 <= b.mean(1.0) <= 1.1, b
    assert sink.readings.busy.mean(0.5) < src.readings.busy.mean(0.5)
    # the same moderate load before the rescales and after each scale-down: the error a deployment keeps,
    # measured from those deployments (a spread of means, so it cannot exceed the readings' own range)
    for op in (src, mp):
        b = op.readings.busy
        assert b.held_n >= 3 and 0.0 <= b.held_sd < 0.5, b
    assert prof.meters.interval_s == pytest.approx(5.0, abs=1.5)
    # rescaling: a task manager's JVM takes seconds to register; both methods stop the job for a while
    assert 1.0 < prof.taskmanager_startup_s.mean < 120.0
    assert {"in_place", "savepoint"} <= set(prof.rescale_downtime)
    for model in prof.rescale_downtime.values():
        assert 0.0 < model.base_s < 120.0 and model.points
        # every rescale knows the state it moved (a resubmitted job's first checkpoint is awaited): never NaN
        assert all(math.isfinite(s) and s >= 0 for s, _ in model.points + model.down_points), model
    # a fresh task manager's warm-up: the sources' rate while the new JVMs warm up, over the warm rate
    w = prof.warmup
    assert w is not None and w.cores == pytest.approx(0.25) and w.warm_rate == pytest.approx(max(sat_src), rel=0.5)
    assert len(w.points) >= 3 and all(0.0 <= f < 1.5 for _, f in w.points)
    assert 0.0 <= w.initial_fraction <= 1.0 and w.tau_cpu_s > 0
    # planned from the warm rate measured before it, the cold start was overloaded: its curve is the job's
    assert w.saturated, "the cold start took all it was offered: its curve is the offered rate, not the job's"
    # the written file carries the command in its header and reads back as YAML
    assert "bench calibrate" in (out / profile_file_name("q1", 0.25)).read_text().splitlines()[0]
    assert yaml.safe_load((out / profile_file_name("q1", 0.25)).read_text())["query"] == "q1"
    # resumable: the samples are kept, a second run measures nothing (no stack, samples untouched) and refits
    samples = next(state.glob("*/q1/samples.parquet"))
    before = samples.stat().st_mtime_ns
    r2 = CliRunner().invoke(app, args)
    assert r2.exit_code == 0, r2.output
    assert "measured in" not in r2.output and samples.stat().st_mtime_ns == before
    again = load_profile("q1", out)
    assert again is not None and again.operators["map"].capacity == pytest.approx(mp.capacity, rel=1e-6)
    assert again.provenance.host_speed_sha256_mb == pv.host_speed_sha256_mb  # the measuring machine's, not the refit's
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if str(WORKDIR) in " ".join(p.info["cmdline"] or [])]
    assert not leftovers, [p.info["cmdline"][:3] for p in leftovers]
