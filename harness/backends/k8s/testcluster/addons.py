"""What the test cluster runs on top of the control plane: CoreDNS and the harness' own identity.

- CoreDNS in kube-system behind the `kube-dns` Service at the kubelet's clusterDNS address, with
  the RBAC it needs to watch Services and EndpointSlices;
- the harness' ServiceAccount `bench-system/bench-harness` bound to a ClusterRole that allows what
  the k8s backend does (namespaces, workloads, the scale and resize subresources, Prometheus' RBAC,
  FlinkDeployments) and nothing else (no Secrets, no exec, no nodes); `harness.kubeconfig` holds a
  token for it, so runs on the test cluster exercise exactly these permissions.

Objects are applied server-side (field manager `autoscaler-bench`) through the official client's
dynamic API; the same helpers drain the cluster before `down`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

Manifest = dict[str, Any]

FIELD_MANAGER = "autoscaler-bench"
DEFAULT_PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
DEFAULT_COREDNS_IMAGE = "registry.k8s.io/coredns/coredns:v1.12.1"
HARNESS_NAMESPACE = "bench-system"
HARNESS_SA = "bench-harness"
HARNESS_ROLE = "autoscaler-bench-harness"
TOKEN_SECONDS = 7 * 24 * 3600

# What the k8s backend calls (harness/backends/k8s/executor.py, rescale.py, backend.py). Creating
# the Prometheus ClusterRole and the operator path's Role needs the harness to hold what they grant
# (RBAC escalation check), hence read access to endpoints/nodes and full access to pods/configmaps/
# services/deployments.
HARNESS_RULES: list[Manifest] = [
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch", "create", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["pods", "configmaps", "services"], "verbs": ["*"]},
    {"apiGroups": [""], "resources": ["pods/log", "pods/status"], "verbs": ["get"]},
    {"apiGroups": [""], "resources": ["pods/resize"], "verbs": ["get", "patch", "update"]},
    {"apiGroups": [""], "resources": ["serviceaccounts"],
     "verbs": ["get", "list", "create", "update", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["endpoints", "nodes", "events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["deployments", "deployments/finalizers"], "verbs": ["*"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale", "statefulsets/scale"],
     "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["apps"], "resources": ["statefulsets"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
    {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get", "list", "watch", "create", "update", "patch",
                                                             "delete"]},
    {"apiGroups": ["rbac.authorization.k8s.io"],
     "resources": ["roles", "rolebindings", "clusterroles", "clusterrolebindings"],
     "verbs": ["get", "create", "update", "patch", "delete"]},
    {"apiGroups": ["flink.apache.org"], "resources": ["flinkdeployments"],
     "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
]


# ------------------------------------------------------------------ clients


def admin_client(kubeconfig: Path) -> Any:
    from kubernetes import config

    return config.new_client_from_config(config_file=str(kubeconfig))


def apply_all(api_client: Any, manifests: Iterable[Manifest]) -> None:
    """Server-side apply, in order (force: we own these objects)."""
    from kubernetes.dynamic import DynamicClient

    dyn = DynamicClient(api_client)
    for m in manifests:
        res = dyn.resources.get(api_version=m["apiVersion"], kind=m["kind"])
        meta = m["metadata"]
        res.server_side_apply(body=m, name=meta["name"], namespace=meta.get("namespace"),
                              field_manager=FIELD_MANAGER, force_conflicts=True)


def node_ready(api_client: Any, node: str) -> bool:
    from kubernetes import client

    try:
        n: Any = client.CoreV1Api(api_client).read_node(node)
    except Exception:  # noqa: BLE001 - not registered yet
        return False
    return any(c.type == "Ready" and c.status == "True" for c in (n.status.conditions or []))


def deployment_ready(api_client: Any, namespace: str, name: str) -> bool:
    from kubernetes import client

    try:
        d: Any = client.AppsV1Api(api_client).read_namespaced_deployment(name, namespace)
    except Exception:  # noqa: BLE001 - not created yet: not ready
        return False
    return bool(d.status.ready_replicas) and d.status.ready_replicas >= (d.spec.replicas or 0)


def drain(api_client: Any, keep: Iterable[str], timeout_s: float, progress: Callable[[str], None]) -> None:
    """Delete every non-system namespace and the kube-system workloads, then wait until no pod is left,
    so the kubelet tears down volumes and sandbox networking the normal way."""
    from kubernetes import client

    core: Any = client.CoreV1Api(api_client)
    apps: Any = client.AppsV1Api(api_client)
    keep = set(keep)
    for ns in core.list_namespace().items:
        if ns.metadata.name not in keep and not ns.metadata.deletion_timestamp:
            core.delete_namespace(ns.metadata.name)
    for d in apps.list_namespaced_deployment("kube-system").items:
        apps.delete_namespaced_deployment(d.metadata.name, "kube-system")
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout_s:
        pods = core.list_pod_for_all_namespaces().items
        if not pods:
            progress(f"drained in {time.monotonic() - t0:.1f} s")
            return
        for p in pods:  # pods of deleted owners: make sure they go, quickly
            if not p.metadata.deletion_timestamp:
                core.delete_namespaced_pod(p.metadata.name, p.metadata.namespace, grace_period_seconds=5)
        time.sleep(1)
    progress(f"drain: pods still present after {timeout_s:.0f} s")


# ------------------------------------------------------------------ CoreDNS


def corefile(domain: str) -> str:
    """Cluster names only: no `forward`, so nothing outside the cluster is ever asked."""
    return f"""\
