"""Ctrl-C on a sim matrix at random moments: stop scheduling, in-flight runs finish or record
`interrupted` within seconds, "N done, M left: rerun to resume", exit 130; a rerun resumes.
Interrupted runs are neither successes nor crashes in the analysis."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from harness.analysis.pipeline import analyze
from harness.record import find_run_dirs
from harness.run_status import RunStatus

pytestmark = pytest.mark.slow

BENCH = str(Path(sys.executable).with_name("bench"))
MATRIX = """
name: tiny
base: {backend: sim, query: q11, pattern: {name: cosine}, autoscaler: ds2, initial_parallelism: 2, duration_s: 3000}
axes:
  autoscaler: [ds2, dhalion, hpa-cpu]
repetitions: 3
"""


def statuses(results: Path) -> list[RunStatus]:
    return [RunStatus.parse((d / "status").read_text()) for d in find_run_dirs(results)]


def completed(results: Path) -> int:
    return sum(s == RunStatus.COMPLETED for s in statuses(results)) if results.exists() else 0


def interrupt_at_random(tmp_path: Path, rng: random.Random, workers: str) -> tuple[int, str, float]:
    """SIGINT at a random moment while runs are in flight, timed by the matrix's own progress.

    The moment is when 1 to 3 more runs of this attempt have completed (drawn), plus a jitter of up to
    0.2 s: however fast, loaded or uneven the machine, 9 runs at most 2 at once leave runs in flight
    or queued then. (Timed as 1-2.5 first runs instead, a fresh clone's first run, its caches cold,
    took so much longer than the rest that the whole matrix once finished before the signal.)"""
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX)
    results = tmp_path / "r"
    # a terminal's Ctrl-C goes to the whole process group: so does ours
    proc = subprocess.Popen([BENCH, "matrix", str(m), "--results", str(results), "--workers", workers],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    target = completed(results) + rng.randint(1, 3)
    while proc.poll() is None and time.monotonic() < deadline and completed(results) < target:
        time.sleep(0.01)
    time.sleep(rng.uniform(0.0, 0.2))
    sent = time.monotonic()
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out, time.monotonic() - sent


@pytest.mark.parametrize("workers", ["2", "1"])
def test_sigint_at_random_points_of_a_sim_matrix(tmp_path: Path, workers: str) -> None:
    rng = random.Random(10 + int(workers))
    interrupted_once = False
    for attempt in range(2 if workers == "2" else 1):
        if attempt and 9 - completed(tmp_path / "r") < 6:
            break  # too few runs left for the signal to be sure to land while they run (3 more complete first)
        code, out, took = interrupt_at_random(tmp_path, rng, workers)
        got = statuses(tmp_path / "r")
        assert set(got) <= {RunStatus.COMPLETED, RunStatus.INTERRUPTED}, out  # never `failed` for a Ctrl-C
        if code == 0 or got == [RunStatus.COMPLETED] * 9:  # the matrix finished before the signal landed
            break
        interrupted_once = True
        assert code == 130, out
        assert "left: rerun to resume" in out and "Traceback" not in out, out
        assert took < 12, f"took {took:.1f} s to stop after SIGINT (noisy 2-core host; 5 s for the runs)"
        done = sum(s == RunStatus.COMPLETED for s in got)
        assert f"{done} done, {9 - done} left" in out, out
    assert interrupted_once  # the first signal always lands while the matrix works
    # resume: only what is left runs, and then every run is complete
    res = subprocess.run([BENCH, "matrix", str(tmp_path / "m.yaml"), "--results", str(tmp_path / "r"),
                          "--workers", workers], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    assert statuses(tmp_path / "r") == [RunStatus.COMPLETED] * 9


def test_interrupted_runs_are_left_out_of_means_and_crash_rates_and_counted(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX.replace("repetitions: 3", "repetitions: 2").replace("duration_s: 3000", "duration_s: 1200"))
    res = subprocess.run([BENCH, "matrix", str(m), "--results", str(tmp_path), "--workers", "2"],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    full = analyze(tmp_path, engine="pandas").cells.set_index("autoscaler")
    victim = tmp_path / "tiny" / "ds2-r1"
    (victim / "status").write_text("interrupted: SIGINT at t=600 s\n")
    out = analyze(tmp_path, engine="pandas")
    cells = out.cells.set_index("autoscaler")
    assert cells.loc["ds2", "runs"] == 1 and cells.loc["ds2", "interrupted"] == 1
    assert cells.loc["dhalion", "runs"] == 2 and cells.loc["dhalion", "interrupted"] == 0
    runs = out.result.summary.set_index("run_id")
    assert cells.loc["ds2", "tm_avg"] == pytest.approx(runs.loc["tiny/ds2-r0", "tm_avg"])
    assert cells.loc["dhalion", "tm_avg"] == pytest.approx(full.loc["dhalion", "tm_avg"])
    crash = pd.read_csv(tmp_path / "analysis" / "crash_rates.csv").set_index("autoscaler")
    assert crash.loc["ds2", "runs"] == 1 and crash.loc["ds2", "interrupted"] == 1
    assert crash.loc["ds2", "crash_rate"] == 0.0 and not runs.loc["tiny/ds2-r1", "failed"]
    assert out.interrupted == 1


def started_matrix(tmp_path: Path, duration_s: int) -> tuple[subprocess.Popen[str], Path]:
    """The tiny matrix with runs of `duration_s`, half a second after it took its lock (runs in flight)."""
    m = tmp_path / "m.yaml"
    m.write_text(MATRIX.replace("duration_s: 3000", f"duration_s: {duration_s}"))
    results = tmp_path / "r"
    proc = subprocess.Popen([BENCH, "matrix", str(m), "--results", str(results), "--workers", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lock = results / "tiny" / ".lock"
    deadline = time.monotonic() + 120
    while proc.poll() is None and not lock.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    return proc, results


def read_until(proc: subprocess.Popen[str], text: str, timeout_s: float) -> str:
    """The process' output up to the line that contains `text` (a thread reads, so the wait has a deadline)."""
    seen: list[str] = []
    found = threading.Event()

    def reader() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            seen.append(line)
            if text in line:
                found.set()
                return
        found.set()  # the output ended first

    threading.Thread(target=reader, daemon=True).start()
    found.wait(timeout_s)
    return "".join(seen)


