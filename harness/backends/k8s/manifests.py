"""Kubernetes manifests of the benchmark stack, as plain dicts (pure functions, no I/O).

The stack mirrors the local backend (DESIGN.md, `k8s` row):

- Kafka: a KRaft StatefulSet (every broker is also a controller) behind a headless Service, so
  brokers have stable DNS names; topics are created by a one-shot Job before Flink starts;
- Flink, standalone path: a config map (`config.yaml`), a job-manager Deployment in application
  mode (`standalone-job`, adaptive scheduler) with a Service for REST/RPC/blob, and a task-manager
  Deployment whose pods have one slot each. Each operator has its own slot-sharing group in the job,
  so one pod runs one subtask and replicas = sum of per-operator parallelism (thesis ch. 5);
- Flink, operator path: one `FlinkDeployment` custom resource (Flink Kubernetes Operator, native
  mode), optionally with the operator's autoscaler switched on (`observe_only`);
- Prometheus with `kubernetes_sd_configs` (role: pod) keeping pods annotated
  `prometheus.io/scrape: "true"`; it needs to list pods, hence a ServiceAccount, ClusterRole and
  ClusterRoleBinding (cluster-scoped names carry the namespace so parallel benches don't clash);
- the load generator (`bench.nexmark.Generator` from the job jar) as a Job reading its per-second
  schedule from a ConfigMap.

Every Flink pod gets the job jar either from the Flink image itself, from `jar_image` (init
container copies it) or from `jar_url` (init container downloads it) - see K8sConfig.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from harness.backends.k8s.config import K8sConfig

Manifest = dict[str, Any]

PART_OF = "autoscaling-bench"
FLINK_CONFIG = "flink-config"
JOBMANAGER = "flink-jobmanager"
TASKMANAGER = "flink-taskmanager"
KAFKA = "kafka"
TOPICS_JOB = "kafka-topics"
PROMETHEUS = "prometheus"
PROMETHEUS_CONFIG = "prometheus-config"
GENERATOR = "generator"
GENERATOR_SCHEDULE = "generator-schedule"
FLINK_SA = "flink"

REST_PORT = 8081
RPC_PORT = 6123
BLOB_PORT = 6124
TM_RPC_PORT = 6122
REPORTER_PORT = 9249
KAFKA_PORT = 9092
KAFKA_CONTROLLER_PORT = 9093
PROMETHEUS_PORT = 9090
KAFKA_CLUSTER_ID = "Touf0xNBmHgWfifvGNQJkg"  # base64url of 16 bytes (md5 of "autoscaling-bench"); fixed id
USRLIB = "/opt/flink/usrlib"

FLINK_DEPLOYMENT_API = ("flink.apache.org", "v1beta1", "flinkdeployments")


@dataclass(frozen=True)
class JobSpec:
    """What the Flink job runs: query, per-operator parallelism, Kafka topics, seed."""

    query: str
    parallelism: Mapping[str, int]
    topics: Sequence[str]
    seed: int = 1
    extra_args: Sequence[str] = field(default_factory=tuple)

    @property
    def taskmanagers(self) -> int:
        """One slot per task manager and one slot-sharing group per operator: TMs = sum of parallelism."""
        return taskmanager_replicas(self.parallelism)


# ------------------------------------------------------------------ small helpers


def labels(component: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": PART_OF, "app": "bench", "component": component}


def selector(component: str) -> dict[str, str]:
    """The subset of `labels` used in selectors (a Deployment's selector is immutable: keep it small)."""
    return {"app": "bench", "component": component}


def cpu(cores: float) -> str:
    return f"{int(round(cores * 1000))}m"


def mem(mb: int) -> str:
    return f"{mb}Mi"


def scrape_annotations(port: int) -> dict[str, str]:
    return {"prometheus.io/scrape": "true", "prometheus.io/port": str(port), "prometheus.io/path": "/metrics"}


def _meta(name: str, cfg: K8sConfig, component: str, namespaced: bool = True) -> dict[str, Any]:
    m: dict[str, Any] = {"name": name, "labels": labels(component)}
    if namespaced:
        m["namespace"] = cfg.namespace
    return m


def taskmanager_replicas(parallelism: Mapping[str, int]) -> int:
    return int(sum(int(p) for p in parallelism.values()))


def parallelism_arg(parallelism: Mapping[str, int]) -> str:
    """`--parallelism` of QueryJob: `op=p,op=p` in a stable order."""
    return ",".join(f"{op}={int(p)}" for op, p in parallelism.items())


def jobvertex_overrides(vertex_ids: Mapping[str, str], parallelism: Mapping[str, int]) -> str:
    """`pipeline.jobvertex-parallelism-overrides`: `vertexId:p,...` for the operators we know ids of."""
    return ",".join(f"{vertex_ids[op]}:{int(p)}" for op, p in parallelism.items() if op in vertex_ids)


def bootstrap(cfg: K8sConfig) -> str:
    """Broker addresses through the headless Service (stable per-pod DNS names)."""
    return ",".join(f"{KAFKA}-{i}.{KAFKA}.{cfg.namespace}.svc:{KAFKA_PORT}" for i in range(cfg.kafka_brokers))


def rest_service_name(cfg: K8sConfig) -> str:
    return f"{cfg.flink_name}-rest" if cfg.use_operator else JOBMANAGER


def in_cluster_rest_url(cfg: K8sConfig) -> str:
    return f"http://{rest_service_name(cfg)}.{cfg.namespace}.svc:{REST_PORT}"


def in_cluster_prometheus_url(cfg: K8sConfig) -> str:
    return f"http://{PROMETHEUS}.{cfg.namespace}.svc:{PROMETHEUS_PORT}"


def _seconds(s: float) -> str:
    return f"{int(round(s * 1000))}ms"


# ------------------------------------------------------------------ namespace


def namespace(cfg: K8sConfig) -> Manifest:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(cfg.namespace, cfg, "namespace", False)}


