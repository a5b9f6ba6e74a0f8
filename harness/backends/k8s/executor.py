"""Talking to Kubernetes: apply manifests, wait, scale, resize, tear down (the only I/O of the k8s path).

`K8sExecutor` wraps the typed APIs of the official `kubernetes` client (CoreV1Api, AppsV1Api,
BatchV1Api, RbacAuthorizationV1Api, CustomObjectsApi), bundled in `KubeApis` so tests inject a small
in-memory fake instead (tests/k8s/fake_kube.py); clock and sleep are injected for the same reason.
Every object read back is normalised to the API's camelCase dict, whether the client returned a model
or (custom objects, the fake) a dict.

What this was exercised against: the in-memory fake only. No real API server was available when it
was written, so the exact server behaviour (e.g. replace of a Service, in-place pod resize) follows
the Kubernetes API documentation, not a test run. See docs/k8s.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.backends.k8s import manifests as mf
from harness.backends.k8s.config import K8sConfig

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


class K8sError(RuntimeError):
    """A Kubernetes call failed or the cluster did not reach the state we waited for."""


class K8sUnavailable(K8sError):
    """No cluster reachable with the configured kubeconfig/context (raised before anything is created)."""


class K8sTimeout(K8sError):
    """Something did not become ready in time; the message says what and its last state."""


@dataclass
class KubeApis:
    """The typed API objects the executor calls (real client objects or a test fake)."""

    core: Any
    apps: Any
    batch: Any
    rbac: Any
    custom: Any
    server_version: str = ""


# kind -> (api attribute, method suffix, namespaced)
KINDS: dict[str, tuple[str, str, bool]] = {
    "Namespace": ("core", "namespace", False),
    "ConfigMap": ("core", "namespaced_config_map", True),
    "Service": ("core", "namespaced_service", True),
    "ServiceAccount": ("core", "namespaced_service_account", True),
    "Deployment": ("apps", "namespaced_deployment", True),
    "StatefulSet": ("apps", "namespaced_stateful_set", True),
    "Job": ("batch", "namespaced_job", True),
    "Role": ("rbac", "namespaced_role", True),
    "RoleBinding": ("rbac", "namespaced_role_binding", True),
    "ClusterRole": ("rbac", "cluster_role", False),
    "ClusterRoleBinding": ("rbac", "cluster_role_binding", False),
}
CUSTOM_KINDS: dict[str, tuple[str, str, str]] = {"FlinkDeployment": mf.FLINK_DEPLOYMENT_API}


def status_of(exc: BaseException) -> int | None:
    """HTTP status of a kubernetes ApiException (or anything carrying `.status`)."""
    status = getattr(exc, "status", None)
    return int(status) if isinstance(status, int) else None


def as_dict(obj: Any) -> dict[str, Any]:
    """The API's camelCase dict for a client model (or the dict itself)."""
    if obj is None:
        return {}
    if isinstance(obj, dict):
        return obj
    from kubernetes.client import ApiClient

    return ApiClient().sanitize_for_serialization(obj)


def dig(obj: dict[str, Any], path: str, default: Any = None) -> Any:
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


# ------------------------------------------------------------------ connecting


def kubeconfig_path(cfg: K8sConfig) -> str:
    """The kubeconfig the client would read: the configured one, else the first of $KUBECONFIG, else
    ~/.kube/config."""
    if cfg.kubeconfig:
        return os.path.expanduser(cfg.kubeconfig)
    env = os.environ.get("KUBECONFIG", "")
    first = env.split(os.pathsep)[0] if env else ""
    return os.path.expanduser(first or "~/.kube/config")


def describe_target(cfg: K8sConfig) -> str:
    """What we tried to reach, for error messages (a user without a cluster reads this)."""
    if cfg.in_cluster:
        return "in-cluster service account (KUBERNETES_SERVICE_HOST)"
    return f"kubeconfig {kubeconfig_path(cfg)!r}, context {cfg.context or '(current-context)'!r}"


def _unavailable(target: str, why: str) -> K8sUnavailable:
    return K8sUnavailable(
        f"no Kubernetes cluster configured: {target}: {why}. The k8s backend needs a reachable cluster "
        "(see docs/k8s.md); use --backend local or sim without one."
    )