def test_a_second_ctrl_c_aborts_at_once(tmp_path: Path) -> None:
    # the second Ctrl-C comes as soon as the first was acknowledged, while the matrix still stops its in-flight
    # runs (a fixed 0.2 s pause raced them: on a fast machine the stop was over and the process had exited)
    proc, _results = started_matrix(tmp_path, 172800)
    os.killpg(proc.pid, signal.SIGINT)
    first = read_until(proc, "interrupt again to abort at once", 30)
    assert "interrupt again to abort at once" in first, first
    sent = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=60)
    out = first + rest
    assert proc.returncode == 130, out
    assert "aborted by a second interrupt" in out and "Traceback" not in out, out
    assert time.monotonic() - sent < 3.0


def test_sigterm_stops_a_matrix_like_a_first_ctrl_c(tmp_path: Path) -> None:
    """SIGTERM (what a supervisor or `kill PID` sends, to the matrix process only) is a first Ctrl-C:
    scheduling stops, runs in flight finish or record `interrupted`, "N done, M left", exit 130."""
    proc, results = started_matrix(tmp_path, 8400)  # 9 long runs, 2 at once
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    got = statuses(results)
    assert set(got) <= {RunStatus.COMPLETED, RunStatus.INTERRUPTED}, out
    if got == [RunStatus.COMPLETED] * 9:  # the whole matrix finished within half a second: nothing to stop
        assert proc.returncode == 0, out
        return
    assert proc.returncode == 130, out
    done = sum(s == RunStatus.COMPLETED for s in got)
    assert f"{done} done, {9 - done} left: rerun to resume" in out and "Traceback" not in out, out
    assert "SIGTERM" in out, out


def _orphan(marks: str, parent_pid: int) -> None:
    """Runs in a worker whose parent exits first: it asks to die with the parent only once orphaned."""
    from harness.interrupts import die_with_parent

    out = Path(marks)
    (out / "pid").write_text(str(os.getpid()))
    while os.getppid() == parent_pid:  # the parent is gone once this worker is re-parented
        time.sleep(0.01)
    die_with_parent()
    (out / "survived").write_text("yes")


def _short_lived_parent(marks: str) -> None:
    import multiprocessing

    multiprocessing.get_context("fork").Process(target=_orphan, args=(marks, os.getpid())).start()
    os._exit(0)  # no join: the worker outlives this process


def test_a_worker_whose_parent_died_before_it_asked_to_die_with_it_exits(tmp_path: Path) -> None:
    import multiprocessing

    parent = multiprocessing.get_context("fork").Process(target=_short_lived_parent, args=(str(tmp_path),))
    parent.start()
    parent.join()
    while not (tmp_path / "pid").exists():
        time.sleep(0.01)
    pid = int((tmp_path / "pid").read_text())
    while Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]:
        time.sleep(0.01)
    assert not (tmp_path / "survived").exists()