# ------------------------------------------------------------------ Kafka


def kafka_service(cfg: K8sConfig) -> Manifest:
    """Headless: gives `kafka-<i>.kafka.<ns>.svc` names for the advertised listeners and the quorum."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(KAFKA, cfg, KAFKA),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # controllers must find each other before they are ready
            "selector": selector(KAFKA),
            "ports": [
                {"name": "broker", "port": KAFKA_PORT, "targetPort": KAFKA_PORT},
                {"name": "controller", "port": KAFKA_CONTROLLER_PORT, "targetPort": KAFKA_CONTROLLER_PORT},
            ],
        },
    }


def kafka_statefulset(cfg: K8sConfig) -> Manifest:
    """KRaft brokers with combined broker+controller roles, configured by the image's env convention.

    The node id and advertised host depend on the pod ordinal, so a tiny shell wrapper derives them
    from the hostname (`kafka-3` -> node 3) before exec'ing the image's own start script.
    """
    ns = cfg.namespace
    voters = ",".join(
        f"{i}@{KAFKA}-{i}.{KAFKA}.{ns}.svc:{KAFKA_CONTROLLER_PORT}" for i in range(cfg.kafka_brokers)
    )
    rf = str(min(3, cfg.kafka_brokers))
    env = {
        "CLUSTER_ID": KAFKA_CLUSTER_ID,
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://:{KAFKA_PORT},CONTROLLER://:{KAFKA_CONTROLLER_PORT}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": voters,
        "KAFKA_LOG_DIRS": "/var/lib/kafka/data",
        "KAFKA_NUM_PARTITIONS": str(cfg.kafka_partitions),
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": rf,
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": rf,
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_HEAP_OPTS": f"-Xmx{cfg.kafka_memory_mb // 2}m -Xms{cfg.kafka_memory_mb // 2}m",
    }
    start = (
        "export KAFKA_NODE_ID=${HOSTNAME##*-}; "
        f"export KAFKA_ADVERTISED_LISTENERS=PLAINTEXT://${{HOSTNAME}}.{KAFKA}.{ns}.svc:{KAFKA_PORT}; "
        "exec /etc/kafka/docker/run"
    )
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(KAFKA, cfg, KAFKA),
        "spec": {
            "serviceName": KAFKA,
            "replicas": cfg.kafka_brokers,
            "podManagementPolicy": "Parallel",  # all voters must start to form the quorum
            "selector": {"matchLabels": selector(KAFKA)},
            "template": {
                "metadata": {"labels": labels(KAFKA)},
                "spec": {
                    "containers": [{
                        "name": KAFKA,
                        "image": cfg.images.kafka,
                        "imagePullPolicy": cfg.images.pull_policy,
                        "command": ["sh", "-c", start],
                        "env": [{"name": k, "value": v} for k, v in env.items()],
                        "ports": [
                            {"name": "broker", "containerPort": KAFKA_PORT},
                            {"name": "controller", "containerPort": KAFKA_CONTROLLER_PORT},
                        ],
                        "readinessProbe": {"tcpSocket": {"port": KAFKA_PORT}, "periodSeconds": 5},
                        "resources": {
                            "requests": {"cpu": cpu(cfg.kafka_cpu), "memory": mem(cfg.kafka_memory_mb)},
                            "limits": {"memory": mem(cfg.kafka_memory_mb)},
                        },
                        "volumeMounts": [{"name": "data", "mountPath": "/var/lib/kafka/data"}],
                    }],
                    "volumes": [{"name": "data", "emptyDir": {}}],  # a benchmark needs no durable log
                },
            },
        },
    }


def topics_job(cfg: K8sConfig, topics: Iterable[str]) -> Manifest:
    """Create the query's topics before Flink starts (a KafkaSource on a missing topic fails)."""
    script = " && ".join(
        f"/opt/kafka/bin/kafka-topics.sh --bootstrap-server {bootstrap(cfg)} --create --if-not-exists"
        f" --topic {t} --partitions {cfg.kafka_partitions} --replication-factor {min(3, cfg.kafka_brokers)}"
        for t in topics
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(TOPICS_JOB, cfg, TOPICS_JOB),
        "spec": {
            "backoffLimit": 20,  # retried until the brokers answer
            "template": {
                "metadata": {"labels": labels(TOPICS_JOB)},
                "spec": {
                    "restartPolicy": "OnFailure",
                    "containers": [{
                        "name": TOPICS_JOB,
                        "image": cfg.images.kafka,
                        "imagePullPolicy": cfg.images.pull_policy,
                        "command": ["sh", "-c", script or "true"],
                    }],
                },
            },
        },
    }


