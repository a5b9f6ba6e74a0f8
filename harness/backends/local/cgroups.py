"""One CPU cgroup per task manager, so capacity grows with the number of task managers.

On a 2-core host N unbounded task managers share the same two cores: adding one adds no capacity and
an autoscaler's scale-out would look useless. Bounding each task manager to `q` CPUs (CFS quota) makes
the host behave like a cluster of q-CPU machines, as in the thesis' Kubernetes setup (ch. 5) where each
task manager pod had a CPU limit. Quotas can change at run time, which is how vertical scaling
(MEAD's CPU share) is applied locally.

cgroup v1 (`cpu.cfs_quota_us` / `cpu.cfs_period_us`) is used where the v1 cpu controller is mounted;
otherwise cgroup v2 (`cpu.max`) on the unified hierarchy.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from harness.backends.local.errors import StackError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


def quota_us(cpus: float, period_us: int = PERIOD_US) -> int:
    """CFS quota in microseconds per period for `cpus` CPUs (the kernel's minimum is 1 ms)."""
    if cpus <= 0:
        raise ValueError(f"cpus must be > 0, got {cpus}")
    return max(1000, round(cpus * period_us))


@dataclass(frozen=True)
class CpuGroup:
    """A CPU cgroup directory; `procs` is the file a process writes its pid to in order to join."""

    path: Path
    version: int  # 1 or 2

    @property
    def procs(self) -> Path:
        return self.path / "cgroup.procs"

    def set_cpus(self, cpus: float) -> None:
        q = quota_us(cpus)
        try:
            if self.version == 1:
                (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.path / "cpu.cfs_quota_us").write_text(str(q))
            else:
                (self.path / "cpu.max").write_text(f"{q} {PERIOD_US}")
        except OSError as exc:
            raise StackError("cgroup", f"cannot set the CPU quota of {self.path}: {exc}") from exc

    def cpus(self) -> float | None:
        """The quota now in force, in CPUs (None = unbounded)."""
        try:
            if self.version == 1:
                q = int((self.path / "cpu.cfs_quota_us").read_text())
                p = int((self.path / "cpu.cfs_period_us").read_text())
            else:
                qs, ps = (self.path / "cpu.max").read_text().split()
                if qs == "max":
                    return None
                q, p = int(qs), int(ps)
        except OSError:
            return None
        return None if q < 0 else q / p

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in self.procs.read_text().split()]
        except OSError:
            return []

    def exists(self) -> bool:
        return self.path.is_dir()


class CpuCgroups:
    """Creates and removes the per-task-manager groups of one stack (names keyed by its workdir)."""

    def __init__(self, workdir: Path, root: Path = CGROUP_ROOT) -> None:
        self.root = root
        self.prefix = "bench-" + hashlib.sha1(str(workdir).encode()).hexdigest()[:8]
        self.version, self.base = self._detect()

    def _detect(self) -> tuple[int, Path | None]:
        v1 = self.root / "cpu"
        if (v1 / "cpu.cfs_quota_us").exists():
            return 1, v1
        controllers = self.root / "cgroup.controllers"
        if controllers.exists() and "cpu" in controllers.read_text().split():
            return 2, self.root
        return 0, None

    @property
    def available(self) -> bool:
        return self.base is not None and os.access(self.base, os.W_OK)

    def why_unavailable(self) -> str:
        if self.base is None:
            return f"no cgroup cpu controller under {self.root} (neither v1 cpu nor v2 cpu.max)"
        return f"{self.base} is not writable (run as root)"

    def group(self, name: str) -> CpuGroup:
        if self.base is None:
            raise StackError("cgroup", self.why_unavailable())
        return CpuGroup(self.base / f"{self.prefix}-{name}", self.version)

    def create(self, name: str, cpus: float) -> CpuGroup:
        if not self.available:
            raise StackError("cgroup", self.why_unavailable())
        g = self.group(name)
        try:
            if self.version == 2:
                sub = self.root / "cgroup.subtree_control"
                if "cpu" not in sub.read_text().split():
                    sub.write_text("+cpu")
            g.path.mkdir(exist_ok=True)
        except OSError as exc:
            raise StackError("cgroup", f"cannot create {g.path}: {exc}") from exc
        g.set_cpus(cpus)
        return g

    def remove(self, name: str, wait_s: float = 3.0) -> None:
        """Remove the group once its processes are gone (a just-killed process leaves it within
        moments; a group still busy after `wait_s` is left for the next `cleanup`)."""
        if self.base is None:
            return
        path = self.group(name).path
        deadline = time.monotonic() + wait_s
        while path.exists():
            try:
                path.rmdir()
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() >= deadline:
                    return
                time.sleep(0.1)

    def names(self) -> list[str]:
        if self.base is None or not self.base.exists():
            return []
        return sorted(p.name.removeprefix(self.prefix + "-") for p in self.base.glob(self.prefix + "-*"))

    def cleanup(self) -> None:
        for name in self.names():
            self.remove(name)
