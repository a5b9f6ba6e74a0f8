"""The API-server tier, on the real test cluster: manifests, RBAC and the executor against real objects.

- every object the k8s backend applies, for every query and every way of delivering the job jar,
  passes a server-side dry-run with strict field validation, sent as the harness' own service
  account (so creation is authorised by the real RBAC authorizer too), while a misspelled field is
  refused;
- SubjectAccessReviews: the harness may do what the backend does and is refused what it does not;
- the executor creates, replaces, scales, marks and resizes real pods, and its teardown leaves
  nothing behind;
- the cluster itself: node Ready, cluster DNS answers from inside a pod, Services route.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.backends.k8s import manifests as mf
from harness.backends.k8s.config import K8sConfig
from harness.backends.k8s.executor import K8sExecutor, connect, dig
from harness.backends.k8s.testcluster import addons
from harness.backends.k8s.testcluster import operator_crd as operator_crd_module
from harness.backends.k8s.testcluster.cluster import NODE, TestCluster
from harness.backends.k8s.testcluster.profile import test_cluster_settings as cluster_settings
from harness.topology import load_topology

pytestmark = [pytest.mark.integration, pytest.mark.k8s_cluster]

QUERIES = ("q1", "q2", "q3", "q5", "q8", "q11")
JAR_MODES: dict[str, dict[str, Any]] = {
    "baked-in": {},
    "jar-image": {"jar_image": "localhost/autoscaler-bench/generator:any", "jar_image_path": mf.USRLIB + "/x.jar"},
    "jar-url": {"jar_url": "http://jars.bench.svc:8080/nexmark-queries.jar"},
}


def cfg(namespace: str, **extra: Any) -> K8sConfig:
    return K8sConfig.model_validate({**cluster_settings(), "namespace": namespace, **extra})


def harness_api(cluster: TestCluster) -> Any:
    return addons.admin_client(cluster.layout.harness_kubeconfig)


def admin_api(cluster: TestCluster) -> Any:
    return addons.admin_client(cluster.layout.kubeconfig)


def dry_run(api: Any, manifest: dict[str, Any]) -> None:
    from kubernetes.dynamic import DynamicClient

    res = DynamicClient(api).resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
    res.server_side_apply(body=manifest, name=manifest["metadata"]["name"],
                          namespace=manifest["metadata"].get("namespace"), field_manager="bench-test",
                          dry_run="All", query_params=[("fieldValidation", "Strict")])


def real_apply(api: Any, manifest: dict[str, Any]) -> None:
    from kubernetes.dynamic import DynamicClient

    res = DynamicClient(api).resources.get(api_version=manifest["apiVersion"], kind=manifest["kind"])
    res.server_side_apply(body=manifest, name=manifest["metadata"]["name"], field_manager="bench-test",
                          namespace=manifest["metadata"].get("namespace"))


def job_of(query: str) -> mf.JobSpec:
    topo = load_topology(query)
    return mf.JobSpec(query, {op: 1 for op in topo.names}, list(topo.topics))


def stack(c: K8sConfig, query: str) -> list[dict[str, Any]]:
    job = job_of(query)
    return [*mf.infrastructure(c, job), *mf.flink(c, job), *mf.load(c, job, [100.0] * 60)]


@pytest.fixture
def namespace(k8s_cluster: TestCluster) -> Any:
    """A real namespace (dry-runs of namespaced objects need one), deleted afterwards."""
    core = client.CoreV1Api(admin_api(k8s_cluster))
    name = f"api-tier-{int(time.time() * 1000) % 10**8}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)


# ------------------------------------------------------------------ the cluster itself


def test_node_is_ready_at_its_bridge_address(k8s_cluster: TestCluster) -> None:
    node: Any = client.CoreV1Api(admin_api(k8s_cluster)).read_node(NODE)
    assert {c.type: c.status for c in node.status.conditions}["Ready"] == "True"
    assert {a.type: a.address for a in node.status.addresses}["InternalIP"] == "10.244.0.1"
    assert node.status.node_info.kubelet_version == k8s_cluster.pins.kubernetes


def test_cluster_dns_and_services_work_from_a_pod(k8s_cluster: TestCluster, namespace: str) -> None:
    """A pod resolves the API server's Service name through CoreDNS (a ClusterIP, via kube-proxy)."""
    image = cluster_settings()["images"]["generator"]
    batch: Any = client.BatchV1Api(admin_api(k8s_cluster))
    batch.create_namespaced_job(namespace, {
        "metadata": {"name": "dns"},
        "spec": {"backoffLimit": 0, "template": {"spec": {"restartPolicy": "Never", "containers": [{
            "name": "dns", "image": image, "imagePullPolicy": "Never",
            # CoreDNS may still be starting when the cluster has just come up: a lookup that works within
            # 30 s passes, one that never works fails
            "command": ["sh", "-c", "for i in $(seq 30); do getent hosts kubernetes.default.svc.cluster.local "
                                    "| grep -q 10.96.0.1 && exit 0; sleep 1; done; exit 1"],
        }]}}},
    })
    t0 = time.monotonic()
    while time.monotonic() - t0 < 90:
        st = batch.read_namespaced_job("dns", namespace).status
        if st.succeeded or st.failed:
            break
        time.sleep(1)
    assert st.succeeded == 1, f"DNS lookup inside a pod failed: {st}"