# ------------------------------------------------------------------ Flink


# The Flink 2.2 distribution's `env.java.opts.all` (its conf/config.yaml: "required for Java 17 support").
# The config map replaces that file, so the list is carried over, as the local backend does
# (local/flink.py `_distribution_java_opts`); without it the job manager dies submitting the job
# (InaccessibleObjectException: java.base does not "opens java.util").
FLINK_JAVA17_OPTS = " ".join([
    *(f"--add-exports={m}=ALL-UNNAMED" for m in (
        "java.rmi/sun.rmi.registry", "jdk.compiler/com.sun.tools.javac.api", "jdk.compiler/com.sun.tools.javac.file",
        "jdk.compiler/com.sun.tools.javac.parser", "jdk.compiler/com.sun.tools.javac.tree",
        "jdk.compiler/com.sun.tools.javac.util", "java.security.jgss/sun.security.krb5")),
    *(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
        "java.lang", "java.net", "java.io", "java.nio", "sun.nio.ch", "java.lang.reflect", "java.text", "java.time",
        "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.concurrent.locks")),
])


# How long the job manager's REST API serves a cached job graph (`web.refresh-interval`, Flink's
# DefaultExecutionGraphCache; default 3 s). The rescaler measures downtime by polling `GET /jobs/:id`
# every 0.5 s: with the default, an outage shorter than ~3 s (an in-place scale-down onto warm task
# managers) can fall between two snapshots and is never seen. Below the poll interval, every poll
# sees the job as it is.
REST_REFRESH_S = 0.2


def flink_settings(cfg: K8sConfig, *, standalone: bool) -> dict[str, Any]:
    """Flink configuration as flat keys (same choices as the local backend, see local/flink.py).

    One slot per TM; adaptive scheduler with short cooldown/stabilisation so
    `PUT /jobs/:id/resource-requirements` takes effect within seconds; Prometheus reporter on a fixed
    port (every pod has its own IP); `slotmanager.number-of-slots.max` caps the TMs Flink may ask for.
    """
    s: dict[str, Any] = {
        "taskmanager.numberOfTaskSlots": 1,
        "taskmanager.memory.process.size": f"{cfg.taskmanager_memory_mb}m",
        # the local backend's fixed JVM parts, so a 768m task manager still has a useful task heap
        "taskmanager.memory.jvm-metaspace.size": "160m",
        "taskmanager.memory.jvm-overhead.min": "128m",
        "taskmanager.memory.framework.off-heap.size": "64m",
        "taskmanager.memory.managed.size": "32m",
        "jobmanager.memory.process.size": f"{cfg.jobmanager_memory_mb}m",
        "parallelism.default": 1,
        "jobmanager.scheduler": "adaptive",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": _seconds(cfg.adaptive_cooldown_s),
        "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout":
            _seconds(cfg.adaptive_stabilization_s),
        "jobmanager.adaptive-scheduler.rescale-trigger.max-delay": _seconds(cfg.adaptive_max_delay_s),
        "jobmanager.execution.failover-strategy": "region",
        "slotmanager.number-of-slots.max": cfg.max_taskmanagers,
        "metrics.reporter.prom.factory.class": "org.apache.flink.metrics.prometheus.PrometheusReporterFactory",
        "metrics.reporter.prom.port": REPORTER_PORT,
        "state.backend.type": "hashmap",
        "execution.checkpointing.interval": _seconds(cfg.checkpoint_interval_s),
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": 1000,
        "restart-strategy.fixed-delay.delay": "2s",
        "heartbeat.interval": 2000,
        "heartbeat.timeout": 15000,
        "web.refresh-interval": _seconds(REST_REFRESH_S),
        "env.java.opts.all": FLINK_JAVA17_OPTS,
    }
    base = cfg.durable_state_dir
    if base:
        s["execution.checkpointing.dir"] = f"{base}/checkpoints"
        s["execution.checkpointing.savepoint-dir"] = f"{base}/savepoints"
    if standalone:
        s.update({
            "jobmanager.rpc.address": JOBMANAGER,
            "jobmanager.rpc.port": RPC_PORT,
            "blob.server.port": BLOB_PORT,
            "taskmanager.rpc.port": TM_RPC_PORT,
            "rest.port": REST_PORT,
            "rest.address": JOBMANAGER,
            "rest.bind-address": "0.0.0.0",
            "jobmanager.bind-host": "0.0.0.0",
            "taskmanager.bind-host": "0.0.0.0",
            # after stop-with-savepoint the job manager waits to be replaced (with --fromSavepoint) instead
            # of exiting, which would make Kubernetes restart it and rerun the job from scratch
            "execution.shutdown-on-application-finish": False,
        })
    return s