def connect(cfg: K8sConfig) -> KubeApis:
    """Load the credentials and make one cheap call with a short timeout; fail fast and say what was tried.

    A missing kubeconfig is reported before the (slow to import) client is even loaded.
    """
    target = describe_target(cfg)
    path = kubeconfig_path(cfg)
    if not cfg.in_cluster and not os.path.exists(path):
        raise _unavailable(target, f"{path} does not exist")

    from kubernetes import client, config

    try:
        if cfg.in_cluster:
            config.load_incluster_config()
            api_client = client.ApiClient()
        else:
            api_client = config.new_client_from_config(config_file=path, context=cfg.context)
    except Exception as exc:  # noqa: BLE001 - re-raised with it: ConfigException (no such context), malformed YAML
        raise _unavailable(target, f"{type(exc).__name__}: {exc}") from None
    try:
        version = client.VersionApi(api_client).get_code(_request_timeout=cfg.connect_timeout_s)
    except Exception as exc:  # noqa: BLE001 - re-raised, naming it
        raise K8sUnavailable(
            f"Kubernetes API not reachable with {target} (server {api_client.configuration.host}): "
            f"{type(exc).__name__}: {str(exc)[:300]}"
        ) from None
    return KubeApis(
        core=client.CoreV1Api(api_client),
        apps=client.AppsV1Api(api_client),
        batch=client.BatchV1Api(api_client),
        rbac=client.RbacAuthorizationV1Api(api_client),
        custom=client.CustomObjectsApi(api_client),
        server_version=str(getattr(version, "git_version", "") or ""),
    )


# ------------------------------------------------------------------ the executor


