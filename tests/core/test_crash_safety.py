"""Crash-safety, proven: `bench matrix` SIGKILLed at 20 random moments and resumed each time ends with
exactly its runs, no half-written or duplicated record, and the same analysis as an uninterrupted run."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from harness.analysis.aggregate import CELL_KEYS, compare_frames
from harness.analysis.pipeline import analyze
from harness.record import find_run_dirs

pytestmark = pytest.mark.slow

BENCH = str(Path(sys.executable).with_name("bench"))
KILLS = 20
MATRIX = """
name: crash
base: {backend: sim, query: q1, pattern: {name: cosine}, autoscaler: ds2, initial_parallelism: 2, duration_s: 1500}
axes:
  autoscaler: [ds2, dhalion, hpa-cpu]
repetitions: 4
"""
RUNS = 12


def matrix(m: Path, results: Path, stderr: int = subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen([BENCH, "matrix", str(m), "--results", str(results), "--workers", "2"],
                            stdout=subprocess.DEVNULL, stderr=stderr, text=True)


def completed(results: Path) -> int:
    statuses = [r / "status" for r in find_run_dirs(results)] if results.exists() else []
    return sum(s.exists() and s.read_text().strip() == "completed" for s in statuses)


def timed_after_lock(m: Path, results: Path) -> float:
    """Seconds from the matrix taking its lock to its exit: this machine's time for the whole matrix."""
    proc = matrix(m, results)
    lock = results / "crash" / ".lock"
    while proc.poll() is None and not lock.exists():
        time.sleep(0.01)
    locked = time.monotonic()
    _, stderr = proc.communicate(timeout=600)
    assert proc.returncode == 0, stderr
    return time.monotonic() - locked


def test_sigkill_at_20_random_moments_then_resume(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX)
    killed_dir, reference = tmp_path / "killed", tmp_path / "reference"
    # kill moments are drawn in the matrix's own progress, so they fall while it works on a fast machine
    # as on a loaded one: after a random number of the runs left have completed (at least two still to
    # go), then a random part of half a run's time (this machine's, measured by the reference matrix)
    per_run_pair = timed_after_lock(m, reference) / (RUNS / 2)  # two runs at once
    rng = random.Random(2026)
    lock = killed_dir / "crash" / ".lock"
    kills = attempts = 0
    while kills < KILLS and attempts < 3 * KILLS:
        attempts += 1
        done = completed(killed_dir)
        if done == RUNS:
            break
        before = lock.stat().st_mtime_ns if lock.exists() else None
        # no pipe: a killed matrix's workers may outlive it for a run (the resume copes), and a pipe they
        # hold open would make waiting for the killed process wait for them
        proc = matrix(m, killed_dir, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:  # wait for the lock: work begins
            if lock.exists() and lock.stat().st_mtime_ns != before:
                break
            time.sleep(0.01)
        locked = time.monotonic()
        target = done + rng.randint(0, max(0, RUNS - done - 3))  # at least one pair of runs still to go
        while proc.poll() is None and completed(killed_dir) < target:
            time.sleep(0.01)
        # the machine may have got faster since the reference (a shared host's load comes and goes): where
        # this attempt finished runs, its own pace is the better measure, so a kill still falls before the
        # remaining pair of runs is done
        finished_here = completed(killed_dir) - done
        if finished_here >= 2:
            per_run_pair = min(per_run_pair, (time.monotonic() - locked) / (finished_here / 2))
        time.sleep(rng.uniform(0.0, 0.5) * per_run_pair)
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait(timeout=60)
    assert kills >= KILLS // 2  # most moments fell while the matrix worked
    final = matrix(m, killed_dir)
    _, stderr = final.communicate(timeout=600)
    assert final.returncode == 0, stderr

    # exactly its runs, each one complete and readable, nothing half-written left behind
    runs = find_run_dirs(killed_dir)
    assert [r.name for r in runs] == sorted(f"{a}-r{i}" for a in ("ds2", "dhalion", "hpa-cpu") for i in range(4))
    for r in runs:
        assert (r / "status").read_text().strip() == "completed"
        assert yaml.safe_load((r / "run.yaml").read_text())["identity"]["config_hash"]
        pq.read_table(r / "timeseries.parquet")
        pq.read_table(r / "events.parquet")
    assert not [p for p in (killed_dir / "crash").iterdir() if p.name.startswith(".") and p.is_dir()]

    # and the same numbers as a matrix that was never killed
    a, b = analyze(killed_dir, engine="pandas"), analyze(reference, engine="pandas")
    assert len(a.result.summary) == len(b.result.summary) == RUNS
    assert compare_frames(a.result.summary, b.result.summary, ["run_id"]) == []
    assert compare_frames(a.cells, b.cells, CELL_KEYS) == []
