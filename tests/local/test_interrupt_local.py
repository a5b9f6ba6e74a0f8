"""Ctrl-C during a real local run, at a random moment (start-up or the loop): `bench run` exits 130,
the record says `interrupted`, and the stack is torn down - no process left, `bench status` clean. Before the
interrupt, `bench status` in another process shows the run's live line (issue 12's live view, on a real run).

Port offset 5400; work directory `$BENCH_INTERRUPT_WORKDIR` or /tmp/bench-interrupt-it. The moment is
drawn from `$BENCH_INTERRUPT_SEED` (default: the clock), and printed, so a failure can be replayed.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml

from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack
from harness.record import find_run_dirs, read_run_record

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_INTERRUPT_WORKDIR", "/tmp/bench-interrupt-it"))
OFFSET = 5400
BENCH = str(Path(sys.executable).with_name("bench"))


def leftovers() -> list[str]:
    marker = str(WORKDIR) + "/"
    return [" ".join(p.info["cmdline"][:3]) for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and marker in " ".join(p.info["cmdline"]) and p.pid != os.getpid()]


def test_sigint_at_a_random_moment_of_a_local_run(tmp_path: Path) -> None:
    seed = int(os.environ.get("BENCH_INTERRUPT_SEED", time.time()))
    delay = random.Random(seed).uniform(15.0, 75.0)
    print(f"BENCH_INTERRUPT_SEED={seed}: SIGINT {delay:.1f} s after start")
    f = tmp_path / "e.yaml"
    f.write_text(yaml.safe_dump({
        "name": "it-interrupt", "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": 1000, "duration_min": 20}},
        "autoscaler": {"name": "static"}, "duration_s": 300,
        "loop": {"period_s": 10, "metrics_window_s": 10, "cooldown_s": 0},
        "local": {"workdir": str(WORKDIR), "port_offset": OFFSET},
    }))
    results = tmp_path / "r"
    proc = subprocess.Popen([BENCH, "run", str(f), "--results", str(results)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        time.sleep(delay)
        assert proc.poll() is None, proc.communicate()[0]
        # the run, seen from another shell while it goes on: `bench status` shows its live line
        during = subprocess.run([BENCH, "status", "--workdir", str(WORKDIR), "--port-offset", str(OFFSET)],
                                capture_output=True, text=True, timeout=60)
        sent = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole foreground group
        out, _ = proc.communicate(timeout=240)
        took = time.monotonic() - sent
        left = leftovers()  # what the interrupted run itself left behind (before the safety net below)
    finally:
        if proc.poll() is None:
            proc.kill()
        LocalStack(LocalConfig(workdir=WORKDIR, port_offset=OFFSET)).down()
    assert proc.returncode == 130, out
    assert "it-interrupt: static on q1 (local" in during.stdout, during.stdout + during.stderr
    assert "interrupted: record" in out and "local stack was torn down" in out and "Traceback" not in out, out
    (run_dir,) = find_run_dirs(results)
    rec = read_run_record(run_dir)
    assert rec.status.startswith("interrupted") and rec.meta["status"] == "interrupted"
    assert rec.meta["identity"]["config_hash"]
    assert took < 180, f"teardown took {took:.0f} s"
    assert left == []
    status = subprocess.run([BENCH, "status", "--workdir", str(WORKDIR), "--port-offset", str(OFFSET)],
                            capture_output=True, text=True, timeout=60)
    assert "running" not in status.stdout.replace("not running", ""), status.stdout