class K8sExecutor:
    """Create-or-replace manifests, wait for readiness, scale, resize and delete, in one namespace."""

    def __init__(
        self,
        cfg: K8sConfig,
        apis: KubeApis,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.cfg = cfg
        self.apis = apis
        self.clock = clock
        self.sleep = sleep
        self.applied: list[tuple[str, str]] = []  # (kind, name) in apply order, for teardown and facts

    @property
    def ns(self) -> str:
        return self.cfg.namespace

    # ---- generic CRUD ---------------------------------------------------------------------------
    def _call(self, kind: str, verb: str, name: str | None = None, body: Any = None, **kw: Any) -> Any:
        if kind in CUSTOM_KINDS:
            group, version, plural = CUSTOM_KINDS[kind]
            method = {"create": "create", "read": "get", "replace": "replace", "delete": "delete",
                      "patch": "patch"}[verb]
            args: dict[str, Any] = {"group": group, "version": version, "namespace": self.ns, "plural": plural}
            if name is not None:
                args["name"] = name
            if body is not None:
                args["body"] = body
            return getattr(self.apis.custom, f"{method}_namespaced_custom_object")(**args, **kw)
        if kind not in KINDS:
            raise K8sError(f"no API mapping for kind {kind!r}")
        api_name, suffix, namespaced = KINDS[kind]
        args = {}
        if name is not None:
            args["name"] = name
        if namespaced:
            args["namespace"] = self.ns
        if body is not None:
            args["body"] = body
        return getattr(getattr(self.apis, api_name), f"{verb}_{suffix}")(**args, **kw)

    def read(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return as_dict(self._call(kind, "read", name))
        except Exception as exc:
            if status_of(exc) == 404:
                return None
            raise

    def apply(self, manifest: dict[str, Any]) -> str:
        """Create, or replace what exists (Jobs are immutable: deleted and re-created). Returns the verb."""
        kind, name = manifest["kind"], manifest["metadata"]["name"]
        try:
            self._call(kind, "create", body=manifest)
            verb = "created"
        except Exception as exc:
            if status_of(exc) != 409:
                raise K8sError(f"creating {kind} {name}: {_brief(exc)}") from exc
            verb = self._replace(kind, name, manifest)
        if (kind, name) not in self.applied:
            self.applied.append((kind, name))
        return verb

    def _replace(self, kind: str, name: str, manifest: dict[str, Any]) -> str:
        if kind == "Namespace":
            return "exists"  # nothing in a namespace's spec worth replacing; replacing races its deletion
        if kind == "Job":
            self.delete(kind, name)
            self.wait_until(lambda: self.read(kind, name) is None, 120.0, f"old Job {name} to be deleted")
            self._call(kind, "create", body=manifest)
            return "recreated"
        current = self.read(kind, name) or {}
        body = {**manifest, "metadata": {**manifest["metadata"]}}
        rv = dig(current, "metadata.resourceVersion")
        if rv:
            body["metadata"]["resourceVersion"] = rv
        if kind == "Service":  # clusterIP is immutable: carry it over unless we ask for a headless one
            ip = dig(current, "spec.clusterIP")
            if ip and "clusterIP" not in manifest.get("spec", {}):
                body["spec"] = {**manifest["spec"], "clusterIP": ip}
        try:
            self._call(kind, "replace", name, body=body)
        except Exception as exc:
            raise K8sError(f"replacing {kind} {name}: {_brief(exc)}") from exc
        return "replaced"

    def apply_all(self, manifests: Iterable[dict[str, Any]]) -> list[str]:
        return [self.apply(m) for m in manifests]

    def delete(self, kind: str, name: str) -> bool:
        """Delete (background propagation: pods go with their owner); False if it did not exist."""
        try:
            if kind in CUSTOM_KINDS:
                self._call(kind, "delete", name)
            else:
                self._call(kind, "delete", name, propagation_policy="Background")
            return True
        except Exception as exc:
            if status_of(exc) == 404:
                return False
            raise K8sError(f"deleting {kind} {name}: {_brief(exc)}") from exc

    # ---- waiting --------------------------------------------------------------------------------
    def wait_until(self, check: Callable[[], bool], timeout_s: float, what: str,
                   describe: Callable[[], str] | None = None) -> float:
        """Poll `check` every `poll_s` until true; returns the seconds waited, K8sTimeout otherwise."""
        t0 = self.clock()
        while True:
            if check():
                return self.clock() - t0
            if self.clock() - t0 >= timeout_s:
                state = f"; last state: {describe()}" if describe else ""
                raise K8sTimeout(f"timed out after {timeout_s:.0f} s waiting for {what}{state}")
            self.sleep(self.cfg.poll_s)

    def workload_ready(self, kind: str, name: str) -> bool:
        """Deployment/StatefulSet: all replicas ready at the current generation; Job: succeeded."""
        obj = self.read(kind, name)
        if obj is None:
            return False
        if kind == "Job":
            if int(dig(obj, "status.failed", 0) or 0) > int(dig(obj, "spec.backoffLimit", 6) or 0):
                raise K8sError(f"Job {name} failed: {dig(obj, 'status.conditions', [])}")
            return int(dig(obj, "status.succeeded", 0) or 0) >= 1
        want = int(dig(obj, "spec.replicas", 1) or 0)
        ready = int(dig(obj, "status.readyReplicas", 0) or 0)
        gen, seen = dig(obj, "metadata.generation"), dig(obj, "status.observedGeneration")
        return ready >= want and (gen is None or seen is None or seen >= gen)

    def wait_ready(self, kind: str, name: str, timeout_s: float | None = None) -> float:
        return self.wait_until(
            lambda: self.workload_ready(kind, name),
            timeout_s or self.cfg.ready_timeout_s,
            f"{kind} {self.ns}/{name} to be ready",
            lambda: self.describe_pods(),
        )

    # ---- pods -----------------------------------------------------------------------------------
    def pods(self, label_selector: str) -> list[dict[str, Any]]:
        result = as_dict(self.apis.core.list_namespaced_pod(namespace=self.ns, label_selector=label_selector))
        return list(result.get("items", []))

    def describe_pods(self) -> str:
        """One line per pod: name, phase, and the first waiting reason (ImagePullBackOff, CrashLoop...)."""
        try:
            pods = self.pods("app.kubernetes.io/part-of=" + mf.PART_OF)
        except Exception as exc:  # noqa: BLE001 - only used to enrich an error message
            return f"(pods not listable: {_brief(exc)})"
        parts = []
        for p in pods:
            reason = ""
            for cs in dig(p, "status.containerStatuses", []) or []:
                waiting = dig(cs, "state.waiting")
                if waiting:
                    reason = f" ({waiting.get('reason', '')})"
                    break
            parts.append(f"{dig(p, 'metadata.name')}={dig(p, 'status.phase', '?')}{reason}")
        return (", ".join(parts) or "no pods") + self.log_tails(
            [str(dig(p, "metadata.name")) for p in pods if not _ready(p)])

    def log_tails(self, pods: list[str], lines: int = 5) -> str:
        """Harness on the node (`pod_logs_dir`): the last lines each container of `pods` wrote. Read from
        the kubelet's log files, so it works when the apiserver cannot reach the kubelet."""
        root = self.cfg.pod_logs_dir
        if not root or not pods:
            return ""
        out = []
        for pod in pods:
            for log in sorted(Path(root).glob(f"{self.ns}_{pod}_*/*/*.log"))[-3:]:
                try:
                    tail = log.read_text(errors="replace").splitlines()[-lines:]
                except OSError:
                    continue
                out.append(f"\n--- {pod}/{log.parent.name}:\n" + "\n".join(t[:300] for t in tail))
        return "".join(out)

    def taskmanager_pods(self) -> list[str]:
        """Names of the running task-manager pods (standalone Deployment or the operator's native pods)."""
        sel = (f"app={self.cfg.flink_name},component=taskmanager" if self.cfg.use_operator
               else "app=bench,component=taskmanager")
        return sorted(
            str(dig(p, "metadata.name")) for p in self.pods(sel)
            if dig(p, "status.phase") == "Running" and not dig(p, "metadata.deletionTimestamp")
        )

    def running(self, component: str) -> bool:
        return any(dig(p, "status.phase") == "Running" for p in self.pods(f"app=bench,component={component}"))

    def cluster_ip(self, service: str) -> str:
        """A Service's ClusterIP (K8sError if it has none: headless or missing)."""
        ip = dig(self.read("Service", service) or {}, "spec.clusterIP")
        if not ip or ip == "None":
            raise K8sError(f"Service {self.ns}/{service} has no ClusterIP")
        return str(ip)

    # ---- scaling --------------------------------------------------------------------------------
    def taskmanager_replicas(self) -> int:
        obj = self.read("Deployment", mf.TASKMANAGER)
        return int(dig(obj or {}, "spec.replicas", 0) or 0)

    def scale_taskmanagers(self, replicas: int) -> None:
        """Patch the TM Deployment's scale subresource (standalone path)."""
        if replicas > self.cfg.max_taskmanagers:
            raise K8sError(f"{replicas} task managers exceed max_taskmanagers={self.cfg.max_taskmanagers}")
        self.apis.apps.patch_namespaced_deployment_scale(
            name=mf.TASKMANAGER, namespace=self.ns, body={"spec": {"replicas": int(replicas)}},
            _content_type=MERGE,
        )

    def set_deletion_cost(self, costs: dict[str, int]) -> None:
        """Tell the ReplicaSet controller which pods to remove first on scale-down (lowest cost first).

        Scaling a Deployment down deletes pods it picks itself; marking the idle task managers keeps it
        from killing one that still runs a subtask (which would restart the job).
        """
        for pod, cost in costs.items():
            self.apis.core.patch_namespaced_pod(
                name=pod, namespace=self.ns, body={"metadata": {"annotations": {DELETION_COST: str(int(cost))}}},
                _content_type=STRATEGIC,
            )

    def resize_pod_cpu(self, pod: str, container: str, cpu_limit: float) -> str:
        """In-place CPU resize: the `resize` subresource (Kubernetes >= 1.33), else a pod patch (<= 1.32
        with the InPlacePodVerticalScaling gate). Returns which path worked; K8sError if neither did."""
        body = {"spec": {"containers": [{"name": container, "resources": {
            "requests": {"cpu": mf.cpu(min(cpu_limit, self.cfg.taskmanager_cpu))},
            "limits": {"cpu": mf.cpu(cpu_limit)},
        }}]}}
        errors = []
        for path, method in (("resize", "patch_namespaced_pod_resize"), ("pod-patch", "patch_namespaced_pod")):
            fn = getattr(self.apis.core, method, None)
            if fn is None:
                continue
            try:
                fn(name=pod, namespace=self.ns, body=body, _content_type=STRATEGIC)
                return path
            except Exception as exc:  # noqa: BLE001 - each path's error is in the K8sError below
                errors.append(f"{path}: {_brief(exc)}")
        raise K8sError(f"in-place CPU resize of pod {pod} not supported by this cluster ({'; '.join(errors)})")

    # ---- the operator path ----------------------------------------------------------------------
    def flinkdeployment(self) -> dict[str, Any] | None:
        return self.read("FlinkDeployment", self.cfg.flink_name)

    def patch_flink_configuration(self, conf: dict[str, str]) -> None:
        """Merge-patch spec.flinkConfiguration; the operator applies it (in place where it can)."""
        self._call("FlinkDeployment", "patch", self.cfg.flink_name,
                   body={"spec": {"flinkConfiguration": conf}})

    def flinkdeployment_ready(self) -> bool:
        obj = self.flinkdeployment() or {}
        return (dig(obj, "status.jobManagerDeploymentStatus") == "READY"
                and dig(obj, "status.jobStatus.state") == "RUNNING")

    # ---- teardown -------------------------------------------------------------------------------
    def teardown(self, wait_s: float = 0.0) -> None:
        """Delete the namespace (everything in it goes with it) and our cluster-scoped RBAC objects."""
        name = mf.cluster_scoped_name(self.cfg)
        self.delete("ClusterRoleBinding", name)
        self.delete("ClusterRole", name)
        self.delete("Namespace", self.ns)
        if wait_s > 0:
            self.wait_until(lambda: self.read("Namespace", self.ns) is None, wait_s,
                            f"namespace {self.ns} to be deleted")


def _ready(pod: dict[str, Any]) -> bool:
    return dig(pod, "status.phase") == "Running" and all(
        cs.get("ready") for cs in dig(pod, "status.containerStatuses", []) or [])


def _brief(exc: BaseException) -> str:
    status = status_of(exc)
    reason = getattr(exc, "reason", None)
    body = getattr(exc, "body", None)
    if status is not None:
        return f"HTTP {status} {reason or ''}: {str(body or '')[:300]}".strip()
    return f"{type(exc).__name__}: {str(exc)[:300]}"