# ------------------------------------------------------------------ manifests


@pytest.mark.parametrize("jar_mode", sorted(JAR_MODES))
@pytest.mark.parametrize("query", QUERIES)
def test_every_manifest_passes_a_strict_server_side_dry_run(k8s_cluster: TestCluster, namespace: str, query: str,
                                                            jar_mode: str) -> None:
    api = harness_api(k8s_cluster)
    manifests = stack(cfg(namespace, **JAR_MODES[jar_mode]), query)
    # a binding is checked against the role it grants (RBAC escalation check), which a dry-run does not
    # create: the ClusterRole is applied for real (as the harness), the rest is dry-run
    role = next(m for m in manifests if m["kind"] == "ClusterRole")
    real_apply(api, role)
    try:
        for m in manifests:
            if m["kind"] not in ("Namespace", "ClusterRole"):  # those exist for real
                dry_run(api, m)
    finally:
        client.RbacAuthorizationV1Api(api).delete_cluster_role(role["metadata"]["name"])


def test_a_misspelled_field_is_refused(k8s_cluster: TestCluster, namespace: str) -> None:
    dep = mf.taskmanager_deployment(cfg(namespace), 1)
    dep["spec"]["template"]["spec"]["containers"][0]["resourcez"] = dep["spec"]["template"]["spec"]["containers"][
        0].pop("resources")
    from kubernetes.dynamic import DynamicClient

    res = DynamicClient(harness_api(k8s_cluster)).resources.get(api_version="apps/v1", kind="Deployment")
    with pytest.raises(ApiException) as err:  # a create, strictly decoded by the server
        res.create(body=dep, namespace=namespace, dry_run="All", query_params=[("fieldValidation", "Strict")])
    message = json.loads(err.value.body)["message"]
    assert err.value.status == 400 and 'unknown field "spec.template.spec.containers[0].resourcez"' in message
    with pytest.raises(ApiException) as err:  # server-side apply refuses it too
        dry_run(harness_api(k8s_cluster), dep)
    assert "resourcez" in str(err.value.body) and "not declared in schema" in str(err.value.body)


def test_an_invalid_object_is_refused(k8s_cluster: TestCluster, namespace: str) -> None:
    dep = mf.taskmanager_deployment(cfg(namespace), 1)
    dep["spec"]["selector"]["matchLabels"] = {"component": "something-else"}  # selector must match the template
    with pytest.raises(ApiException) as err:
        dry_run(harness_api(k8s_cluster), dep)
    assert err.value.status == 422


# ------------------------------------------------------------------ the operator path, against the operator's CRD


@pytest.fixture(scope="module")
def operator_crd(k8s_cluster: TestCluster) -> Iterator[dict[str, Any]]:
    """The Flink Kubernetes Operator's own FlinkDeployment CRD (its API jar, Maven Central), installed
    for real; the operator itself is not (no registry here ships it, see docs/k8s.md)."""
    crd = operator_crd_module.flinkdeployment_crd(operator_crd_module.operator_api_jar(k8s_cluster.pins))
    ext: Any = client.ApiextensionsV1Api(admin_api(k8s_cluster))
    ext.create_custom_resource_definition(crd)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            conds = ext.read_custom_resource_definition(operator_crd_module.CRD_NAME).status.conditions or []
            if any(c.type == "Established" and c.status == "True" for c in conds):
                break
            time.sleep(0.5)
        else:
            pytest.fail(f"{operator_crd_module.CRD_NAME} not Established after 60 s: {conds}")
        yield crd
    finally:
        ext.delete_custom_resource_definition(operator_crd_module.CRD_NAME)