LOG4J_CONSOLE = """\
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = ConsoleAppender
appender.console.name = ConsoleAppender
appender.console.type = CONSOLE
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
logger.kafka.name = org.apache.kafka
logger.kafka.level = WARN
"""


def flink_configmap(cfg: K8sConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(FLINK_CONFIG, cfg, "flink"),
        "data": {
            "config.yaml": yaml.safe_dump(flink_settings(cfg, standalone=True), sort_keys=True),
            "log4j-console.properties": LOG4J_CONSOLE,
        },
    }


def jar_delivery(cfg: K8sConfig) -> tuple[list[Manifest], list[Manifest], list[Manifest]]:
    """(init containers, volumes, volume mounts) that put the job jar at `cfg.jar_path`.

    Nothing when the jar is baked into the Flink image; otherwise an emptyDir over the jar's
    directory filled by an init container (copied from `jar_image` or downloaded from `jar_url`).
    """
    if not cfg.jar_image and not cfg.jar_url:
        return [], [], []
    jar_dir = posixpath.dirname(cfg.jar_path)
    mount = {"name": "job-jar", "mountPath": jar_dir}
    if cfg.jar_image:
        init = {
            "name": "fetch-jar",
            "image": cfg.jar_image,
            "imagePullPolicy": cfg.images.pull_policy,
            "command": ["cp", cfg.jar_image_path, cfg.jar_path],
            "volumeMounts": [mount],
        }
    else:
        init = {
            "name": "fetch-jar",
            "image": cfg.images.fetch,
            "imagePullPolicy": cfg.images.pull_policy,
            "command": ["curl", "-fsSL", "--retry", "5", "-o", cfg.jar_path, str(cfg.jar_url)],
            "volumeMounts": [mount],
        }
    return [init], [{"name": "job-jar", "emptyDir": {}}], [mount]


def job_args(cfg: K8sConfig, job: JobSpec) -> list[str]:
    """QueryJob's arguments (queries/src/main/java/bench/nexmark/QueryJob.java)."""
    return [
        "--query", job.query,
        "--bootstrap", bootstrap(cfg),
        "--group-id", f"bench-{cfg.namespace}-{job.query}",
        "--parallelism", parallelism_arg(job.parallelism),
        "--checkpoint-interval-ms", str(int(cfg.checkpoint_interval_s * 1000)),
        *job.extra_args,
    ]


def _flink_volumes(cfg: K8sConfig) -> tuple[list[Manifest], list[Manifest], list[Manifest]]:
    init, volumes, mounts = jar_delivery(cfg)
    volumes = [
        {"name": "flink-config", "configMap": {"name": FLINK_CONFIG, "items": [
            {"key": "config.yaml", "path": "config.yaml"},
            {"key": "log4j-console.properties", "path": "log4j-console.properties"},
        ]}},
        *volumes,
    ]
    mounts = [{"name": "flink-config", "mountPath": "/opt/flink/conf"}, *mounts]
    if cfg.checkpoint_host_path and not cfg.checkpoint_dir:
        path = posixpath.join(cfg.checkpoint_host_path, cfg.namespace)
        volumes.append({"name": "flink-state", "hostPath": {"path": path, "type": "DirectoryOrCreate"}})
        mounts.append({"name": "flink-state", "mountPath": "/flink-state"})
    return init, volumes, mounts


