"""Start, find and stop the stack's processes, so that nothing outlives `bench down`.

Every service runs in its own session (process group == pid), detached from the CLI that started it,
because `bench up` returns while the stack keeps running. Its pidfile under <workdir>/run/ records the
pid and the kernel start time, so a recycled pid is never mistaken for ours. Stopping sends SIGTERM to
the whole group, waits, then SIGKILLs; `sweep()` finally kills any process whose command line mentions
the work directory, which catches children that escaped their group.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.backends.local.errors import StackError

SWEPT_PROGRAMS = (b"java", b"prometheus")


@dataclass(frozen=True)
class ProcessInfo:
    name: str
    pid: int
    start_ticks: int
    log: str


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """True if something accepts or holds `port` (bind test, so it also sees listeners on 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True if a listener accepts a TCP connection on `port`."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def check_ports_free(ports: dict[str, int]) -> None:
    """Raise StackError naming the first port in use (and what it was meant for)."""
    for what, port in ports.items():
        if port_in_use(port):
            raise StackError(
                f"port {port}",
                f"127.0.0.1:{port} ({what}) is already in use; stop whatever holds it "
                "(maybe another stack: `bench down`) or choose another --port-offset",
            )


def wait_ports_free(ports: dict[str, int], timeout_s: float = 30.0) -> None:
    """`check_ports_free`, waiting up to `timeout_s` first: a port the stopped or killed process held
    may take a moment to be free."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            check_ports_free(ports)
            return
        except StackError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _start_ticks(pid: int) -> int | None:
    """Kernel start time of `pid` (field 22 of /proc/pid/stat), None if it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.25) -> bool:
    """Poll `check` until it is true or `timeout` passes; returns the last outcome."""
    deadline = time.monotonic() + timeout
    while True:
        if check():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


class Supervisor:
    """Owns <workdir>/run/*.pid; one pidfile per service name (e.g. kafka, jobmanager, tm-3)."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.run_dir = workdir / "run"

    def _pidfile(self, name: str) -> Path:
        return self.run_dir / f"{name}.pid"

    def start(
        self,
        name: str,
        cmd: list[str],
        log: Path,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        cgroup_procs: Path | None = None,
    ) -> ProcessInfo:
        """Start `cmd` detached in its own session; if `cgroup_procs` is given the process joins that
        cgroup before exec, so every thread the JVM later spawns is bounded by it."""
        if self.get(name) is not None:
            raise StackError(name, f"already running (pidfile {self._pidfile(name)})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        log.parent.mkdir(parents=True, exist_ok=True)
        if cgroup_procs is not None:
            cmd = ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', str(cgroup_procs), *cmd]
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
            )
        ticks = None
        for _ in range(40):  # /proc entry appears immediately; retry only for exotic kernels
            ticks = _start_ticks(proc.pid)
            if ticks is not None:
                break
            time.sleep(0.05)
        if ticks is None:
            raise StackError(name, f"exited immediately; see {log}")
        info = ProcessInfo(name=name, pid=proc.pid, start_ticks=ticks, log=str(log))
        self._pidfile(name).write_text(json.dumps(info.__dict__))
        return info

    def adopt(self, name: str, pid: int, log: Path) -> ProcessInfo:
        """Record a process someone else started (e.g. the load generator) under `name`, so `stop`,
        `stop_many` and therefore `bench down` find it even after the harness that started it died.
        It should lead its own process group (start_new_session), as ours do."""
        ticks = _start_ticks(pid)
        if ticks is None:
            raise StackError(name, f"process {pid} is not running; see {log}")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        info = ProcessInfo(name=name, pid=pid, start_ticks=ticks, log=str(log))
        self._pidfile(name).write_text(json.dumps(info.__dict__))
        return info

    def get(self, name: str) -> ProcessInfo | None:
        """The live process behind `name`'s pidfile, or None (a stale pidfile is removed)."""
        path = self._pidfile(name)
        try:
            info = ProcessInfo(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            return None
        if _start_ticks(info.pid) != info.start_ticks:
            path.unlink(missing_ok=True)
            return None
        return info

    def names(self, prefix: str = "") -> list[str]:
        if not self.run_dir.exists():
            return []
        return sorted(p.stem for p in self.run_dir.glob(f"{prefix}*.pid"))

    def alive(self, name: str) -> bool:
        return self.get(name) is not None

    def stop(self, name: str, timeout: float = 15.0) -> None:
        """SIGTERM the process group, SIGKILL it after `timeout`; removes the pidfile. Idempotent."""
        self.stop_many([name], timeout)

    def stop_many(self, names: list[str], timeout: float = 15.0) -> None:
        """Stop several services at once: all get SIGTERM, then whoever is left after `timeout` SIGKILL."""
        infos = [i for i in (self.get(n) for n in names) if i is not None]
        for info in infos:
            _signal_group(info.pid, signal.SIGTERM)

        def all_gone() -> bool:
            for info in infos:
                _reap(info.pid)
            return all(_start_ticks(i.pid) != i.start_ticks for i in infos)

        gone = wait_until(all_gone, timeout, 0.1)
        for info in infos:  # the group may hold helpers even after the leader left
            _signal_group(info.pid, signal.SIGKILL)
        if not gone:
            wait_until(all_gone, 5.0, 0.1)
        for info in infos:
            _reap(info.pid, wait_s=2.0)
        for name in names:
            self._pidfile(name).unlink(missing_ok=True)

    def sweep(self) -> list[int]:
        """Kill every java/prometheus process whose command line mentions the work directory.

        Only those two programs: a shell or editor that merely names the directory is left alone.
        Returns the pids killed."""
        marker = (str(self.workdir).rstrip("/") + "/").encode()  # /tmp/a must not match /tmp/ab
        me = os.getpid()
        killed = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            argv0 = os.path.basename(cmdline.split(b"\0", 1)[0])
            if argv0 in SWEPT_PROGRAMS and marker in cmdline:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)
                    killed.append(int(entry.name))
        return killed


def _reap(pid: int, wait_s: float = 0.0) -> None:
    """Collect the exit status if we are the parent, so no zombie stays in the process table."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            return  # not our child, or already collected
        if done or time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)
