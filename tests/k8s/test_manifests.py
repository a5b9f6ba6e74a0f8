"""The k8s manifests as data: names, labels vs selectors, ports, resources, Flink/Prometheus config."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from harness.backends.k8s import manifests as mf
from harness.backends.k8s.config import K8sConfig
from harness.backends.k8s.executor import KINDS
from harness.topology import load_topology

DNS1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def job(query: str = "q3", **par: int) -> mf.JobSpec:
    topo = load_topology(query)
    p = {op: par.get(op, 1) for op in topo.names}
    return mf.JobSpec(query, p, list(topo.topics), seed=7)


def everything(cfg: K8sConfig, spec: mf.JobSpec) -> list[dict]:
    return [*mf.infrastructure(cfg, spec), *mf.flink(cfg, spec), *mf.load(cfg, spec, [100.0, 200.0])]


def by(ms: list[dict], kind: str, name: str) -> dict:
    found = [m for m in ms if m["kind"] == kind and m["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} found"
    return found[0]


def pod_spec(m: dict) -> dict:
    return m["spec"]["template"]["spec"]


def container(m: dict) -> dict:
    return pod_spec(m)["containers"][0]


def test_taskmanager_replicas_are_the_sum_of_operator_parallelism():
    cfg = K8sConfig()
    spec = job("q3", join=4, person_filter=2)
    tm = by(mf.flink(cfg, spec), "Deployment", mf.TASKMANAGER)
    assert tm["spec"]["replicas"] == 1 + 1 + 2 + 4 + 1 == spec.taskmanagers
    jm_args = container(by(mf.flink(cfg, spec), "Deployment", mf.JOBMANAGER))["args"]
    par = jm_args[jm_args.index("--parallelism") + 1]
    assert dict(kv.split("=") for kv in par.split(",")) == {op: str(p) for op, p in spec.parallelism.items()}
    assert jm_args[:3] == ["standalone-job", "--job-classname", "bench.nexmark.QueryJob"]


def test_more_taskmanagers_than_allowed_is_refused():
    with pytest.raises(ValueError, match="max_taskmanagers"):
        mf.flink(K8sConfig(max_taskmanagers=4), job("q1", map=4))


def test_selectors_match_template_labels_and_services_find_their_pods():
    cfg = K8sConfig(kafka_brokers=3)
    ms = everything(cfg, job())
    workloads = [m for m in ms if m["kind"] in ("Deployment", "StatefulSet", "Job")]
    for w in workloads:
        labels = w["spec"]["template"]["metadata"]["labels"]
        sel = w["spec"].get("selector", {}).get("matchLabels", {})
        assert sel.items() <= labels.items(), w["metadata"]["name"]
    for svc in (m for m in ms if m["kind"] == "Service"):
        targets = [w for w in workloads if svc["spec"]["selector"].items() <= w["spec"]["template"]["metadata"][
            "labels"].items()]
        assert len(targets) == 1, svc["metadata"]["name"]
        ports = {p["containerPort"] for c in pod_spec(targets[0])["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in svc["spec"]["ports"]} <= ports, svc["metadata"]["name"]


def test_names_namespaces_and_labels_are_valid():
    cfg = K8sConfig(namespace="bench-a")
    for m in everything(cfg, job()) + mf.flink(K8sConfig(namespace="bench-a", use_operator=True), job()):
        meta = m["metadata"]
        assert DNS1123.match(meta["name"]), meta["name"]
        namespaced = m["kind"] not in ("Namespace", "ClusterRole", "ClusterRoleBinding")
        assert meta.get("namespace") == ("bench-a" if namespaced else None), (m["kind"], meta)
        assert meta["labels"]["app.kubernetes.io/part-of"] == mf.PART_OF


def test_jobmanager_service_exposes_rest_rpc_and_blob():
    svc = mf.jobmanager_service(K8sConfig())
    assert {p["name"]: p["port"] for p in svc["spec"]["ports"]} == {"rpc": 6123, "blob": 6124, "rest": 8081}
    settings = mf.flink_settings(K8sConfig(), standalone=True)
    assert settings["jobmanager.rpc.address"] == svc["metadata"]["name"]
    assert mf.in_cluster_rest_url(K8sConfig(namespace="x")) == "http://flink-jobmanager.x.svc:8081"


def test_taskmanager_resources_config_and_identity():
    cfg = K8sConfig(taskmanager_cpu=0.5, taskmanager_cpu_limit=2.0, taskmanager_memory_mb=2048)
    tm = mf.taskmanager_deployment(cfg, 3)
    c = container(tm)
    assert c["resources"] == {"requests": {"cpu": "500m", "memory": "2048Mi"},
                              "limits": {"cpu": "2000m", "memory": "2048Mi"}}
    assert {"resourceName": "cpu", "restartPolicy": "NotRequired"} in c["resizePolicy"]
    assert "-Dtaskmanager.resource-id=$(POD_NAME)" in c["args"]  # tm_id label = pod name
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert "POD_NAME" in env and env["JOB_MANAGER_RPC_ADDRESS"] == mf.JOBMANAGER  # entrypoint rewrites rpc address
    conf = yaml.safe_load(mf.flink_configmap(cfg)["data"]["config.yaml"])
    assert conf["taskmanager.numberOfTaskSlots"] == 1
    assert conf["taskmanager.memory.process.size"] == "2048m"
    assert conf["jobmanager.scheduler"] == "adaptive"
    assert conf["metrics.reporter.prom.port"] == mf.REPORTER_PORT
    assert conf["metrics.reporter.prom.factory.class"].endswith("PrometheusReporterFactory")
    assert conf["slotmanager.number-of-slots.max"] == cfg.max_taskmanagers
    mounts = {m["mountPath"] for m in c["volumeMounts"]}
    assert "/opt/flink/conf" in mounts


def test_flink_pods_and_generator_are_annotated_for_scraping_on_their_metrics_port():
    cfg = K8sConfig(generator_metrics_port=9411)
    ms = everything(cfg, job())
    for name, port in ((mf.JOBMANAGER, mf.REPORTER_PORT), (mf.TASKMANAGER, mf.REPORTER_PORT)):
        d = by(ms, "Deployment", name)
        ann = d["spec"]["template"]["metadata"]["annotations"]
        assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == str(port)
        assert port in {p["containerPort"] for p in container(d)["ports"]}
    gen = by(ms, "Job", mf.GENERATOR)
    assert gen["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9411"
    args = container(gen)["command"]
    assert args[args.index("--metrics-port") + 1] == "9411"
    assert args[args.index("--metrics-host") + 1] == "0.0.0.0"


def test_dns_discovery_scrapes_every_annotated_pod_through_headless_services(tmp_path):
    """Debian's Prometheus (the test cluster's image) has no kubernetes_sd: the dns variant must find the
    same pods on the same ports, and be a config that Prometheus itself accepts."""
    cfg = K8sConfig(namespace="nsx", prometheus_discovery="dns", generator_metrics_port=9400)
    ms = everything(cfg, job("q1"))
    annotated = {(m["spec"]["template"]["metadata"]["labels"]["component"],
                  int(m["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"]))
                 for m in ms if m["kind"] in ("Deployment", "Job")
                 and "prometheus.io/scrape" in m["spec"]["template"]["metadata"].get("annotations", {})}
    assert annotated == {("jobmanager", mf.REPORTER_PORT), ("taskmanager", mf.REPORTER_PORT), ("generator", 9400)}
    settings = yaml.safe_load(by(ms, "ConfigMap", mf.PROMETHEUS_CONFIG)["data"]["prometheus.yml"])
    targets = set()
    for sc in settings["scrape_configs"]:
        (sd,) = sc["dns_sd_configs"]
        (name,) = sd["names"]
        svc_name, ns, _ = name.split(".")
        svc = by(ms, "Service", svc_name)
        assert ns == "nsx" and svc["spec"]["clusterIP"] == "None" and svc["spec"]["publishNotReadyAddresses"]
        assert svc["spec"]["ports"][0]["port"] == sd["port"]
        targets.add((svc["spec"]["selector"]["component"], sd["port"]))
    assert targets == annotated
    promtool = shutil.which("promtool")
    if promtool:
        f = tmp_path / "prometheus.yml"
        f.write_text(yaml.safe_dump(settings))
        res = subprocess.run([promtool, "check", "config", str(f)], capture_output=True, text=True)
        assert res.returncode == 0, res.stdout + res.stderr
    assert not [m for m in everything(K8sConfig(namespace="nsx"), job("q1"))
                if m["kind"] == "Service" and m["metadata"]["name"].startswith("metrics-")]


def test_flink_config_keeps_the_distributions_java17_options():
    """The config map replaces the distribution's config.yaml; its --add-opens list must survive."""
    cfg = K8sConfig(namespace="nsx")
    settings = yaml.safe_load(mf.flink_configmap(cfg)["data"]["config.yaml"])
    assert settings["env.java.opts.all"] == mf.FLINK_JAVA17_OPTS
    assert "--add-opens=java.base/java.util=ALL-UNNAMED" in mf.FLINK_JAVA17_OPTS.split()
    pyflink = pytest.importorskip("pyflink")
    dist = yaml.safe_load((Path(pyflink.__file__).parent / "conf" / "config.yaml").read_text())
    assert set(mf.FLINK_JAVA17_OPTS.split()) == set(dist["env"]["java"]["opts"]["all"].split())


