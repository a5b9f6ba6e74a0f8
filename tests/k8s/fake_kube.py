"""In-memory stand-ins for the Kubernetes API groups, the Flink REST client and a fake clock.

The fake keeps objects by (kind, namespace, name), answers the handful of typed-client methods the
executor calls (dispatched by method name, mapped independently of the executor's own table), and
plays a tiny controller: workloads become ready, Deployments/StatefulSets/Jobs own Running pods.
Every call is logged as (method, name) so tests can assert sequences.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from kubernetes.client import ApiException

from harness.backends.flink_rest import JobDetails, TaskManagerInfo, Vertex

SUFFIX_KIND = {
    "namespace": "Namespace",
    "namespaced_config_map": "ConfigMap",
    "namespaced_service": "Service",
    "namespaced_service_account": "ServiceAccount",
    "namespaced_deployment": "Deployment",
    "namespaced_stateful_set": "StatefulSet",
    "namespaced_job": "Job",
    "namespaced_role": "Role",
    "namespaced_role_binding": "RoleBinding",
    "cluster_role": "ClusterRole",
    "cluster_role_binding": "ClusterRoleBinding",
    "namespaced_pod": "Pod",
}
METHOD = re.compile(r"^(create|read|replace|delete|patch|list)_(.+?)(_status|_scale|_resize)?$")


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0
        self.slept = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, dt: float) -> None:
        self.t += dt
        self.slept += dt


@dataclass
class FakeCluster:
    auto_ready: bool = True
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)
    pod_meta: dict[str, dict[str, Any]] = field(default_factory=dict)  # pod -> patched annotations/resources
    fail: dict[str, int] = field(default_factory=dict)  # method name -> HTTP status to raise
    version: int = 0

    # ---- storage -------------------------------------------------------------------------------
    def key(self, kind: str, ns: str | None, name: str) -> tuple[str, str, str]:
        return (kind, ns or "", name)

    def get(self, kind: str, name: str, ns: str | None = None) -> dict[str, Any] | None:
        return self.objects.get(self.key(kind, ns, name))

    def kinds(self, kind: str) -> list[dict[str, Any]]:
        return [o for (k, _, _), o in self.objects.items() if k == kind]

    def _bump(self, obj: dict[str, Any]) -> None:
        self.version += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.version)
        meta["generation"] = int(meta.get("generation", 0)) + 1
        if self.auto_ready:
            self._make_ready(obj)

    def _make_ready(self, obj: dict[str, Any]) -> None:
        kind = obj.get("kind")
        st = obj.setdefault("status", {})
        if kind in ("Deployment", "StatefulSet"):
            st["readyReplicas"] = obj["spec"].get("replicas", 1)
            st["observedGeneration"] = obj["metadata"]["generation"]
        elif kind == "Job":
            st["succeeded"] = 1
        elif kind == "FlinkDeployment":
            st["jobManagerDeploymentStatus"] = "READY"
            st["jobStatus"] = {"state": "RUNNING"}

    # ---- pods the "controllers" own --------------------------------------------------------------
    def pods(self, ns: str) -> list[dict[str, Any]]:
        out = []
        for (kind, ons, name), obj in self.objects.items():
            if ons != ns or kind not in ("Deployment", "StatefulSet", "Job"):
                continue
            n = obj["spec"].get("replicas", 1) if kind != "Job" else 1
            for i in range(n):
                pod = f"{name}-{i}"
                meta = self.pod_meta.get(pod, {})
                out.append({
                    "metadata": {"name": pod, "namespace": ns,
                                 "labels": dict(obj["spec"]["template"]["metadata"]["labels"]),
                                 "annotations": dict(meta.get("annotations", {}))},
                    "status": {"phase": "Running" if self.auto_ready else "Pending"},
                })
        return out

    def api(self, group: str) -> FakeApi:
        return FakeApi(self, group)


def _match(labels: dict[str, str], selector: str | None) -> bool:
    if not selector:
        return True
    for part in selector.split(","):
        k, v = part.split("=", 1)
        if labels.get(k) != v:
            return False
    return True


class FakeApi:
    """One API group (core, apps, batch, rbac, custom); methods resolved by name."""

    def __init__(self, cluster: FakeCluster, group: str) -> None:
        self.c = cluster
        self.group = group

    def __getattr__(self, method: str) -> Any:
        if method.endswith("_custom_object"):
            return lambda **kw: self._custom(method.split("_", 1)[0], **kw)
        m = METHOD.match(method)
        if not m or m.group(2) not in SUFFIX_KIND:
            raise AttributeError(method)
        verb, suffix, sub = m.group(1), m.group(2), m.group(3) or ""
        return lambda **kw: self._builtin(method, verb, SUFFIX_KIND[suffix], sub, **kw)

    def _raise(self, status: int, reason: str) -> None:
        raise ApiException(status=status, reason=reason)

    def _builtin(self, method: str, verb: str, kind: str, sub: str, name: str | None = None,
                 namespace: str | None = None, body: Any = None, **kw: Any) -> Any:
        c = self.c
        c.calls.append((method, name or (body or {}).get("metadata", {}).get("name", "")))
        if method in c.fail:
            self._raise(c.fail[method], "injected")
        if kind == "Pod":
            return self._pod(verb, sub, name, namespace, body, kw)
        if verb == "create":
            name = body["metadata"]["name"]
            if c.get(kind, name, namespace) is not None:
                self._raise(409, "AlreadyExists")
            obj = copy.deepcopy(body)
            c.objects[c.key(kind, namespace, name)] = obj
            c._bump(obj)
            return obj
        assert name is not None
        obj = c.get(kind, name, namespace)
        if obj is None:
            self._raise(404, "NotFound")
        assert obj is not None
        if verb == "read":
            return copy.deepcopy(obj)
        if verb == "replace":
            if body["metadata"].get("resourceVersion") != obj["metadata"]["resourceVersion"]:
                self._raise(409, "Conflict: stale resourceVersion")
            if kind == "Service" and obj["spec"].get("clusterIP") != body["spec"].get("clusterIP"):
                self._raise(422, "spec.clusterIP: field is immutable")
            new = copy.deepcopy(body)
            new["metadata"]["generation"] = obj["metadata"]["generation"]
            c.objects[c.key(kind, namespace, name)] = new
            c._bump(new)
            return new
        if verb == "delete":
            del c.objects[c.key(kind, namespace, name)]
            if kind == "Namespace":
                for k in [k for k in c.objects if k[1] == name]:
                    del c.objects[k]
            return {}
        if verb == "patch" and sub == "_scale":
            obj["spec"]["replicas"] = body["spec"]["replicas"]
            c._bump(obj)
            return {"spec": {"replicas": obj["spec"]["replicas"]}}
        raise AssertionError(f"fake does not implement {method}")

    def _pod(self, verb: str, sub: str, name: str | None, ns: str | None, body: Any, kw: dict[str, Any]) -> Any:
        c = self.c
        if verb == "list":
            return {"items": [p for p in c.pods(ns or "") if _match(p["metadata"]["labels"], kw.get("label_selector"))]}
        if verb == "patch":
            assert name is not None
            if name not in {p["metadata"]["name"] for p in c.pods(ns or "")}:
                self._raise(404, "NotFound")
            meta = c.pod_meta.setdefault(name, {})
            meta.setdefault("annotations", {}).update(body.get("metadata", {}).get("annotations", {}))
            for ct in body.get("spec", {}).get("containers", []):
                meta.setdefault("resources", {})[ct["name"]] = ct["resources"]
                meta["resized_via"] = sub or "pod-patch"
            return {}
        raise AssertionError(f"fake pod verb {verb}")

    def _custom(self, verb: str, group: str, version: str, namespace: str, plural: str, name: str | None = None,
                body: Any = None, **kw: Any) -> Any:
        c = self.c
        kind = {"flinkdeployments": "FlinkDeployment"}[plural]
        c.calls.append((f"{verb}_namespaced_custom_object", name or (body or {}).get("metadata", {}).get("name", "")))
        if verb == "create":
            name = body["metadata"]["name"]
            if c.get(kind, name, namespace) is not None:
                self._raise(409, "AlreadyExists")
            obj = copy.deepcopy(body)
            c.objects[c.key(kind, namespace, name)] = obj
            c._bump(obj)
            return obj
        assert name is not None
        obj = c.get(kind, name, namespace)
        if obj is None:
            self._raise(404, "NotFound")
        assert obj is not None
        if verb == "get":
            return copy.deepcopy(obj)
        if verb == "patch":  # JSON merge patch, enough for nested dicts of strings
            _merge(obj, body)
            c._bump(obj)
            return obj
        if verb == "replace":
            if body["metadata"].get("resourceVersion") != obj["metadata"]["resourceVersion"]:
                self._raise(409, "Conflict")
            c.objects[c.key(kind, namespace, name)] = copy.deepcopy(body)
            c._bump(c.objects[c.key(kind, namespace, name)])
            return body
        if verb == "delete":
            del c.objects[c.key(kind, namespace, name)]
            return {}
        raise AssertionError(verb)


def _merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(target.get(k), dict):
            _merge(target[k], v)
        else:
            target[k] = copy.deepcopy(v)


def fake_apis(cluster: FakeCluster) -> Any:
    from harness.backends.k8s.executor import KubeApis

    return KubeApis(core=cluster.api("core"), apps=cluster.api("apps"), batch=cluster.api("batch"),
                    rbac=cluster.api("rbac"), custom=cluster.api("custom"), server_version="v1.33.0-fake")


# ------------------------------------------------------------------ Flink REST


class FakeFlink:
    """A job whose vertices follow PUT resource-requirements at once (bounded by registered TMs).

    `taskmanager_pods` returns the TM pod names the cluster currently runs (one slot each); subtasks
    sit on the first pods in order, so the rest are idle.
    """

    def __init__(self, operators: list[str], parallelism: dict[str, int], taskmanager_pods: Any,
                 job_id: str = "j1") -> None:
        self.ops = operators
        self.vids = {op: f"v{i:031d}" for i, op in enumerate(operators)}
        self.par = dict(parallelism)
        self.pods = taskmanager_pods
        self.job_id = job_id
        self.calls: list[tuple[str, Any]] = []
        self.state = "RUNNING"

    def active_job_ids(self) -> list[str]:
        return [self.job_id]

    def job(self, jid: str) -> JobDetails:
        vs = tuple(
            Vertex(id=self.vids[op], name=("Source: " if op.endswith("source") else "") + op,
                   parallelism=self.par[op], status=self.state, tasks={self.state: self.par[op]})
            for op in self.ops
        )
        return JobDetails(jid=jid, name="q", state=self.state, vertices=vs)

    def taskmanagers(self) -> list[TaskManagerInfo]:
        pods = self.pods()
        used = sum(self.par.values())
        return [TaskManagerInfo(id=p, slots=1, free_slots=0 if i < used else 1) for i, p in enumerate(pods)]

    def set_resource_requirements(self, jid: str, bounds: dict[str, Any]) -> None:
        self.calls.append(("set_resource_requirements", {vid: (b.lower, b.upper) for vid, b in bounds.items()}))
        by_vid = {v: op for op, v in self.vids.items()}
        for vid, b in bounds.items():
            self.par[by_vid[vid]] = b.upper
        assert sum(self.par.values()) <= len(self.pods()), "asked for more slots than task managers"

    def vertex_taskmanagers(self, jid: str, vertex_id: str) -> list[str]:
        pods = self.pods()
        start = 0
        for op in self.ops:
            if self.vids[op] == vertex_id:
                return pods[start:start + self.par[op]]
            start += self.par[op]
        return []
