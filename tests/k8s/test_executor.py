"""The executor and rescaler against the in-memory fake API: create/replace/scale/resize/teardown sequences."""

from __future__ import annotations

import pytest

from harness.backends.k8s import manifests as mf
from harness.backends.k8s.config import K8sConfig
from harness.backends.k8s.executor import DELETION_COST, K8sError, K8sExecutor, K8sTimeout
from harness.backends.k8s.rescale import BUSY_COST, IDLE_COST, K8sRescaler
from harness.topology import load_topology
from tests.k8s.fake_kube import FakeClock, FakeCluster, FakeFlink, fake_apis


def make(cfg: K8sConfig | None = None, **cluster_kw):
    cfg = cfg or K8sConfig(namespace="t")
    cluster = FakeCluster(**cluster_kw)
    clock = FakeClock()
    ex = K8sExecutor(cfg, fake_apis(cluster), clock=clock, sleep=clock.sleep)
    return cfg, cluster, clock, ex


def spec(query: str = "q1", **par: int) -> mf.JobSpec:
    topo = load_topology(query)
    return mf.JobSpec(query, {op: par.get(op, 1) for op in topo.names}, list(topo.topics))


# ------------------------------------------------------------------ apply


def test_apply_creates_then_replaces_with_the_live_resource_version():
    cfg, cluster, _, ex = make()
    cm = mf.flink_configmap(cfg)
    assert ex.apply(cm) == "created"
    rv1 = cluster.get("ConfigMap", mf.FLINK_CONFIG, "t")["metadata"]["resourceVersion"]
    changed = {**cm, "data": {**cm["data"], "config.yaml": "a: 1\n"}}
    assert ex.apply(changed) == "replaced"
    live = cluster.get("ConfigMap", mf.FLINK_CONFIG, "t")
    assert live["data"]["config.yaml"] == "a: 1\n"
    assert live["metadata"]["resourceVersion"] != rv1
    assert [c[0] for c in cluster.calls] == [
        "create_namespaced_config_map", "create_namespaced_config_map", "read_namespaced_config_map",
        "replace_namespaced_config_map"]
    assert "resourceVersion" not in cm["metadata"]  # the caller's manifest is not mutated


def test_replacing_a_service_keeps_its_cluster_ip():
    cfg, cluster, _, ex = make()
    svc = mf.jobmanager_service(cfg)
    ex.apply(svc)
    cluster.get("Service", mf.JOBMANAGER, "t")["spec"]["clusterIP"] = "10.0.0.7"  # assigned by the server
    assert ex.apply(svc) == "replaced"
    assert cluster.get("Service", mf.JOBMANAGER, "t")["spec"]["clusterIP"] == "10.0.0.7"


def test_jobs_are_recreated_and_namespaces_left_alone():
    cfg, cluster, _, ex = make()
    ex.apply(mf.namespace(cfg))
    assert ex.apply(mf.namespace(cfg)) == "exists"
    job = mf.topics_job(cfg, ["bids"])
    ex.apply(job)
    assert ex.apply(job) == "recreated"
    verbs = [c[0] for c in cluster.calls if c[1] == mf.TOPICS_JOB]
    assert verbs[-3:] == ["delete_namespaced_job", "read_namespaced_job", "create_namespaced_job"]
    assert "replace_namespace" not in [c[0] for c in cluster.calls]


def test_apply_reports_other_api_errors():
    cfg, cluster, _, ex = make()
    cluster.fail["create_namespaced_deployment"] = 403
    with pytest.raises(K8sError, match="creating Deployment flink-taskmanager: HTTP 403"):
        ex.apply(mf.taskmanager_deployment(cfg, 1))