def test_prometheus_discovers_annotated_pods_with_rbac_for_its_service_account():
    cfg = K8sConfig(namespace="nsx", scrape_interval_s=3)
    settings = yaml.safe_load(mf.prometheus_configmap(cfg)["data"]["prometheus.yml"])
    assert settings["global"]["scrape_interval"] == "3s"
    sd = settings["scrape_configs"][0]["kubernetes_sd_configs"][0]
    assert sd == {"role": "pod", "namespaces": {"names": ["nsx"]}}
    keep = settings["scrape_configs"][0]["relabel_configs"][0]
    assert keep["action"] == "keep" and keep["source_labels"] == [
        "__meta_kubernetes_pod_annotation_prometheus_io_scrape"]
    sa, role, binding = mf.prometheus_rbac(cfg)
    dep = mf.prometheus_deployment(cfg)
    assert pod_spec(dep)["serviceAccountName"] == sa["metadata"]["name"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"] == "bench-prometheus-nsx"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": "nsx"}]
    assert {"list", "watch"} <= set(role["rules"][0]["verbs"]) and "pods" in role["rules"][0]["resources"]
    assert "--web.enable-admin-api" in container(dep)["args"]
    volumes = {v["name"]: v for v in pod_spec(dep)["volumes"]}
    assert volumes["config"]["configMap"]["name"] == mf.PROMETHEUS_CONFIG


