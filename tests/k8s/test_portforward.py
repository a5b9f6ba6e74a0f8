"""kubectl port-forward: the command, and restart/stop of the child process (a stand-in sleeper, no kubectl)."""

from __future__ import annotations

import sys

from harness.backends.k8s.config import K8sConfig
from harness.backends.k8s.portforward import PortForward, port_forward_command


def test_command_uses_the_same_kubeconfig_context_and_namespace():
    cfg = K8sConfig(namespace="b2", kubeconfig="/k/config", context="kind-x")
    assert port_forward_command(cfg, "prometheus", 19090, 9090) == [
        "kubectl", "--kubeconfig", "/k/config", "--context", "kind-x", "-n", "b2", "port-forward",
        "--address", "127.0.0.1", "svc/prometheus", "19090:9090"]
    assert port_forward_command(K8sConfig(), "x", 1, 2)[:4] == ["kubectl", "-n", "bench", "port-forward"]


def test_urls_follow_the_forward_unless_given():
    cfg = K8sConfig(port_forward=True, rest_local_port=18555)
    assert cfg.resolved_rest_url("http://svc:8081") == "http://127.0.0.1:18555"
    assert cfg.resolved_prometheus_url("http://p:9090") == "http://127.0.0.1:19090"
    assert K8sConfig().resolved_rest_url("http://svc:8081") == "http://svc:8081"
    assert K8sConfig(rest_url="http://h:1").resolved_rest_url("http://svc:8081") == "http://h:1"


def test_a_dead_forward_is_restarted_and_stop_ends_it():
    fwd = PortForward([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert fwd.ensure() is True  # not started yet counts as dead
        assert fwd.alive()
        assert fwd.ensure() is False
        fwd.proc.kill()
        fwd.proc.wait(timeout=10)
        assert fwd.ensure() is True and fwd.alive() and fwd.restarts == 2
    finally:
        proc = fwd.proc
        fwd.stop()
    assert not fwd.alive() and proc.poll() is not None
