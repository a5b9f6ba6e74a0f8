"""Pure parts of the test cluster (no root, no cluster): pins, configs, images, the run profile."""

from __future__ import annotations

import hashlib
import json
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from harness.backends.k8s.config import K8sConfig, cell_namespace
from harness.backends.k8s.testcluster import addons, profile
from harness.backends.k8s.testcluster.binaries import COREDNS_PLUGINS, _directive_order
from harness.backends.k8s.testcluster.cluster import TestCluster, containerd_config
from harness.backends.k8s.testcluster.images import ImageBuilder, ImageSpec
from harness.backends.k8s.testcluster.pins import Layout, Pins
from harness.backends.k8s.testcluster.pki import Identity, Pki


def test_staging_modules_follow_the_kubernetes_minor() -> None:
    assert Pins(kubernetes="v1.34.2").staging_version() == "v0.34.2"
    assert Pins().key("a") != Pins().key("b")


def test_coredns_runs_its_plugins_in_upstream_order_and_never_forwards() -> None:
    order = _directive_order(COREDNS_PLUGINS)
    assert order.index("ready") < order.index("kubernetes") and order.index("cache") < order.index("kubernetes")
    corefile = addons.corefile("cluster.local")
    assert "forward" not in corefile and "kubernetes cluster.local" in corefile


def test_containerd_config_restricts_oom_score_adj_and_uses_its_own_socket(tmp_path: Path) -> None:
    c = TestCluster(layout=Layout(cache_dir=tmp_path / "cache", state_dir=tmp_path / "state"))
    text = containerd_config(c, "localhost/autoscaler-bench/pause:abc")
    assert "restrict_oom_score_adj = true" in text
    assert f'address = "{c.containerd_sock}"' in text and "SystemdCgroup = false" in text
    assert 'sandbox_image = "localhost/autoscaler-bench/pause:abc"' in text


def test_pki_issues_certificates_the_authorizers_recognise(tmp_path: Path) -> None:
    from cryptography import x509

    pki = Pki(tmp_path / "pki")
    crt, _ = pki.issue("kubelet", "system:node:n1", ("system:nodes",), client=True)
    cert = x509.load_pem_x509_certificate(crt.read_bytes())
    assert cert.subject.rfc4514_string() == "CN=system:node:n1,O=system:nodes"
    assert cert.issuer == pki.ca_cert.subject
    ident = Identity("admin-client", "bench-admin", ("system:masters",))
    kc = yaml.safe_load(pki.kubeconfig("admin", "https://10.244.0.1:6443", ident).read_text())
    assert kc["clusters"][0]["cluster"]["server"] == "https://10.244.0.1:6443"
    assert oct((tmp_path / "pki" / "admin-client.key").stat().st_mode & 0o777) == "0o600"


def test_harness_rules_cover_every_api_the_executor_calls() -> None:
    """Each kind the executor applies maps to a resource the harness role grants create/update/delete on."""
    from harness.backends.k8s.executor import KINDS

    plural = {"Namespace": "namespaces", "ConfigMap": "configmaps", "Service": "services",
              "ServiceAccount": "serviceaccounts", "Deployment": "deployments", "StatefulSet": "statefulsets",
              "Job": "jobs", "Role": "roles", "RoleBinding": "rolebindings", "ClusterRole": "clusterroles",
              "ClusterRoleBinding": "clusterrolebindings"}
    for kind in KINDS:
        verbs = {v for r in addons.HARNESS_RULES if plural[kind] in r["resources"] for v in r["verbs"]}
        assert "*" in verbs or {"get", "create", "delete"} <= verbs, (kind, verbs)
    assert not any("secrets" in r["resources"] or "pods/exec" in r["resources"] for r in addons.HARNESS_RULES)


def test_image_layers_are_reproducible_and_the_archive_names_every_image(tmp_path: Path) -> None:
    b = ImageBuilder(layout=Layout(cache_dir=tmp_path))
    src = tmp_path / "f.txt"
    src.write_text("x")
    one = b.layer_from("t", [("/a/b.txt", src, 0o644), ("/c", b"y", 0o755)])
    two = b.layer_from("t", [("/c", b"y", 0o755), ("/a/b.txt", src, 0o644)])
    assert one.digest == two.digest == "sha256:" + hashlib.sha256(one.path.read_bytes()).hexdigest()
    built = b.write_archive([ImageSpec("x", [one], ["/c"]), ImageSpec("y", [one], ["/c"], env={"A": "1"})])
    assert set(built.refs) == {"x", "y"} and built.refs["x"] != built.refs["y"]
    with tarfile.open(built.archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        names = {m["annotations"]["io.containerd.image.name"] for m in index["manifests"]}
        assert names == set(built.refs.values())
        blobs = [n for n in tar.getnames() if n.startswith("blobs/sha256/") and len(n) > 20]
        assert f"blobs/sha256/{one.digest.split(':')[1]}" in blobs and len(blobs) == len(set(blobs))
    assert b.current() == built


def test_cell_namespaces_are_distinct_dns_labels() -> None:
    a, b = cell_namespace("bench", "run-1"), cell_namespace("bench", "run-2")
    assert a != b and a.startswith("bench-")
    K8sConfig.model_validate({"namespace": a})  # passes the namespace pattern


def test_a_k8s_run_without_a_cluster_of_its_own_uses_the_test_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profile, "test_cluster_settings",
                        lambda: {"kubeconfig": "/x/harness.kubeconfig", "cluster_ip": True,
                                 "images": {"flink": "f", "pull_policy": "Never"}, "taskmanager_cpu_limit": 0.25})
    raw = {"backend": "k8s", "pattern": {"name": "cosine", "scale": 0.01}, "k8s": {"namespace": "mine"}}
    assert profile.apply_test_cluster_defaults(raw)
    assert raw["k8s"]["kubeconfig"] == "/x/harness.kubeconfig" and raw["k8s"]["namespace"] == "mine"
    assert raw["pattern"]["scale"] == 0.01 and raw["pattern"]["time_scale"] == 10.0
    # a run that names its own cluster is left alone
    own = {"backend": "k8s", "k8s": {"context": "prod"}}
    assert not profile.apply_test_cluster_defaults(own) and own == {"backend": "k8s", "k8s": {"context": "prod"}}


def test_access_modes_are_exclusive() -> None:
    with pytest.raises(ValueError, match="one of"):
        K8sConfig.model_validate({"cluster_ip": True, "port_forward": True})


def test_a_process_left_running_in_the_clusters_directories_is_a_host_difference(tmp_path: Path) -> None:
    import subprocess

    from harness.backends.k8s.testcluster.hostprep import cluster_processes

    ours = tmp_path / "state"
    ours.mkdir()
    assert cluster_processes((ours,)) == []
    # names a file in the cluster's directory, like etcd --data-dir <state>/etcd
    left = subprocess.Popen(["sh", "-c", "sleep 60", str(ours / "etcd")])
    try:
        for _ in range(100):  # until the child has exec'd
            if b"sleep 60" in Path(f"/proc/{left.pid}/cmdline").read_bytes():
                break
            time.sleep(0.05)
        assert cluster_processes((ours,)) == [f"process {left.pid}: sh -c sleep 60 {ours / 'etcd'}"]
    finally:
        left.kill()
        left.wait()
    assert cluster_processes((ours,)) == []