def test_kafka_quorum_bootstrap_and_topics_agree():
    cfg = K8sConfig(namespace="k", kafka_brokers=3, kafka_partitions=12)
    sts = mf.kafka_statefulset(cfg)
    env = {e["name"]: e["value"] for e in container(sts)["env"]}
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"].count("@") == 3
    assert sts["spec"]["replicas"] == 3 and sts["spec"]["serviceName"] == mf.kafka_service(cfg)["metadata"]["name"]
    assert mf.kafka_service(cfg)["spec"]["clusterIP"] == "None"
    boot = mf.bootstrap(cfg)
    assert boot.split(",")[2] == "kafka-2.kafka.k.svc:9092"
    spec = job("q3")
    jm_args = container(mf.jobmanager_deployment(cfg, spec))["args"]
    gen_args = container(mf.generator_job(cfg, spec))["command"]
    assert jm_args[jm_args.index("--bootstrap") + 1] == boot == gen_args[gen_args.index("--bootstrap") + 1]
    assert gen_args[gen_args.index("--topics") + 1] == "auctions,persons"
    script = container(mf.topics_job(cfg, spec.topics))["command"][-1]
    assert script.count("--create --if-not-exists") == 2 and "--partitions 12" in script


def test_generator_schedule_is_one_rate_per_line_and_bounded():
    cm = mf.generator_schedule_configmap(K8sConfig(), [10, 20.5, 0])
    lines = [ln for ln in cm["data"]["rates.txt"].splitlines() if not ln.startswith("#")]
    assert [float(x) for x in lines] == [10.0, 20.5, 0.0]
    gen = mf.generator_job(K8sConfig(), job())
    cmd = container(gen)["command"]
    assert cmd[cmd.index("--schedule") + 1] == "/schedule/rates.txt"
    vols = {v["name"]: v for v in pod_spec(gen)["volumes"]}
    assert vols["schedule"]["configMap"]["name"] == cm["metadata"]["name"]
    assert gen["spec"]["backoffLimit"] == 0
    with pytest.raises(ValueError, match="too long"):
        mf.generator_schedule_configmap(K8sConfig(), [123456.789] * 100_000)