def served_flink_versions(crd: dict[str, Any]) -> list[str]:
    return operator_crd_module.flink_versions(crd, mf.FLINK_DEPLOYMENT_API[1])


@pytest.mark.parametrize("query", QUERIES)
def test_the_operator_path_passes_the_operators_own_crd(k8s_cluster: TestCluster, namespace: str,
                                                       operator_crd: dict[str, Any], query: str) -> None:
    """FlinkDeployment (native mode, application cluster) + the flink ServiceAccount/Role/RoleBinding, as
    the harness, strict: with the newest `flinkVersion` this CRD knows (see the next test)."""
    newest = served_flink_versions(operator_crd)[-1]
    manifests = mf.flink(cfg(namespace, use_operator=True, operator_flink_version=newest), job_of(query))
    assert [m["kind"] for m in manifests] == ["ServiceAccount", "Role", "RoleBinding", "FlinkDeployment"]
    api = harness_api(k8s_cluster)
    for m in manifests[:2]:  # a binding is checked against the role it grants: the Role exists for real
        real_apply(api, m)
    dry_run(api, manifests[2])
    dry_run(api, manifests[3])
    with_overrides = mf.flink_deployment(cfg(namespace, use_operator=True, operator_flink_version=newest,
                                             observe_only=True), job_of(query), overrides="a:2,b:3")
    dry_run(api, with_overrides)  # the rescale path's merge-patch target and the operator's autoscaler keys


def test_a_misspelled_flinkdeployment_field_is_refused(k8s_cluster: TestCluster, namespace: str,
                                                       operator_crd: dict[str, Any]) -> None:
    """The CRD's schema is structural: strict validation reaches inside the custom resource."""
    fd = mf.flink_deployment(cfg(namespace, use_operator=True,
                                 operator_flink_version=served_flink_versions(operator_crd)[-1]), job_of("q1"))
    fd["spec"]["jobManager"]["replicaz"] = fd["spec"]["jobManager"].pop("replicas")
    with pytest.raises(ApiException) as err:
        dry_run(harness_api(k8s_cluster), fd)
    assert "replicaz" in str(err.value.body), err.value.body


def test_the_newest_operator_api_on_maven_central_knows_no_flink_2(k8s_cluster: TestCluster, namespace: str,
                                                                   operator_crd: dict[str, Any]) -> None:
    """Why the operator path stays unrun here: the newest operator API this project can fetch
    (`Pins.flink_operator_api`) predates Flink 2, so the backend's default `flinkVersion` (for the
    Flink 2.2.1 the images carry) is refused by its CRD. Fails - and should be revisited - once a
    newer operator API is pinned."""
    versions = served_flink_versions(operator_crd)
    default = K8sConfig.model_validate({}).operator_flink_version
    assert default not in versions and not any(v.startswith("v2_") for v in versions), versions
    with pytest.raises(ApiException) as err:
        dry_run(harness_api(k8s_cluster), mf.flink_deployment(cfg(namespace, use_operator=True), job_of("q1")))
    message = json.loads(err.value.body)["message"]
    assert err.value.status == 422 and f'spec.flinkVersion: Unsupported value: "{default}"' in message, message


# ------------------------------------------------------------------ RBAC


ALLOWED = [
    ("create", "", "namespaces", "", ""), ("delete", "", "namespaces", "", ""),
    ("create", "apps", "deployments", "", "ns-x"), ("patch", "apps", "deployments", "scale", "ns-x"),
    ("create", "apps", "statefulsets", "", "ns-x"), ("create", "batch", "jobs", "", "ns-x"),
    ("delete", "batch", "jobs", "", "ns-x"), ("list", "", "pods", "", "ns-x"), ("patch", "", "pods", "", "ns-x"),
    ("patch", "", "pods", "resize", "ns-x"), ("create", "", "configmaps", "", "ns-x"),
    ("update", "", "services", "", "ns-x"), ("create", "", "serviceaccounts", "", "ns-x"),
    ("create", "rbac.authorization.k8s.io", "clusterroles", "", ""),
    ("create", "rbac.authorization.k8s.io", "clusterrolebindings", "", ""),
    ("patch", "flink.apache.org", "flinkdeployments", "", "ns-x"),
]
REFUSED = [
    ("get", "", "secrets", "", "ns-x"), ("list", "", "secrets", "", ""), ("create", "", "pods", "exec", "ns-x"),
    ("delete", "", "nodes", "", ""), ("patch", "", "nodes", "", ""),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles", "", ""),
    ("bind", "rbac.authorization.k8s.io", "clusterroles", "", ""),
    ("impersonate", "", "users", "", ""), ("create", "certificates.k8s.io", "certificatesigningrequests", "", ""),
    ("create", "", "persistentvolumes", "", ""),
    ("delete", "apiextensions.k8s.io", "customresourcedefinitions", "", ""),
]