def test_the_whole_stack_applies_in_order_to_the_right_apis():
    cfg, cluster, _, ex = make()
    s = spec("q3")
    ex.apply_all([*mf.infrastructure(cfg, s), *mf.flink(cfg, s), *mf.load(cfg, s, [1.0])])
    kinds = {k for k, _, _ in cluster.objects}
    assert kinds == {"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Service", "StatefulSet",
                     "ConfigMap", "Deployment", "Job"}
    assert cluster.calls[0] == ("create_namespace", "t")
    assert cluster.get("ClusterRole", "bench-prometheus-t") is not None  # cluster-scoped: no namespace
    assert cluster.get("Deployment", mf.TASKMANAGER, "t")["spec"]["replicas"] == s.taskmanagers


# ------------------------------------------------------------------ waiting


def test_wait_ready_times_out_on_the_fake_clock_and_names_the_pod_states():
    cfg, cluster, clock, ex = make(K8sConfig(namespace="t", poll_s=2.0), auto_ready=False)
    ex.apply(mf.taskmanager_deployment(cfg, 2))
    with pytest.raises(K8sTimeout, match=r"Deployment t/flink-taskmanager.*flink-taskmanager-0=Pending"):
        ex.wait_ready("Deployment", mf.TASKMANAGER, timeout_s=30)
    assert 30 <= clock.slept <= 32  # polled, never slept for real


def test_wait_ready_returns_once_ready_and_job_failure_is_an_error():
    cfg, cluster, _, ex = make()
    ex.apply(mf.taskmanager_deployment(cfg, 2))
    assert ex.wait_ready("Deployment", mf.TASKMANAGER) == 0.0
    ex.apply(mf.topics_job(cfg, ["bids"]))
    job = cluster.get("Job", mf.TOPICS_JOB, "t")
    job["status"] = {"failed": 21}
    with pytest.raises(K8sError, match="failed"):
        ex.wait_ready("Job", mf.TOPICS_JOB)


# ------------------------------------------------------------------ scaling, resizing, teardown


def test_scale_taskmanagers_patches_replicas_within_the_cap():
    cfg, cluster, _, ex = make(K8sConfig(namespace="t", max_taskmanagers=5))
    ex.apply(mf.taskmanager_deployment(cfg, 2))
    ex.scale_taskmanagers(5)
    assert ex.taskmanager_replicas() == 5
    assert ex.taskmanager_pods() == [f"flink-taskmanager-{i}" for i in range(5)]
    with pytest.raises(K8sError, match="max_taskmanagers"):
        ex.scale_taskmanagers(6)


def test_resize_uses_the_resize_subresource_then_falls_back_to_a_pod_patch():
    cfg, cluster, _, ex = make(K8sConfig(namespace="t", taskmanager_cpu=1.0, taskmanager_cpu_limit=2.0))
    ex.apply(mf.taskmanager_deployment(cfg, 1))
    assert ex.resize_pod_cpu("flink-taskmanager-0", "taskmanager", 0.8) == "resize"
    res = cluster.pod_meta["flink-taskmanager-0"]["resources"]["taskmanager"]
    assert res == {"requests": {"cpu": "800m"}, "limits": {"cpu": "800m"}}
    cluster.fail["patch_namespaced_pod_resize"] = 404  # cluster older than 1.33
    assert ex.resize_pod_cpu("flink-taskmanager-0", "taskmanager", 1.5) == "pod-patch"
    assert cluster.pod_meta["flink-taskmanager-0"]["resources"]["taskmanager"]["limits"] == {"cpu": "1500m"}
    cluster.fail["patch_namespaced_pod"] = 422
    with pytest.raises(K8sError, match="not supported by this cluster"):
        ex.resize_pod_cpu("flink-taskmanager-0", "taskmanager", 1.0)


def test_teardown_deletes_namespace_and_cluster_scoped_rbac_and_is_idempotent():
    cfg, cluster, _, ex = make()
    s = spec()
    ex.apply_all([*mf.infrastructure(cfg, s), *mf.flink(cfg, s)])
    ex.teardown(wait_s=10)
    assert cluster.objects == {}
    ex.teardown()  # nothing left: no error
    deletes = [c for c in cluster.calls if c[0].startswith("delete")]
    assert deletes[:3] == [("delete_cluster_role_binding", "bench-prometheus-t"),
                           ("delete_cluster_role", "bench-prometheus-t"), ("delete_namespace", "t")]


