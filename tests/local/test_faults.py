"""`bench down` after a harness crash: the load generator it started is stopped too.

(The job manager and task manager crash-and-recover runs that lived here are now injected faults
of the one shared fault run in `test_fault_injection.py`, which checks the same recovery events,
restored checkpoint and processing outage.)
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

HARNESS_THAT_DIES = r"""
import sys, time
from pathlib import Path
from harness.backends.local import jobjar
from harness.backends.local.backend import LocalBackend
from harness.backends.local.config import LocalConfig
from harness.backends.local.stack import LocalStack
from harness.topology import load_topology
from workloads.patterns import PatternConfig, build_pattern

stack = LocalStack(LocalConfig(workdir=Path(sys.argv[1]), port_offset=int(sys.argv[2])))
stack.kafka.start(stack.ensure_installed())
deadline = time.monotonic() + 120
while not stack.kafka.healthy():
    assert time.monotonic() < deadline, "kafka not healthy"
    time.sleep(0.5)
stack.ensure_topics(["bids"], 2)
backend = LocalBackend(stack)  # the generator is started exactly as a run starts it
backend.stack, backend.topology, backend.jar = stack, load_topology("q1"), jobjar.ensure_jar()
pattern = build_pattern(PatternConfig(name="constant", params={"rate": 500, "duration_min": 30}), 1, "q1")
gen = backend._start_generator(pattern, 1)
print(gen.pid, flush=True)
time.sleep(3600)
"""


def processes_naming(workdir: Path) -> list[int]:
    """Pids whose command line mentions `workdir` (what `bench down` must leave none of)."""
    marker = (str(workdir) + "/").encode()
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker in (entry / "cmdline").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                pass
    return out


def test_down_stops_the_generator_of_a_harness_that_died(tmp_path: Path) -> None:
    import subprocess
    import sys

    from harness.backends.local.backend import GENERATOR
    from harness.backends.local.supervisor import Supervisor

    workdir, offset = tmp_path / "stack", 5100
    harness = subprocess.Popen([sys.executable, "-c", HARNESS_THAT_DIES, str(workdir), str(offset)],
                               stdout=subprocess.PIPE, text=True)
    try:
        line = harness.stdout.readline() if harness.stdout else ""
        assert line.strip().isdigit(), f"the harness did not start a generator (exit {harness.poll()})"
        gen_pid = int(line)
        info = Supervisor(workdir).get(GENERATOR)
        assert info is not None and info.pid == gen_pid  # known to the stack, not only to its starter
        harness.kill()  # the harness dies without stopping anything
        harness.wait(10)
        assert Path(f"/proc/{gen_pid}").exists() and gen_pid in processes_naming(workdir)
        down = subprocess.run([str(Path(sys.executable).parent / "bench"), "down", "--workdir", str(workdir),
                               "--port-offset", str(offset)], capture_output=True, text=True, timeout=180)
        assert down.returncode == 0, down.stdout + down.stderr
        assert not Path(f"/proc/{gen_pid}").exists() or _zombie(gen_pid)
        assert processes_naming(workdir) == []
    finally:
        if harness.poll() is None:
            harness.kill()
        stack_down(workdir, offset)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def stack_down(workdir: Path, offset: int) -> None:  # whatever the test left behind
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack

    LocalStack(LocalConfig(workdir=workdir, port_offset=offset)).down(purge=True)