.:53 {{
    errors
    health {{
        lameduck 2s
    }}
    ready
    kubernetes {domain} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 5
    }}
    cache 5
    reload
    loadbalance
}}
"""


def coredns(image: str, dns_ip: str, domain: str) -> list[Manifest]:
    ns = "kube-system"
    labels = {"k8s-app": "kube-dns"}
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "coredns", "namespace": ns}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "system:coredns"},
         "rules": [{"apiGroups": [""], "resources": ["endpoints", "services", "pods", "namespaces"],
                    "verbs": ["list", "watch"]},
                   {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "system:coredns"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:coredns"},
         "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": ns}]},
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "coredns", "namespace": ns},
         "data": {"Corefile": corefile(domain)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "coredns", "namespace": ns,
                                                                     "labels": labels},
         "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": {
                      "serviceAccountName": "coredns", "dnsPolicy": "Default",
                      "containers": [{
                          "name": "coredns", "image": image, "imagePullPolicy": "Never",
                          "args": ["-conf", "/etc/coredns/Corefile"],
                          "ports": [{"name": "dns", "containerPort": 53, "protocol": "UDP"},
                                    {"name": "dns-tcp", "containerPort": 53, "protocol": "TCP"}],
                          "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
                          "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 10},
                          "resources": {"requests": {"cpu": "50m", "memory": "64Mi"},
                                        "limits": {"memory": "170Mi"}},
                          "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
                      }],
                      "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                  }}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "kube-dns", "namespace": ns, "labels": labels},
         "spec": {"clusterIP": dns_ip, "selector": labels,
                  "ports": [{"name": "dns", "port": 53, "protocol": "UDP"},
                            {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]}},
    ]


# ------------------------------------------------------------------ the harness' identity


def harness_rbac() -> list[Manifest]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HARNESS_NAMESPACE}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": HARNESS_SA, "namespace": HARNESS_NAMESPACE}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": HARNESS_ROLE},
         "rules": HARNESS_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": HARNESS_ROLE},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": HARNESS_ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": HARNESS_SA, "namespace": HARNESS_NAMESPACE}]},
    ]


def harness_user() -> str:
    return f"system:serviceaccount:{HARNESS_NAMESPACE}:{HARNESS_SA}"


def write_harness_kubeconfig(api_client: Any, pki: Any, server: str, path: Path) -> Path:
    """A kubeconfig with a bound token of the harness' service account (TokenRequest API)."""
    from kubernetes import client

    req = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
        audiences=[], expiration_seconds=TOKEN_SECONDS))
    core: Any = client.CoreV1Api(api_client)
    token = core.create_namespaced_service_account_token(HARNESS_SA, HARNESS_NAMESPACE, req).status.token
    made = pki.token_kubeconfig("harness", server, user={"token": token})
    path.write_text(Path(made).read_text())
    path.chmod(0o600)
    return path


def render(manifests: Iterable[Manifest]) -> str:
    return yaml.safe_dump_all(list(manifests), sort_keys=False)