# ------------------------------------------------------------------ rescaling


def rescaler(cfg: K8sConfig, query: str = "q1", **par: int):
    _, cluster, clock, ex = make(cfg)
    s = spec(query, **par)
    ex.apply_all(mf.flink(cfg, s))
    topo = load_topology(query)
    flink = FakeFlink(list(topo.names), dict(s.parallelism), ex.taskmanager_pods)
    r = K8sRescaler(cfg, ex, flink, topo, clock=clock, sleep=clock.sleep)
    return r, cluster, flink, ex


def test_in_place_scale_up_grows_the_deployment_before_asking_flink():
    r, cluster, flink, ex = rescaler(K8sConfig(namespace="t"))
    state = r.current()
    new, result = r.rescale("in_place", state, {"map": 3}, None)
    assert result.ok, result.error
    assert result.parallelism == {"bids_source": 1, "map": 3, "sink": 1} == new.parallelism
    assert result.method == "k8s:in_place"
    assert ex.taskmanager_replicas() == 5
    # the replicas were patched before the REST call (FakeFlink asserts enough slots exist)
    assert flink.calls == [("set_resource_requirements", {flink.vids["bids_source"]: (1, 1),
                                                          flink.vids["map"]: (1, 3), flink.vids["sink"]: (1, 1)})]
    assert ("patch_namespaced_deployment_scale", mf.TASKMANAGER) in cluster.calls


def test_in_place_scale_down_marks_idle_pods_before_shrinking():
    r, cluster, flink, ex = rescaler(K8sConfig(namespace="t"), "q1", map=4)
    state = r.current()
    assert ex.taskmanager_replicas() == 6
    new, result = r.rescale("in_place", state, {"map": 2}, None)
    assert result.ok, result.error
    assert ex.taskmanager_replicas() == 4
    costs = {pod: meta["annotations"][DELETION_COST] for pod, meta in cluster.pod_meta.items()}
    # FakeFlink keeps subtasks on the first 4 pods: those are busy, the last two idle
    assert costs == {f"flink-taskmanager-{i}": str(BUSY_COST if i < 4 else IDLE_COST) for i in range(6)}
    order = [c[0] for c in cluster.calls]
    assert order.index("patch_namespaced_pod") < max(i for i, c in enumerate(order)
                                                     if c == "patch_namespaced_deployment_scale")


def test_refusals_leave_the_cluster_untouched():
    r, cluster, flink, ex = rescaler(K8sConfig(namespace="t", max_taskmanagers=4))
    state = r.current()
    n_calls = len(cluster.calls)
    _, res = r.rescale("savepoint", state, {"map": 2}, None)
    assert not res.ok and "use_operator" in res.error
    _, res = r.rescale("in_place", state, {"map": 9}, None)
    assert not res.ok and "max_taskmanagers" in res.error
    assert res.parallelism == {"bids_source": 1, "map": 1, "sink": 1}
    assert [c for c in cluster.calls[n_calls:] if not c[0].startswith(("read", "list"))] == []
    assert flink.calls == []


def test_vertical_resizes_the_pods_hosting_the_operator():
    cfg = K8sConfig(namespace="t", taskmanager_cpu=1.0, taskmanager_cpu_limit=2.0)
    r, cluster, flink, ex = rescaler(cfg, "q1", map=2)
    state = r.current()
    new, result = r.rescale("in_place", state, {}, {"map": 0.5})
    assert result.ok, result.error
    assert result.cpu_share == {"map": 0.5}
    hosts = flink.vertex_taskmanagers("j1", flink.vids["map"])
    assert hosts == ["flink-taskmanager-1", "flink-taskmanager-2"]
    for pod in hosts:
        assert cluster.pod_meta[pod]["resources"]["taskmanager"]["limits"] == {"cpu": "1000m"}
    assert "flink-taskmanager-0" not in cluster.pod_meta
    assert r.tm_quota(ex.taskmanager_pods()) == {"flink-taskmanager-0": 2.0, "flink-taskmanager-1": 1.0,
                                                 "flink-taskmanager-2": 1.0, "flink-taskmanager-3": 2.0}


