"""K8sBackend: fail fast without a cluster (for real), and the whole lifecycle against fakes."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from harness.backends.k8s import manifests as mf
from harness.backends.k8s.backend import K8sBackend
from harness.backends.k8s.executor import K8sUnavailable
from harness.config import Experiment
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics
from harness.topology import load_topology
from harness.vocabulary import EventKind, Metric
from tests.k8s.fake_kube import FakeClock, FakeCluster, FakeFlink, fake_apis
from workloads.patterns import build_pattern


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def experiment(autoscaler: str = "static", **k8s) -> Experiment:
    return Experiment.model_validate({
        "name": "k", "backend": "k8s", "query": "q1", "pattern": {"name": "constant"},
        "autoscaler": {"name": autoscaler}, "k8s": k8s,
    })


def start(backend: K8sBackend, exp: Experiment) -> None:
    topo = load_topology(exp.query)
    backend.start(exp, build_pattern(exp.pattern, exp.seed, exp.query), topo)


# ------------------------------------------------------------------ no cluster (real client, no fakes)


def test_start_fails_fast_naming_the_missing_kubeconfig(tmp_path):
    missing = tmp_path / "no-such-kubeconfig"
    backend = K8sBackend()
    with pytest.raises(K8sUnavailable) as err:
        start(backend, experiment(kubeconfig=str(missing), context="kind-bench"))
    msg = str(err.value)
    assert str(missing) in msg and "kind-bench" in msg and "docs/k8s.md" in msg
    assert backend.ex is None  # nothing was applied
    backend.stop()  # idempotent, nothing to tear down


def test_default_kubeconfig_comes_from_the_environment(tmp_path, monkeypatch):
    missing = tmp_path / "from-env"
    monkeypatch.setenv("KUBECONFIG", str(missing))
    with pytest.raises(K8sUnavailable, match=rf"{missing}.*\(current-context\).*does not exist"):
        start(K8sBackend(), experiment())


def write_kubeconfig(path: Path, server: str) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "dead",
        "clusters": [{"name": "dead", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "x"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "u"}}],
    }))
    return path


def test_an_unknown_context_is_named(tmp_path):
    kubeconfig = write_kubeconfig(tmp_path / "config", "http://127.0.0.1:1")
    with pytest.raises(K8sUnavailable, match=r"context 'nope'.*nope"):
        start(K8sBackend(), experiment(kubeconfig=str(kubeconfig), context="nope"))


def test_start_fails_fast_when_the_api_server_does_not_answer(tmp_path):
    port = closed_port()
    kubeconfig = write_kubeconfig(tmp_path / "config", f"http://127.0.0.1:{port}")
    with pytest.raises(K8sUnavailable, match=rf"not reachable.*{kubeconfig}.*'dead'.*127\.0\.0\.1:{port}"):
        start(K8sBackend(), experiment(kubeconfig=str(kubeconfig), context="dead", connect_timeout_s=2))


def test_savepoint_without_the_operator_is_refused_before_connecting():
    exp = experiment().model_copy(update={"rescale_method": "savepoint"})
    called = []
    with pytest.raises(ValueError, match="use_operator"):
        start(K8sBackend(connector=lambda cfg: called.append(cfg)), exp)
    assert called == []


# ------------------------------------------------------------------ lifecycle on fakes


class FakeMonitor:
    def __init__(self) -> None:
        self.views: list = []

    def snapshot(self, view, t, window_s):
        self.views.append(view)
        return MetricsSnapshot(
            t=t, window_s=window_s, topology=view.topology,
            operators={op: OperatorMetrics(parallelism=p, cpu_load=0.5, cpu_jvm_load=0.2)
                       for op, p in view.parallelism.items()},
            taskmanagers=view.taskmanagers, cpu_load=0.5, cpu_jvm_load=0.2,
        )

    def query_range(self, promql, start, end, step_s):
        if "numRegisteredTaskManagers" in promql:
            return [{"metric": {}, "values": [[start + 5, "3"], [start + 10, "4"]]}]
        return []


def fake_backend(autoscaler: str = "static", **k8s):
    cluster = FakeCluster()
    clock = FakeClock()
    monitor = FakeMonitor()
    flinks: list[FakeFlink] = []
    topo = load_topology("q1")

    def rest(url):
        flinks.append(FakeFlink(list(topo.names), {op: 1 for op in topo.names},
                                lambda: backend.ex.taskmanager_pods(), job_id="job-a"))
        flinks[-1].url = url
        return flinks[-1]

    backend = K8sBackend(connector=lambda cfg: fake_apis(cluster), rest_factory=rest,
                         monitor_factory=lambda url, step: monitor, clock=clock, sleep=clock.sleep)
    exp = experiment(autoscaler, namespace="run1", prometheus_url=f"http://127.0.0.1:{closed_port()}", **k8s)
    start(backend, exp)
    return backend, cluster, clock, monitor, flinks[0]


def test_start_brings_up_infrastructure_then_flink_then_the_generator():
    backend, cluster, clock, monitor, flink = fake_backend()
    creates = [c for c in cluster.calls if c[0].startswith("create")]
    names = [n for _, n in creates]
    assert names[0] == "run1"
    assert names.index(mf.TOPICS_JOB) < names.index(mf.JOBMANAGER) < names.index(mf.GENERATOR)
    assert names[-1] == mf.GENERATOR
    # Flink is created together with the infrastructure (its JVMs start while Kafka comes up), and the
    # job is only waited for once Kafka, Prometheus and the topics are ready
    reads = [i for i, c in enumerate(cluster.calls) if c == ("read_namespaced_stateful_set", mf.KAFKA)]
    topics_ready = max(i for i, c in enumerate(cluster.calls) if c == ("read_namespaced_job", mf.TOPICS_JOB))
    assert cluster.calls.index(("create_namespaced_config_map", mf.FLINK_CONFIG)) < reads[0]
    jm_ready = [i for i, c in enumerate(cluster.calls) if c == ("read_namespaced_deployment", mf.JOBMANAGER)]
    assert jm_ready and topics_ready < jm_ready[0]
    assert flink.url == "http://flink-jobmanager.run1.svc:8081"
    assert backend.now() == 0.0
    assert backend.state.parallelism == {"bids_source": 1, "map": 1, "sink": 1}
    rates = cluster.get("ConfigMap", mf.GENERATOR_SCHEDULE, "run1")["data"]["rates.txt"]
    assert len([x for x in rates.splitlines() if not x.startswith("#")]) > 0


def test_run_rescale_snapshot_record_and_teardown(tmp_path: Path):
    backend, cluster, clock, monitor, flink = fake_backend()
    backend.advance_to(30)
    assert backend.now() == pytest.approx(30)
    snap = backend.snapshot(15)
    assert snap.taskmanagers == 3 and snap.operators["map"].parallelism == 1
    assert set(monitor.views[-1].tm_quota) == {f"flink-taskmanager-{i}" for i in range(3)}

    result = backend.rescale({"map": 2}, None)
    assert result.ok, result.error
    assert cluster.get("Deployment", mf.TASKMANAGER, "run1")["spec"]["replicas"] == 4
    backend.advance_to(60)
    assert backend.snapshot(15).operators["map"].parallelism == 2
    assert backend.drain_events() == []  # our own rescale is not an outside change

    ts = backend.timeseries()
    par = ts[(ts.metric == Metric.PARALLELISM) & (ts.operator == "map")]
    assert par.value.iloc[0] == 1 and par.value.iloc[-1] == 2
    assert (ts[ts.metric == Metric.PROCESSING].value == 0).any()  # the rescale moment is marked
    assert list(ts[ts.metric == Metric.TASKMANAGERS].value) == [3.0, 4.0]  # from the Prometheus export
    # both CPU signals (issue 8.5): the quota-relative load and the JVM's host-relative one, job and operator
    for metric, value in ((Metric.CPU, 0.5), (Metric.CPU_JVM, 0.2)):
        for op in ("", "map"):
            got = ts[(ts.metric == metric) & (ts.operator == op)].value
            assert len(got) and (got == value).all(), (metric, op)
    assert list(ts.columns) == ["ts", "metric", "operator", "subtask", "value"]

    facts = backend.facts()
    assert facts["flink_path"] == "standalone" and facts["rescales"][0]["after"]["map"] == 2
    assert facts["server_version"] == "v1.33.0-fake"
    art = backend.save_artifacts(tmp_path)
    assert "error" in art["prometheus_snapshot"]  # no Prometheus answering: recorded, not raised
    docs = list(yaml.safe_load_all((tmp_path / "k8s-manifests.yaml").read_text()))
    assert {d["kind"] for d in docs} >= {"Namespace", "StatefulSet", "Deployment", "Job", "ConfigMap"}
    assert (tmp_path / "prometheus-series.parquet").exists()

    backend.stop()
    backend.stop()
    assert cluster.objects == {}


def test_observe_only_records_the_operators_rescales_as_actions():
    backend, cluster, clock, monitor, flink = fake_backend(use_operator=True, observe_only=True)
    fd = cluster.get("FlinkDeployment", "nexmark", "run1")
    assert fd["spec"]["flinkConfiguration"]["job.autoscaler.enabled"] == "true"
    assert cluster.get("Deployment", mf.TASKMANAGER, "run1") is None
    assert not backend.rescale({"map": 3}, None).ok
    flink.par["map"] = 3  # the operator's autoscaler acts
    backend.advance_to(20)
    events = backend.drain_events()
    actions = [e for e in events if e.kind == EventKind.ACTION]
    assert len(actions) == 1 and actions[0].data["after"]["map"] == 3
    assert actions[0].data["before"]["map"] == 1
    assert backend.state.parallelism["map"] == 3
    assert not [e for e in events if e.kind == "warning"]  # autoscaler: static, as documented


def test_observe_only_with_a_harness_autoscaler_warns():
    backend, *_ = fake_backend(use_operator=True, observe_only=True, autoscaler="ds2")
    warnings = [e.reason for e in backend.drain_events() if e.kind == "warning"]
    assert len(warnings) == 1 and "'ds2'" in warnings[0]


class RecordingForward:
    instances: list[RecordingForward] = []

    def __init__(self, cmd):
        self.cmd, self.started, self.stopped = cmd, 0, 0
        RecordingForward.instances.append(self)

    def start(self):
        self.started += 1

    def ensure(self):
        return False

    def stop(self):
        self.stopped += 1


def test_port_forwards_open_after_the_services_exist_and_close_on_stop():
    cluster = FakeCluster()
    clock = FakeClock()
    topo = load_topology("q1")
    RecordingForward.instances = []
    urls = []

    def rest(url):
        urls.append(url)
        assert len(RecordingForward.instances) == 2  # forwards exist before the first REST call
        return FakeFlink(list(topo.names), {op: 1 for op in topo.names}, lambda: backend.ex.taskmanager_pods())

    backend = K8sBackend(connector=lambda cfg: fake_apis(cluster), rest_factory=rest,
                         monitor_factory=lambda url, step: FakeMonitor(), clock=clock, sleep=clock.sleep,
                         forward_factory=RecordingForward)
    start(backend, experiment(namespace="pf", port_forward=True))
    assert urls == ["http://127.0.0.1:18081"] and backend.prometheus_url == "http://127.0.0.1:19090"
    targets = [f.cmd[-2:] for f in RecordingForward.instances]
    assert targets == [["svc/flink-jobmanager", "18081:8081"], ["svc/prometheus", "19090:9090"]]
    backend.stop()
    assert [f.stopped for f in RecordingForward.instances] == [1, 1]
