"""`kubectl port-forward` for the Flink REST and Prometheus services when the harness runs outside the cluster.

The services only exist once `start` created them, so a user cannot open the forwards beforehand;
with `k8s.port_forward: true` the backend runs kubectl itself (same kubeconfig/context) and restarts a
forward that died (kubectl sticks to one pod: a restarted job manager ends it).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from typing import Any

from harness.backends.k8s.config import K8sConfig


def port_forward_command(cfg: K8sConfig, service: str, local_port: int, remote_port: int,
                         kubectl: str = "kubectl") -> list[str]:
    cmd = [kubectl]
    if cfg.kubeconfig:
        cmd += ["--kubeconfig", os.path.expanduser(cfg.kubeconfig)]
    if cfg.context:
        cmd += ["--context", cfg.context]
    return [*cmd, "-n", cfg.namespace, "port-forward", "--address", "127.0.0.1", f"svc/{service}",
            f"{local_port}:{remote_port}"]


class PortForward:
    """One kubectl port-forward child process (started, checked, restarted, stopped by pid)."""

    def __init__(self, cmd: list[str], popen: Callable[..., Any] = subprocess.Popen) -> None:
        self.cmd = cmd
        self._popen = popen
        self.proc: Any = None
        self.restarts = 0

    def start(self) -> None:
        self.proc = self._popen(self.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def ensure(self) -> bool:
        """Restart a dead forward; True if it had to."""
        if self.alive():
            return False
        self.restarts += 1
        self.start()
        return True

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None