def test_operator_path_patches_the_vertex_overrides():
    cfg = K8sConfig(namespace="t", use_operator=True)
    r, cluster, flink, ex = rescaler(cfg)
    state = r.current()

    def operator_applies(**kw):  # the operator would make Flink adopt the overrides
        overrides = kw["body"]["spec"]["flinkConfiguration"]["pipeline.jobvertex-parallelism-overrides"]
        by_vid = {v: op for op, v in flink.vids.items()}
        for part in overrides.split(","):
            vid, p = part.split(":")
            flink.par[by_vid[vid]] = int(p)
        return original(**kw)

    original = ex.apis.custom.patch_namespaced_custom_object
    ex.apis.custom = type("C", (), {"patch_namespaced_custom_object": staticmethod(operator_applies),
                                    "get_namespaced_custom_object": ex.apis.custom.get_namespaced_custom_object})()
    new, result = r.rescale("in_place", state, {"map": 3}, None)
    assert result.ok, result.error
    assert result.method == "k8s:operator"
    assert new.parallelism["map"] == 3
    conf = cluster.get("FlinkDeployment", "nexmark", "t")["spec"]["flinkConfiguration"]
    assert conf["pipeline.jobvertex-parallelism-overrides"] == (
        f"{flink.vids['bids_source']}:1,{flink.vids['map']}:3,{flink.vids['sink']}:1")
    assert flink.calls == []  # no REST rescale on the operator path


def test_observe_only_never_rescales():
    cfg = K8sConfig(namespace="t", use_operator=True, observe_only=True)
    r, cluster, flink, ex = rescaler(cfg)
    state = r.current()
    before = list(cluster.calls)
    _, res = r.rescale("in_place", state, {"map": 3}, None)
    assert not res.ok and res.method == "k8s:observe_only"
    assert cluster.calls == before and flink.calls == []


def test_a_rescale_that_never_settles_is_a_failed_result_not_an_exception():
    cfg = K8sConfig(namespace="t", rescale_timeout_s=20)
    r, cluster, flink, ex = rescaler(cfg)
    state = r.current()
    flink.set_resource_requirements = lambda jid, b: None  # Flink ignores the request
    _, res = r.rescale("in_place", state, {"map": 2}, None)
    assert not res.ok and "TimeoutError" in res.error
    assert res.parallelism["map"] == 1  # resynced from the REST API


def test_savepoint_rescale_redeploys_the_job_manager_from_the_savepoint():
    """Grow, stop-with-savepoint, replace the JM Deployment with --fromSavepoint at the new parallelism."""
    from harness.backends.flink_rest import SavepointStatus

    cfg = K8sConfig(namespace="t", checkpoint_host_path="/var/lib/bench")
    r, cluster, flink, ex = rescaler(cfg)
    r.job = spec("q1")
    order: list[str] = []

    def stop_with_savepoint(jid, target_dir=None, drain=False):
        order.append("savepoint")
        flink.state = "FINISHED"
        return "trigger-1"

    flink.stop_with_savepoint = stop_with_savepoint
    flink.savepoint_status = lambda jid, trig: SavepointStatus(done=True, location="file:///flink-state/sp-1")
    flink.active_job_ids = lambda: [] if flink.state == "FINISHED" else [flink.job_id]
    real_apply = ex.apply

    def apply(manifest):
        if manifest["metadata"]["name"] == mf.JOBMANAGER:  # the new JM runs the job from the savepoint
            args = manifest["spec"]["template"]["spec"]["containers"][0]["args"]
            order.append(f"jm {args[args.index('--fromSavepoint') + 1]}")
            par = dict(kv.split("=") for kv in args[args.index("--parallelism") + 1].split(","))
            flink.par = {op: int(p) for op, p in par.items()}
            flink.job_id, flink.state = "j2", "RUNNING"
        return real_apply(manifest)

    ex.apply = apply
    state = r.current()
    new, result = r.rescale("savepoint", state, {"map": 3}, None)
    assert result.ok, result.error
    assert result.method == "k8s:savepoint" and new.job_id == "j2"
    assert new.parallelism == {"bids_source": 1, "map": 3, "sink": 1}
    assert order == ["savepoint", "jm file:///flink-state/sp-1"]
    assert ex.taskmanager_replicas() == 5
    vols = {v["name"]: v for v in mf.jobmanager_deployment(cfg, r.job)["spec"]["template"]["spec"]["volumes"]}
    assert vols["flink-state"]["hostPath"]["path"] == "/var/lib/bench/t"