@pytest.mark.parametrize("source", ["url", "image", "baked"])
def test_job_jar_reaches_every_flink_pod_and_the_generator(source):
    kw = {"url": {"jar_url": "https://example.org/nexmark.jar"}, "image": {"jar_image": "reg/jar:1"},
          "baked": {}}[source]
    cfg = K8sConfig(**kw)
    spec = job("q1")
    for m in (mf.jobmanager_deployment(cfg, spec), mf.taskmanager_deployment(cfg, 3), mf.generator_job(cfg, spec)):
        init = pod_spec(m).get("initContainers", [])
        if source == "baked":
            assert init == []
            continue
        assert len(init) == 1 and cfg.jar_path in init[0]["command"]
        shared = {v["name"] for v in pod_spec(m)["volumes"]} & {v["name"] for v in init[0]["volumeMounts"]}
        assert shared and any(vm["name"] in shared and vm["mountPath"] == "/opt/flink/usrlib"
                              for vm in container(m)["volumeMounts"])


def test_operator_path_builds_a_flinkdeployment_with_string_config():
    cfg = K8sConfig(use_operator=True, jar_url="https://example.org/j.jar")
    spec = job("q1", map=3)
    ms = mf.flink(cfg, spec)
    assert [m["kind"] for m in ms] == ["ServiceAccount", "Role", "RoleBinding", "FlinkDeployment"]
    fd = ms[-1]
    assert fd["apiVersion"] == "flink.apache.org/v1beta1"
    assert fd["spec"]["serviceAccount"] == ms[0]["metadata"]["name"]
    conf = fd["spec"]["flinkConfiguration"]
    assert all(isinstance(v, str) for v in conf.values())
    assert conf["taskmanager.numberOfTaskSlots"] == "1" and conf["jobmanager.scheduler"] == "adaptive"
    assert "job.autoscaler.enabled" not in conf
    assert "jobmanager.rpc.address" not in conf  # native mode: the operator wires the cluster
    assert fd["spec"]["job"]["jarURI"] == f"local://{cfg.jar_path}"
    assert "--parallelism" in fd["spec"]["job"]["args"]
    assert fd["spec"]["podTemplate"]["spec"]["initContainers"][0]["name"] == "fetch-jar"
    assert mf.in_cluster_rest_url(cfg) == "http://nexmark-rest.bench.svc:8081"


def test_observe_only_switches_the_operator_autoscaler_on_with_prefixed_options():
    cfg = K8sConfig(use_operator=True, observe_only=True,
                    operator_autoscaler={"metrics.window": "10m", "job.autoscaler.utilization.target": "0.6"})
    conf = mf.flink_deployment(cfg, job("q1"))["spec"]["flinkConfiguration"]
    assert conf["job.autoscaler.enabled"] == "true"
    assert conf["job.autoscaler.metrics.window"] == "10m"
    assert conf["job.autoscaler.utilization.target"] == "0.6"
    assert conf["job.autoscaler.vertex.max-parallelism"] == str(cfg.max_taskmanagers)


def test_overrides_string_uses_vertex_ids():
    assert mf.jobvertex_overrides({"a": "v1", "b": "v2"}, {"a": 3, "b": 1, "c": 9}) == "v1:3,v2:1"
    fd = mf.flink_deployment(K8sConfig(use_operator=True), job("q1"), overrides="v1:3")
    assert fd["spec"]["flinkConfiguration"]["pipeline.jobvertex-parallelism-overrides"] == "v1:3"


