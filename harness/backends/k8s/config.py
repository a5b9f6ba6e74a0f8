"""Typed knobs of the Kubernetes backend (recorded in run.yaml).

Two ways to run Flink, chosen by `use_operator`:

- standalone (default): plain Deployments built by `manifests.py` - a job manager in application
  mode and a task-manager Deployment with one slot per pod, so "number of task managers" is the
  Deployment's replica count (thesis ch. 5: operator-based scaling, one subtask per TM);
- operator: one `FlinkDeployment` custom resource for the Flink Kubernetes Operator (native
  Kubernetes mode; Flink itself creates the task-manager pods). With `observe_only` the operator's
  own autoscaler (`job.autoscaler.enabled: true`) scales the job and the harness only records.

The job jar (built from `queries/`) must be reachable inside the cluster: either baked into the Flink
image at `jar_path`, copied from `jar_image` by an init container, or downloaded from `jar_url`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator


def cell_namespace(base: str, run_id: str) -> str:
    """A namespace per matrix cell (DNS label, <= 63 chars): `<base>-<digest of the run id>`."""
    import hashlib

    return f"{base[:50]}-{hashlib.sha256(run_id.encode()).hexdigest()[:8]}"


class K8sImages(BaseModel):
    """Pinned container images (the versions match the local backend's)."""

    model_config = ConfigDict(extra="forbid")

    flink: str = "flink:2.2.1-java17"
    kafka: str = "apache/kafka:4.1.1"
    prometheus: str = "prom/prometheus:v2.53.0"
    generator: str | None = Field(None, description="image with java and the job jar; default: the Flink image")
    fetch: str = Field("curlimages/curl:8.10.1", description="init container that downloads `jar_url`")
    pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class K8sConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # ---- cluster access
    namespace: str = Field("bench", pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length=50)
    kubeconfig: str | None = Field(None, description="path; default: $KUBECONFIG or ~/.kube/config")
    context: str | None = Field(None, description="kubeconfig context; default: the current one")
    in_cluster: bool = Field(False, description="use the pod's service account (harness runs in-cluster)")
    rest_url: str | None = Field(
        None, description="Flink REST as the harness reaches it (e.g. a port-forward); default: service DNS"
    )
    prometheus_url: str | None = Field(
        None, description="Prometheus as the harness reaches it (e.g. a port-forward); default: service DNS"
    )
    port_forward: bool = Field(
        False, description="run `kubectl port-forward` for Flink REST and Prometheus (harness outside the cluster)"
    )
    rest_local_port: int = Field(18081, ge=1024, le=65535, description="local end of the REST port-forward")
    prometheus_local_port: int = Field(19090, ge=1024, le=65535, description="local end of the Prometheus forward")
    cluster_ip: bool = Field(
        False, description="harness on a cluster node: reach Flink REST and Prometheus at their Service ClusterIPs"
    )
    kubectl: str = Field("kubectl", description="kubectl binary for port_forward")
    teardown: bool = Field(True, description="delete the namespace when the run stops")
    teardown_wait_s: float = Field(180.0, ge=0, description="wait until the namespace is gone (0: do not wait)")
    kubelet_root_dir: str | None = Field(
        None, description="harness on the node: the kubelet's root dir, to copy the TSDB snapshot out of its pod"
    )
    pod_logs_dir: str | None = Field(
        None, description="harness on the node: the kubelet's pod log dir, read when something fails to start"
    )

    # ---- what runs
    images: K8sImages = Field(default_factory=lambda: K8sImages.model_validate({}))
    jar_path: str = Field(
        "/opt/flink/usrlib/nexmark-queries.jar", description="where the job jar is inside the Flink containers"
    )
    jar_image: str | None = Field(None, description="image holding the jar at `jar_image_path` (copied in)")
    jar_image_path: str = "/jars/nexmark-queries.jar"
    jar_url: str | None = Field(None, description="http(s) URL of the jar (downloaded by an init container)")
    job_class: str = "bench.nexmark.QueryJob"
    generator_class: str = "bench.nexmark.Generator"

    # ---- resources (one slot per task manager)
    taskmanager_cpu: PositiveFloat = Field(1.0, description="CPU request of a task-manager pod")
    taskmanager_cpu_limit: PositiveFloat = Field(1.0, description="CPU limit: the capacity one TM adds")
    taskmanager_memory_mb: PositiveInt = Field(1536, description="pod memory = taskmanager.memory.process.size")
    jobmanager_cpu: PositiveFloat = 1.0
    jobmanager_cpu_limit: PositiveFloat | None = Field(None, description="default: the request")
    jobmanager_memory_mb: PositiveInt = 1600
    max_taskmanagers: PositiveInt = Field(80, description="hard cap on TM replicas (the thesis ran 80)")

    # ---- Kafka and the generator
    kafka_brokers: PositiveInt = 1
    kafka_partitions: PositiveInt = 24
    kafka_memory_mb: PositiveInt = 2048
    kafka_cpu: PositiveFloat = 1.0
    generator_producers: PositiveInt = 2
    prometheus_cpu: PositiveFloat = 0.5
    generator_cpu: PositiveFloat = 2.0
    generator_memory_mb: PositiveInt = 1024
    generator_metrics_port: int = Field(9400, ge=1024, le=65535)

    # ---- Flink behaviour (same meaning as LocalConfig's)
    checkpoint_interval_s: PositiveFloat = 10.0
    checkpoint_dir: str | None = Field(
        None, description="durable URI (s3://, a PVC's file://) for checkpoints/savepoints; None: pod-local"
    )
    checkpoint_host_path: str | None = Field(
        None, description="one-node clusters: node directory mounted in every Flink pod for checkpoints and "
        "savepoints (standalone savepoint rescaling needs storage that outlives the job manager pod)")
    adaptive_cooldown_s: float = Field(1.0, ge=0)
    adaptive_stabilization_s: float = Field(1.0, ge=0)
    adaptive_max_delay_s: float = Field(1.0, ge=0)
    scrape_interval_s: PositiveFloat = 5.0
    prometheus_discovery: Literal["kubernetes", "dns"] = Field(
        "kubernetes", description="how Prometheus finds the pods to scrape: kubernetes_sd (pod role; needs a "
        "Prometheus built with it, e.g. the official image) or dns_sd on headless per-component Services (any "
        "Prometheus, e.g. Debian's, which is built without the Kubernetes discovery)")

    # ---- the Flink Kubernetes Operator path
    use_operator: bool = Field(False, description="deploy a FlinkDeployment CR instead of plain Deployments")
    operator_flink_version: str = Field("v2_2", description="FlinkDeployment spec.flinkVersion enum value")
    upgrade_mode: Literal["stateless", "savepoint", "last-state"] = "stateless"
    observe_only: bool = Field(
        False, description="the operator's autoscaler scales (job.autoscaler.enabled); the harness only records"
    )
    operator_autoscaler: dict[str, str] = Field(
        default_factory=dict, description="extra job.autoscaler.* options (keys without the prefix)"
    )

    # ---- waiting
    ready_timeout_s: PositiveFloat = Field(600.0, description="images pulled, pods ready, job running")
    rescale_timeout_s: PositiveFloat = 300.0
    connect_timeout_s: PositiveFloat = Field(5.0, description="first API call; fail fast without a cluster")
    poll_s: PositiveFloat = 2.0

    @model_validator(mode="after")
    def _consistent(self) -> K8sConfig:
        if self.jar_image and self.jar_url:
            raise ValueError("give at most one of jar_image and jar_url")
        if self.observe_only and not self.use_operator:
            raise ValueError("observe_only benchmarks the operator's autoscaler: set use_operator: true")
        if self.taskmanager_cpu_limit < self.taskmanager_cpu:
            raise ValueError("taskmanager_cpu_limit must be >= taskmanager_cpu (the request)")
        if self.jobmanager_cpu_limit is not None and self.jobmanager_cpu_limit < self.jobmanager_cpu:
            raise ValueError("jobmanager_cpu_limit must be >= jobmanager_cpu (the request)")
        if sum((self.port_forward, self.cluster_ip, self.in_cluster)) > 1:
            raise ValueError("choose one of port_forward, cluster_ip and in_cluster")
        return self

    def resolved_rest_url(self, in_cluster_url: str) -> str:
        """Explicit URL, else the local end of our port-forward, else the service DNS (harness in-cluster)."""
        if self.rest_url:
            return self.rest_url
        return f"http://127.0.0.1:{self.rest_local_port}" if self.port_forward else in_cluster_url

    def resolved_prometheus_url(self, in_cluster_url: str) -> str:
        if self.prometheus_url:
            return self.prometheus_url
        return f"http://127.0.0.1:{self.prometheus_local_port}" if self.port_forward else in_cluster_url

    @property
    def durable_state_dir(self) -> str | None:
        """Base URI of checkpoints/savepoints that outlive a pod, if any."""
        if self.checkpoint_dir:
            return self.checkpoint_dir.rstrip("/")
        return "file:///flink-state" if self.checkpoint_host_path else None

    @property
    def flink_name(self) -> str:
        """FlinkDeployment name (operator path); its REST service is `<name>-rest`."""
        return "nexmark"