# ------------------------------------------------------------------ downtime measurement

def scripted_scale_down(frames: list[str]):
    """An in-place map 2 -> 1 where each poll after the request shows the next frame:
    'old' (running at 2), 'restarting', 'deploying' (RUNNING, map's subtasks not yet running), 'new' (running at 1)."""
    from harness.backends.flink_rest import JobDetails, Vertex

    r, cluster, flink, ex = rescaler(K8sConfig(namespace="t"), "q1", map=2)
    state = r.current()
    real_set = flink.set_resource_requirements
    polls: list[str] = []

    def set_requirements(jid, bounds):
        real_set(jid, bounds)
        polls.extend(frames)

    def job(jid):
        frame = polls.pop(0) if len(polls) > 1 else (polls[0] if polls else "old")
        map_par = 2 if frame in ("old", "restarting") else 1
        job_state = "RESTARTING" if frame == "restarting" else "RUNNING"
        vs = tuple(
            Vertex(id=flink.vids[op], name=op, parallelism=map_par if op == "map" else 1,
                   status="DEPLOYING" if frame == "deploying" and op == "map" else job_state,
                   tasks={"DEPLOYING" if frame == "deploying" and op == "map" else job_state:
                          map_par if op == "map" else 1})
            for op in flink.ops
        )
        return JobDetails(jid=jid, name="q", state=job_state, vertices=vs)

    flink.set_resource_requirements = set_requirements
    flink.job = job
    return r.rescale("in_place", state, {"map": 1}, None)


def test_downtime_runs_from_the_first_poll_that_sees_the_job_down_until_it_runs_at_the_target():
    _, res = scripted_scale_down(["old", "restarting", "deploying", "new"])
    assert res.ok, res.error
    assert res.parallelism["map"] == 1
    assert res.downtime_s == pytest.approx(2 * 0.5)  # down at the 2nd poll, running at the 4th (0.5 s apart)


def test_an_outage_that_fell_between_two_polls_is_an_upper_bound_not_zero():
    """The k8s scale-down figure of 0.0 s: the job restarted (its parallelism changed) but no poll saw it down."""
    _, res = scripted_scale_down(["old", "old", "new"])
    assert res.ok, res.error
    assert res.parallelism["map"] == 1
    assert res.downtime_s == pytest.approx(2 * 0.5)  # request -> the poll that saw map at 1: never 0


def test_job_timestamps_sharpen_a_missed_outage():
    from harness.backends.flink_rest import JobDetails
    from harness.backends.wallclock import Timing

    missed = Timing(requested=100.0, down_from=None, running_at=104.0)
    restarted = JobDetails("j", "q", "RUNNING", (), timestamps={"RESTARTING": 5_000, "RUNNING": 6_200})
    assert K8sRescaler._downtime(restarted, missed) == pytest.approx(1.2)
    fresh_graph = JobDetails("j", "q", "RUNNING", (), timestamps={"CREATED": 5_000, "RUNNING": 6_200})
    assert K8sRescaler._downtime(fresh_graph, missed) == pytest.approx(4.0)
    seen = Timing(requested=100.0, down_from=101.5, running_at=104.0)
    assert K8sRescaler._downtime(restarted, seen) == pytest.approx(2.5)