def _pod_env() -> list[Manifest]:
    """Pod identity for `-D` arguments, and the job-manager address: the Flink image's entrypoint writes
    `jobmanager.rpc.address` from JOB_MANAGER_RPC_ADDRESS (default: the pod's own hostname) into the
    config when it can, so it must name the Service too."""
    return [
        {"name": "JOB_MANAGER_RPC_ADDRESS", "value": JOBMANAGER},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
    ]


def jobmanager_deployment(cfg: K8sConfig, job: JobSpec, from_savepoint: str | None = None) -> Manifest:
    """Application mode: the JM runs the job from the jar on its classpath (`standalone-job`);
    `from_savepoint` restores it (the standalone savepoint rescale replaces the JM this way)."""
    init, volumes, mounts = _flink_volumes(cfg)
    args = ["standalone-job", "--job-classname", cfg.job_class]
    if from_savepoint:
        args += ["--fromSavepoint", from_savepoint]
    if posixpath.dirname(cfg.jar_path) != USRLIB:
        args += ["--jars", f"file://{cfg.jar_path}"]
    args += job_args(cfg, job)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(JOBMANAGER, cfg, "jobmanager"),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector("jobmanager")},
            "template": {
                "metadata": {"labels": labels("jobmanager"), "annotations": scrape_annotations(REPORTER_PORT)},
                "spec": {
                    "initContainers": init,
                    "containers": [{
                        "name": "jobmanager",
                        "image": cfg.images.flink,
                        "imagePullPolicy": cfg.images.pull_policy,
                        "args": args,
                        "env": _pod_env(),
                        "ports": [
                            {"name": "rpc", "containerPort": RPC_PORT},
                            {"name": "blob", "containerPort": BLOB_PORT},
                            {"name": "rest", "containerPort": REST_PORT},
                            {"name": "metrics", "containerPort": REPORTER_PORT},
                        ],
                        "readinessProbe": {"httpGet": {"path": "/overview", "port": REST_PORT}, "periodSeconds": 5},
                        "resources": {
                            "requests": {"cpu": cpu(cfg.jobmanager_cpu), "memory": mem(cfg.jobmanager_memory_mb)},
                            "limits": {"cpu": cpu(cfg.jobmanager_cpu_limit or cfg.jobmanager_cpu),
                                       "memory": mem(cfg.jobmanager_memory_mb)},
                        },
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    }


def jobmanager_service(cfg: K8sConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(JOBMANAGER, cfg, "jobmanager"),
        "spec": {
            "type": "ClusterIP",
            "selector": selector("jobmanager"),
            "ports": [
                {"name": "rpc", "port": RPC_PORT, "targetPort": RPC_PORT},
                {"name": "blob", "port": BLOB_PORT, "targetPort": BLOB_PORT},
                {"name": "rest", "port": REST_PORT, "targetPort": REST_PORT},
            ],
        },
    }


def taskmanager_resources(cfg: K8sConfig, cpu_limit: float | None = None) -> dict[str, dict[str, str]]:
    return {
        "requests": {"cpu": cpu(min(cfg.taskmanager_cpu, cpu_limit or cfg.taskmanager_cpu)),
                     "memory": mem(cfg.taskmanager_memory_mb)},
        "limits": {"cpu": cpu(cpu_limit or cfg.taskmanager_cpu_limit), "memory": mem(cfg.taskmanager_memory_mb)},
    }


def taskmanager_deployment(cfg: K8sConfig, replicas: int) -> Manifest:
    """One slot per pod; the pod name is the TM resource id, so REST / Prometheus `tm_id` name the pod.

    CPU may be resized in place (`resizePolicy: NotRequired`) on clusters with in-place pod resize.
    """
    if replicas > cfg.max_taskmanagers:
        raise ValueError(f"{replicas} task managers exceed max_taskmanagers={cfg.max_taskmanagers}")
    init, volumes, mounts = _flink_volumes(cfg)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(TASKMANAGER, cfg, "taskmanager"),
        "spec": {
            "replicas": int(replicas),
            "selector": {"matchLabels": selector("taskmanager")},
            "template": {
                "metadata": {"labels": labels("taskmanager"), "annotations": scrape_annotations(REPORTER_PORT)},
                "spec": {
                    "initContainers": init,
                    "containers": [{
                        "name": "taskmanager",
                        "image": cfg.images.flink,
                        "imagePullPolicy": cfg.images.pull_policy,
                        "args": ["taskmanager", "-Dtaskmanager.resource-id=$(POD_NAME)",
                                 "-Dtaskmanager.host=$(POD_IP)"],
                        "env": _pod_env(),
                        "ports": [
                            {"name": "rpc", "containerPort": TM_RPC_PORT},
                            {"name": "metrics", "containerPort": REPORTER_PORT},
                        ],
                        "resources": taskmanager_resources(cfg),
                        "resizePolicy": [
                            {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                            {"resourceName": "memory", "restartPolicy": "RestartContainer"},
                        ],
                        "volumeMounts": mounts,
                    }],
                    "volumes": volumes,
                },
            },
        },
    }


def flink_rbac(cfg: K8sConfig) -> list[Manifest]:
    """Operator path: native mode lets the job manager create/delete its TM pods and config maps."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(FLINK_SA, cfg, "flink")},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": _meta(FLINK_SA, cfg, "flink"),
            "rules": [
                {"apiGroups": [""], "resources": ["pods", "configmaps", "services"], "verbs": ["*"]},
                {"apiGroups": ["apps"], "resources": ["deployments", "deployments/finalizers"], "verbs": ["*"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": _meta(FLINK_SA, cfg, "flink"),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": FLINK_SA},
            "subjects": [{"kind": "ServiceAccount", "name": FLINK_SA, "namespace": cfg.namespace}],
        },
    ]


AUTOSCALER_PREFIX = "job.autoscaler."


def flink_deployment(cfg: K8sConfig, job: JobSpec, overrides: str | None = None) -> Manifest:
    """The operator path: a FlinkDeployment CR (native Kubernetes, application mode).

    Per-vertex parallelism changes go through `pipeline.jobvertex-parallelism-overrides` (vertex ids
    from the REST API); with `observe_only` the operator's autoscaler owns those overrides instead.
    """
    conf = {k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in flink_settings(cfg, standalone=False).items()}
    conf["kubernetes.taskmanager.cpu.limit-factor"] = f"{cfg.taskmanager_cpu_limit / cfg.taskmanager_cpu:g}"
    if overrides:
        conf["pipeline.jobvertex-parallelism-overrides"] = overrides
    if cfg.observe_only:
        conf[AUTOSCALER_PREFIX + "enabled"] = "true"
        conf[AUTOSCALER_PREFIX + "vertex.max-parallelism"] = str(cfg.max_taskmanagers)
        for key, value in cfg.operator_autoscaler.items():
            conf[key if key.startswith(AUTOSCALER_PREFIX) else AUTOSCALER_PREFIX + key] = str(value)
    init, volumes, mounts = jar_delivery(cfg)
    pod_spec: dict[str, Any] = {"containers": [{"name": "flink-main-container", "volumeMounts": mounts}]}
    if init:
        pod_spec["initContainers"] = init
        pod_spec["volumes"] = volumes
    group, version, _ = FLINK_DEPLOYMENT_API
    return {
        "apiVersion": f"{group}/{version}",
        "kind": "FlinkDeployment",
        "metadata": _meta(cfg.flink_name, cfg, "flink"),
        "spec": {
            "image": cfg.images.flink,
            "imagePullPolicy": cfg.images.pull_policy,
            "flinkVersion": cfg.operator_flink_version,
            "serviceAccount": FLINK_SA,
            "flinkConfiguration": conf,
            "podTemplate": {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"labels": labels("flink"), "annotations": scrape_annotations(REPORTER_PORT)},
                "spec": pod_spec,
            },
            "jobManager": {"replicas": 1, "resource": {"cpu": cfg.jobmanager_cpu,
                                                       "memory": f"{cfg.jobmanager_memory_mb}m"}},
            "taskManager": {"resource": {"cpu": cfg.taskmanager_cpu, "memory": f"{cfg.taskmanager_memory_mb}m"}},
            "job": {
                "jarURI": f"local://{cfg.jar_path}",
                "entryClass": cfg.job_class,
                "args": job_args(cfg, job),
                "parallelism": max(job.parallelism.values(), default=1),
                "upgradeMode": cfg.upgrade_mode,
                "state": "running",
            },
        },
    }


# ------------------------------------------------------------------ Prometheus


def prometheus_rbac(cfg: K8sConfig) -> list[Manifest]:
    name = cluster_scoped_name(cfg)
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(PROMETHEUS, cfg, PROMETHEUS)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(name, cfg, PROMETHEUS, namespaced=False),
            "rules": [{"apiGroups": [""], "resources": ["pods", "endpoints", "services", "nodes"],
                       "verbs": ["get", "list", "watch"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(name, cfg, PROMETHEUS, namespaced=False),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": PROMETHEUS, "namespace": cfg.namespace}],
        },
    ]


def cluster_scoped_name(cfg: K8sConfig) -> str:
    return f"bench-prometheus-{cfg.namespace}"


def scraped_components(cfg: K8sConfig) -> list[tuple[str, int]]:
    """The pods Prometheus scrapes, by `component` label, with their metrics port (as annotated)."""
    flink_pods = ["flink"] if cfg.use_operator else ["jobmanager", "taskmanager"]
    return [*((c, REPORTER_PORT) for c in flink_pods), (GENERATOR, cfg.generator_metrics_port)]


def metrics_service_name(component: str) -> str:
    return f"metrics-{component}"


def metrics_services(cfg: K8sConfig) -> list[Manifest]:
    """`prometheus_discovery: dns`: one headless Service per scraped component, so that its DNS name
    resolves to every pod's address (not-ready pods included: a starting job manager is scraped too)."""
    if cfg.prometheus_discovery != "dns":
        return []
    return [{
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(metrics_service_name(component), cfg, component),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector(component),
            "ports": [{"name": "metrics", "port": port, "targetPort": port}],
        },
    } for component, port in scraped_components(cfg)]


def prometheus_settings(cfg: K8sConfig) -> dict[str, Any]:
    """Scrape every pod of our namespace annotated `prometheus.io/scrape: "true"` on its annotated port
    (kubernetes_sd), or, with `prometheus_discovery: dns`, the addresses behind `metrics_services`."""
    interval = f"{cfg.scrape_interval_s:g}s"
    if cfg.prometheus_discovery == "dns":
        return {
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "scrape_configs": [{
                "job_name": f"pods-{component}",
                "dns_sd_configs": [{"names": [f"{metrics_service_name(component)}.{cfg.namespace}.svc"],
                                    "type": "A", "port": port, "refresh_interval": interval}],
                "relabel_configs": [{"target_label": "component", "replacement": component}],
            } for component, port in scraped_components(cfg)],
        }
    return {
        "global": {"scrape_interval": interval, "evaluation_interval": interval},
        "scrape_configs": [{
            "job_name": "pods",
            "kubernetes_sd_configs": [{"role": "pod", "namespaces": {"names": [cfg.namespace]}}],
            "relabel_configs": [
                {"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_scrape"],
                 "action": "keep", "regex": "true"},
                {"source_labels": ["__meta_kubernetes_pod_phase"], "action": "drop",
                 "regex": "Pending|Succeeded|Failed"},
                {"source_labels": ["__meta_kubernetes_pod_annotation_prometheus_io_path"],
                 "action": "replace", "target_label": "__metrics_path__", "regex": "(.+)"},
                {"source_labels": ["__address__", "__meta_kubernetes_pod_annotation_prometheus_io_port"],
                 "action": "replace", "regex": r"([^:]+)(?::\d+)?;(\d+)", "replacement": "$1:$2",
                 "target_label": "__address__"},
                {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
                {"source_labels": ["__meta_kubernetes_pod_label_component"], "target_label": "component"},
            ],
        }],
    }


def prometheus_configmap(cfg: K8sConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(PROMETHEUS_CONFIG, cfg, PROMETHEUS),
        "data": {"prometheus.yml": yaml.safe_dump(prometheus_settings(cfg), sort_keys=False)},
    }


def prometheus_deployment(cfg: K8sConfig) -> Manifest:
    """Admin API on: the backend asks for a TSDB snapshot at the end of a run."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(PROMETHEUS, cfg, PROMETHEUS),
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": selector(PROMETHEUS)},
            "template": {
                "metadata": {"labels": labels(PROMETHEUS)},
                "spec": {
                    "serviceAccountName": PROMETHEUS,
                    "containers": [{
                        "name": PROMETHEUS,
                        "image": cfg.images.prometheus,
                        "imagePullPolicy": cfg.images.pull_policy,
                        "args": [
                            "--config.file=/etc/prometheus/prometheus.yml",
                            "--storage.tsdb.path=/prometheus",
                            "--web.enable-admin-api",
                            "--web.enable-lifecycle",
                        ],
                        "ports": [{"name": "web", "containerPort": PROMETHEUS_PORT}],
                        "readinessProbe": {"httpGet": {"path": "/-/ready", "port": PROMETHEUS_PORT},
                                           "periodSeconds": 5},
                        "resources": {"requests": {"cpu": cpu(cfg.prometheus_cpu), "memory": "512Mi"},
                                      "limits": {"memory": "4Gi"}},
                        "volumeMounts": [
                            {"name": "config", "mountPath": "/etc/prometheus"},
                            {"name": "data", "mountPath": "/prometheus"},
                        ],
                    }],
                    "volumes": [
                        {"name": "config", "configMap": {"name": PROMETHEUS_CONFIG}},
                        {"name": "data", "emptyDir": {}},
                    ],
                },
            },
        },
    }


def prometheus_service(cfg: K8sConfig) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(PROMETHEUS, cfg, PROMETHEUS),
        "spec": {
            "type": "ClusterIP",
            "selector": selector(PROMETHEUS),
            "ports": [{"name": "web", "port": PROMETHEUS_PORT, "targetPort": PROMETHEUS_PORT}],
        },
    }


# ------------------------------------------------------------------ generator


def schedule_text(rates: Iterable[float]) -> str:
    """The generator's schedule file: one records/s target per second of the run."""
    return "# records/s per second of the run\n" + "".join(f"{float(r):.3f}\n" for r in rates)


def generator_schedule_configmap(cfg: K8sConfig, rates: Iterable[float]) -> Manifest:
    text = schedule_text(rates)
    if len(text.encode()) > 900_000:  # ConfigMaps hold at most 1 MiB
        raise ValueError("the schedule is too long for a ConfigMap; shorten the pattern or the time scale")
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(GENERATOR_SCHEDULE, cfg, GENERATOR),
        "data": {"rates.txt": text},
    }


def generator_args(cfg: K8sConfig, job: JobSpec) -> list[str]:
    return [
        "--bootstrap", bootstrap(cfg),
        "--topics", ",".join(job.topics),
        "--schedule", "/schedule/rates.txt",
        "--producers", str(cfg.generator_producers),
        "--metrics-port", str(cfg.generator_metrics_port),
        "--metrics-host", "0.0.0.0",
        "--create-topics", "--partitions", str(cfg.kafka_partitions),
        "--seed", str(job.seed),
        "--exit-when-done",
    ]


def generator_job(cfg: K8sConfig, job: JobSpec) -> Manifest:
    """The Java generator from the job jar, run with the Flink image's JVM; never restarted mid-run."""
    init, volumes, mounts = jar_delivery(cfg)
    heap = max(256, cfg.generator_memory_mb * 3 // 4)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(GENERATOR, cfg, GENERATOR),
        "spec": {
            "backoffLimit": 0,  # a restarted generator would replay the schedule from second 0
            "template": {
                "metadata": {"labels": labels(GENERATOR),
                             "annotations": scrape_annotations(cfg.generator_metrics_port)},
                "spec": {
                    "restartPolicy": "Never",
                    "initContainers": init,
                    "containers": [{
                        "name": GENERATOR,
                        "image": cfg.images.generator or cfg.images.flink,
                        "imagePullPolicy": cfg.images.pull_policy,
                        "command": ["java", f"-Xmx{heap}m", "-cp", cfg.jar_path, cfg.generator_class,
                                    *generator_args(cfg, job)],
                        "ports": [{"name": "metrics", "containerPort": cfg.generator_metrics_port}],
                        "resources": {
                            "requests": {"cpu": cpu(cfg.generator_cpu), "memory": mem(cfg.generator_memory_mb)},
                            "limits": {"memory": mem(cfg.generator_memory_mb)},
                        },
                        "volumeMounts": [{"name": "schedule", "mountPath": "/schedule"}, *mounts],
                    }],
                    "volumes": [{"name": "schedule", "configMap": {"name": GENERATOR_SCHEDULE}}, *volumes],
                },
            },
        },
    }


# ------------------------------------------------------------------ the whole stack, in apply order


def infrastructure(cfg: K8sConfig, job: JobSpec) -> list[Manifest]:
    """Namespace, RBAC, Kafka and Prometheus: everything that must be up before the job."""
    return [
        namespace(cfg),
        *prometheus_rbac(cfg),
        kafka_service(cfg),
        kafka_statefulset(cfg),
        prometheus_configmap(cfg),
        prometheus_deployment(cfg),
        prometheus_service(cfg),
        *metrics_services(cfg),
        topics_job(cfg, job.topics),
    ]


def flink(cfg: K8sConfig, job: JobSpec) -> list[Manifest]:
    """The Flink cluster and job: a FlinkDeployment (operator) or the standalone Deployments."""
    if cfg.use_operator:
        return [*flink_rbac(cfg), flink_deployment(cfg, job)]
    return [
        flink_configmap(cfg),
        jobmanager_service(cfg),
        jobmanager_deployment(cfg, job),
        taskmanager_deployment(cfg, job.taskmanagers),
    ]


def load(cfg: K8sConfig, job: JobSpec, rates: Iterable[float]) -> list[Manifest]:
    """The generator, applied last: its start is t = 0 of the run."""
    return [generator_schedule_configmap(cfg, rates), generator_job(cfg, job)]