def access(api: Any, verb: str, group: str, resource: str, sub: str, ns: str) -> bool:
    review = client.V1SubjectAccessReview(spec=client.V1SubjectAccessReviewSpec(
        user=addons.harness_user(),
        groups=["system:serviceaccounts", f"system:serviceaccounts:{addons.HARNESS_NAMESPACE}", "system:authenticated"],
        resource_attributes=client.V1ResourceAttributes(verb=verb, group=group, resource=resource,
                                                        subresource=sub or None, namespace=ns or None)))
    out: Any = client.AuthorizationV1Api(api).create_subject_access_review(review)
    return bool(out.status.allowed)


@pytest.mark.parametrize("verb,group,resource,sub,ns", ALLOWED)
def test_the_harness_may_do_what_the_backend_does(k8s_cluster: TestCluster, verb: str, group: str, resource: str,
                                                  sub: str, ns: str) -> None:
    assert access(admin_api(k8s_cluster), verb, group, resource, sub, ns)


@pytest.mark.parametrize("verb,group,resource,sub,ns", REFUSED)
def test_the_harness_is_refused_what_it_does_not_need(k8s_cluster: TestCluster, verb: str, group: str,
                                                      resource: str, sub: str, ns: str) -> None:
    assert not access(admin_api(k8s_cluster), verb, group, resource, sub, ns)


def test_the_harness_token_is_refused_for_real(k8s_cluster: TestCluster) -> None:
    """Not only the review: a request with the harness' token is turned away by the API server."""
    with pytest.raises(ApiException) as err:
        client.CoreV1Api(harness_api(k8s_cluster)).list_namespaced_secret("kube-system")
    assert err.value.status == 403


# ------------------------------------------------------------------ the executor, on real objects


def test_executor_creates_replaces_scales_resizes_and_tears_down(k8s_cluster: TestCluster) -> None:
    ns = f"exec-{int(time.time()) % 10**6}"
    c = cfg(ns, ready_timeout_s=120, poll_s=0.5)
    ex = K8sExecutor(c, connect(c))
    pause = cluster_settings()["images"]["generator"]
    dep = mf.taskmanager_deployment(c, 1)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    container.update({"image": pause, "command": ["sleep", "3600"], "args": []})
    dep["spec"]["template"]["spec"].update({"volumes": [], "initContainers": []})
    container["volumeMounts"] = []
    assert ex.apply(mf.namespace(c)) == "created"
    assert ex.apply(dep) == "created"
    ex.wait_ready("Deployment", mf.TASKMANAGER)
    assert ex.apply(dep) == "replaced"  # resourceVersion carried over
    ex.scale_taskmanagers(2)
    ex.wait_until(lambda: len(ex.taskmanager_pods()) == 2, 120, "2 pods")
    pods = ex.taskmanager_pods()
    ex.set_deletion_cost({pods[0]: -1000, pods[1]: 1000})
    assert ex.resize_pod_cpu(pods[1], "taskmanager", 0.2) == "resize"
    core: Any = client.CoreV1Api(admin_api(k8s_cluster))
    pod = core.read_namespaced_pod(pods[1], ns)
    assert pod.spec.containers[0].resources.limits["cpu"] == "200m"
    # the low-cost pod goes first on scale-down
    ex.scale_taskmanagers(1)
    ex.wait_until(lambda: ex.taskmanager_pods() == [pods[1]], 120, "the idle pod to go")
    svc = mf.prometheus_service(c)
    ex.apply(svc)
    ip = ex.cluster_ip(mf.PROMETHEUS)
    assert ex.apply(svc) == "replaced" and ex.cluster_ip(mf.PROMETHEUS) == ip  # clusterIP kept
    ex.teardown(wait_s=120)
    assert ex.read("Namespace", ns) is None
    assert dig(ex.read("ClusterRole", mf.cluster_scoped_name(c)) or {}, "metadata.name") is None
