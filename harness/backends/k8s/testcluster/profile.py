"""The test cluster as the k8s backend sees it: bring-up in one call, and the `k8s:` settings for runs.

`bring_up` = binaries (cached) + images (cached) + `TestCluster.up`. `test_cluster_settings` is the
`k8s:` block a run on this cluster uses: the harness' own service-account kubeconfig, the locally
built images (`imagePullPolicy: Never`: there is no registry), Services reached at their ClusterIPs
(the harness runs on the node), and resources scaled to a 2-core machine the way the local backend
scales them (one slot per task-manager pod, a CPU limit per pod like the local quota).
`apply_test_cluster_defaults` fills these into a `--backend k8s` run that names no cluster itself.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from harness.backends.k8s.testcluster.binaries import BinaryBuilder
from harness.backends.k8s.testcluster.cluster import TestCluster
from harness.backends.k8s.testcluster.images import BuiltImages, ImageBuilder, stack_artifacts

Progress = Callable[[str], None]

# per-pod resources on a 2-core node (requests must fit: the scheduler counts them)
MACHINE_RESOURCES: dict[str, Any] = {
    "taskmanager_cpu": 0.1,
    "taskmanager_cpu_limit": 0.25,  # the local backend's task-manager quota
    "taskmanager_memory_mb": 768,
    "jobmanager_cpu": 0.2,
    "jobmanager_cpu_limit": 1.0,
    "jobmanager_memory_mb": 1024,
    "kafka_cpu": 0.2,
    "kafka_memory_mb": 1024,
    "kafka_partitions": 8,
    "prometheus_cpu": 0.1,
    "generator_cpu": 0.2,
    "generator_memory_mb": 512,
    "generator_producers": 1,
    "max_taskmanagers": 8,
    # the image's Prometheus is Debian's, built without the Kubernetes service discovery
    "prometheus_discovery": "dns",
}
# experiment-level scaling, as `bench run` applies for local (harness/cli.py LOCAL_DEFAULT_*)
RUN_DEFAULTS = {"pattern.scale": 0.005, "pattern.time_scale": 10.0, "scale_manager.max_taskmanagers": 8,
                "loop.cooldown_s": 60.0}


def ensure_images(progress: Progress | None = None) -> BuiltImages:
    bins = BinaryBuilder(progress=progress).cached()
    if bins is None:
        bins = BinaryBuilder(progress=progress).ensure()
    flink_home, kafka_dirs, jar = stack_artifacts(progress)
    return ImageBuilder(progress=progress).build(flink_home, kafka_dirs, jar, bins.path("coredns"))


def bring_up(progress: Progress | None = None, with_images: bool = True) -> dict[str, Any]:
    bins = BinaryBuilder(progress=progress).ensure()
    images = ensure_images(progress).for_cluster() if with_images else {}
    return TestCluster(progress=progress).up(bins, images)


def test_cluster_settings(cluster: TestCluster | None = None) -> dict[str, Any]:
    """The `k8s:` block for runs on the test cluster (empty when it is not up)."""
    c = cluster or TestCluster()
    info = c.info()
    if not info.get("ready"):
        return {}
    built = ImageBuilder(layout=c.layout).current()
    out: dict[str, Any] = {
        "kubeconfig": info["harness_kubeconfig"],
        "cluster_ip": True,
        "kubelet_root_dir": str(c.state / "kubelet"),
        "pod_logs_dir": info["pod_logs"],
        "checkpoint_host_path": str(c.state / "flink-state"),  # savepoints outlive the job manager pod
        **copy.deepcopy(MACHINE_RESOURCES),
    }
    if built is not None:
        r = built.refs
        out["images"] = {"flink": r["flink"], "kafka": r["kafka"], "prometheus": r["prometheus"],
                         "generator": r["generator"], "pull_policy": "Never"}
    return out


def apply_test_cluster_defaults(raw: dict[str, Any], say: Progress | None = None) -> bool:
    """Fill the test cluster's settings into a k8s run that names no cluster; True if it did."""
    from harness.config import set_path

    if raw.get("backend") != "k8s":
        return False
    k8s = raw.get("k8s") or {}
    if any(k8s.get(key) for key in ("kubeconfig", "context", "in_cluster")):
        return False
    settings = test_cluster_settings()
    if not settings:
        return False
    merged = {**settings, **k8s}
    if isinstance(k8s.get("images"), dict) and "images" in settings:
        merged["images"] = {**settings["images"], **k8s["images"]}
    raw["k8s"] = merged
    for key, value in RUN_DEFAULTS.items():
        node: Any = raw
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or parts[-1] not in node:
            set_path(raw, key, value)
    if say:
        say(f"k8s: using the test cluster from `bench k8s up` ({settings['kubeconfig']})")
    return True
