"""The live view: runner -> live-status file -> `bench run`'s panel and `bench status` in another shell.

End to end on a sim run: what the file says at each step is what the loop measured and decided then,
the file is visible to another reader while the run goes on, unmeasured values read "n/a" (never 0),
and a file left by a killed process is not shown."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from rich.console import Console
from typer.testing import CliRunner

from harness.config import Experiment
from harness.live import LIVE_DIR, LiveFile, LiveStatus, running
from harness.live_view import live_panel
from harness.runner import run_experiment


def _experiment() -> Experiment:
    return Experiment.model_validate({
        "name": "live", "backend": "sim", "query": "q1", "duration_s": 1200, "seed": 3,
        "pattern": {"name": "cosine"}, "autoscaler": {"name": "ds2"}, "initial_parallelism": 2,
        "loop": {"period_s": 60, "metrics_window_s": 60, "cooldown_s": 120},
    })


class Recording(LiveFile):
    """Keeps every status written, and what another reader of the directory saw at that moment."""

    def __init__(self, directory: Path, status: LiveStatus) -> None:
        self.seen: list[tuple[LiveStatus, list[LiveStatus]]] = []
        super().__init__(directory, status)

    def _write(self) -> None:
        super()._write()
        self.seen.append((self.status, running(self.path.parent.parent)))


def _render(status: LiveStatus) -> str:
    console = Console(width=200, record=True, file=open(os.devnull, "w"))  # noqa: SIM115 - closed with the console
    console.print(live_panel(status))
    return console.export_text()


def test_the_live_file_follows_the_loop_and_another_reader_sees_it(tmp_path: Path) -> None:
    exp = _experiment()
    run_dir = tmp_path / "runs" / "r"
    live = Recording.for_run(tmp_path, exp, run_dir)
    assert isinstance(live, Recording)
    run_experiment(exp, run_dir, live=live)
    steps = [s for s, _ in live.seen if s.phase == "running" and s.t > 0]
    assert len(steps) >= 1200 // 60 - 2
    # every write was visible to another reader of the directory, as this process' run
    assert all(any(r.pid == os.getpid() and r.run_dir == str(run_dir) for r in readers) for _, readers in live.seen)
    # the numbers are the loop's: the record's input rate over the same 60 s window
    ts = pq.read_table(run_dir / "timeseries.parquet").to_pandas()
    rate = ts[ts["metric"] == "input_rate"]
    for s in steps[2:]:
        assert s.duration_s == 1200
        window = rate[(rate["ts"] > s.t - 60) & (rate["ts"] <= s.t)]["value"]
        assert s.input_rate == pytest.approx(window.mean(), rel=0.05)
        assert s.taskmanagers is not None and s.taskmanagers >= 1
        assert all(p >= 1 for p in s.parallelism.values())
    # the last decision shown is the record's last decision-like event up to that step
    events = pq.read_table(run_dir / "events.parquet").to_pandas()
    decided = events[events["kind"].isin(["decision", "action", "not_applied", "decision_skipped"])]
    assert not decided.empty
    final = steps[-1]
    upto = decided[decided["ts"] <= final.t + 1e-9]
    assert final.last_decision is not None
    assert final.last_decision.reason == upto["reason"].iloc[-1]
    assert final.decisions == int((events["kind"] == "decision").sum())
    text = _render(final)
    assert "last decision" in text and final.last_decision.reason[:30] in text.replace("\n", " ")
    live.remove()
    assert running(tmp_path) == []


def test_unmeasured_values_read_n_a_never_zero(tmp_path: Path) -> None:
    live = LiveFile.for_run(tmp_path, _experiment(), tmp_path / "r")
    status = running(tmp_path)[0]
    assert math.isnan(status.input_rate) and math.isnan(status.latency_e2e_s)  # NaN survives the file
    text = _render(status)
    assert "input rate" in text and "n/a rec/s" not in text and "n/a" in text
    assert " 0 rec/s" not in text and " 0 ms" not in text
    live.remove()


def test_a_file_left_by_a_dead_process_is_not_shown_and_is_removed(tmp_path: Path) -> None:
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(dead.stdout)
    live = LiveFile.for_run(tmp_path, _experiment(), tmp_path / "r")
    stale = live.path.with_name(f"{pid}.json")
    stale.write_text(live.status.model_copy(update={"pid": pid}).model_dump_json())
    (tmp_path / LIVE_DIR / "garbage.json").write_text("{not json")
    assert [s.pid for s in running(tmp_path)] == [os.getpid()]
    assert not stale.exists()
    live.remove()


def test_bench_status_shows_the_runs_in_progress(tmp_path: Path) -> None:
    import typer

    from harness.backends.local.commands import register

    app = typer.Typer()
    register(app)

    @app.command()
    def noop() -> None:  # keeps subcommands
        pass

    live = LiveFile.for_run(tmp_path, _experiment(), tmp_path / "r")
    live.update(phase="running", t=300, duration_s=1200)
    res = CliRunner().invoke(app, ["status", "--workdir", str(tmp_path), "--port-offset", "3300"])
    assert res.exit_code == 3  # the stack itself is not up here
    assert "live: ds2 on q1" in res.output and "300 / 1,200 s" in res.output, res.output
    live.remove()
    res = CliRunner().invoke(app, ["status", "--workdir", str(tmp_path), "--port-offset", "3300"])
    assert "no run in progress" in res.output and "ds2 on q1" not in res.output