def test_config_rejects_inconsistent_choices():
    with pytest.raises(ValidationError, match="use_operator"):
        K8sConfig(observe_only=True)
    with pytest.raises(ValidationError, match="at most one"):
        K8sConfig(jar_url="http://x/j.jar", jar_image="img")
    with pytest.raises(ValidationError):
        K8sConfig(namespace="Not_Valid")
    with pytest.raises(ValidationError, match="limit"):
        K8sConfig(taskmanager_cpu=2.0, taskmanager_cpu_limit=1.0)


def _client_methods(module: str) -> set[str]:
    """Method names defined by one generated API module of the official client (read as text: importing
    and introspecting the client classes takes seconds)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("kubernetes")
    assert spec is not None and spec.origin is not None
    text = (Path(spec.origin).parent / "client" / "api" / f"{module}.py").read_text()
    return set(re.findall(r"^    def ([a-z_]+)\(", text, re.M))


def test_kind_table_names_real_client_methods():
    """The executor's kind -> method table must name methods the official client really has."""
    apis = {"core": _client_methods("core_v1_api"), "apps": _client_methods("apps_v1_api"),
            "batch": _client_methods("batch_v1_api"), "rbac": _client_methods("rbac_authorization_v1_api")}
    for kind, (api, suffix, _) in KINDS.items():
        for verb in ("create", "read", "replace", "delete"):
            assert f"{verb}_{suffix}" in apis[api], (kind, verb)
    assert "patch_namespaced_deployment_scale" in apis["apps"]
    assert {"list_namespaced_pod", "patch_namespaced_pod", "patch_namespaced_pod_resize"} <= apis["core"]
    custom = _client_methods("custom_objects_api")
    for verb in ("create", "get", "replace", "patch", "delete"):
        assert f"{verb}_namespaced_custom_object" in custom


def _lost_fields(ours, back, path=""):
    """Paths present in `ours` but missing or different after the round trip through the client models."""
    if isinstance(ours, dict):
        if not isinstance(back, dict):
            return [path]
        return [p for k, v in ours.items() for p in
                ([f"{path}/{k}"] if k not in back else _lost_fields(v, back[k], f"{path}/{k}"))]
    if isinstance(ours, list):
        if not isinstance(back, list) or len(back) != len(ours):
            return [path]
        return [p for i, (a, b) in enumerate(zip(ours, back, strict=True)) for p in _lost_fields(a, b, f"{path}[{i}]")]
    return [] if ours == back else [f"{path}: {ours!r} != {back!r}"]


@pytest.mark.parametrize("kw", [{}, {"jar_url": "https://x/j.jar", "kafka_brokers": 3}, {"jar_image": "r/j:1"},
                                {"use_operator": True}])
def test_builtin_manifests_survive_the_official_client_models(kw):
    """Field names and types checked against the Kubernetes OpenAPI models of the installed client:
    a typo'd field is dropped by the model (a lost path here), a wrong type fails validation."""
    from kubernetes import client as k8s

    cfg = K8sConfig(**kw)
    api = k8s.ApiClient()
    for m in everything(cfg, job("q3")):
        if m["kind"] == "FlinkDeployment":
            continue  # a custom resource: no client model (see docs/k8s.md, untested)
        model = getattr(k8s, f"V1{m['kind']}").from_dict(m)
        assert _lost_fields(m, api.sanitize_for_serialization(model)) == [], (m["kind"], m["metadata"]["name"])


def test_the_rest_api_serves_a_fresh_job_graph_to_every_downtime_poll():
    """Flink caches `GET /jobs/:id` for `web.refresh-interval` (3 s by default): longer than the rescaler's
    poll interval, a short outage would fall between two snapshots and read as no outage."""
    from harness.backends.k8s.rescale import POLL_S

    for standalone in (True, False):
        refresh = mf.flink_settings(K8sConfig(), standalone=standalone)["web.refresh-interval"]
        assert refresh.endswith("ms") and 0 < int(refresh[:-2]) < POLL_S * 1000
