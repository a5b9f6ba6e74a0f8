"""The PromQL catalogue: every query the local/k8s monitor sends to Prometheus, in one place.

Each entry names what it measures, why the autoscalers or the analysis need it (thesis ch. 6.3.2
and 6.4.2 list the metrics), the labels its result is grouped by, and one or more alternative
expressions tried in order (the first that returns data wins: metric names differ between Flink
and connector versions, and the generator may be absent). Templates use `{job}` (Flink job id),
`{w}` (range window, e.g. `15s`) and `{step}` (subquery resolution).

Series names are those of Flink's Prometheus reporter (`flink_<scope>_<metric>`, labels
`job_id`, `task_id` = job-vertex id, `task_name`, `subtask_index`, `tm_id`), of our Java load
generator (`generator_records_produced_total{topic}`), of the Kafka JMX exporter and of the
sinks' end-to-end latency histogram (`harness.metrics.latency`).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.metrics.latency import E2E_BUCKET, E2E_COUNT, E2E_MAX_MS, E2E_SUM_MS
from harness.vocabulary import Metric

# Per-subtask results are grouped by vertex id and subtask index; averaging over attempts merges
# the series of a subtask that was redeployed inside the window (new task_attempt_id, same index).
SUBTASK = ("task_id", "subtask_index")
VERTEX = ("task_id",)
TM = ("tm_id",)
JOB: tuple[str, ...] = ()


@dataclass(frozen=True)
class Query:
    name: str  # key in the results
    exprs: tuple[str, ...]  # alternatives, tried in order
    by: tuple[str, ...]  # labels that identify one result series
    unit: str
    measures: str
    why: str
    feeds: tuple[Metric, ...] = ()  # snapshot metrics that are unknown (NaN) while this query has no result

    def render(self, alt: int, job: str, window_s: float, step_s: float = 5.0) -> str:
        # plain replacement, not str.format: PromQL is full of braces
        return (
            self.exprs[alt].replace("{job}", job).replace("{w}", _dur(window_s)).replace("{step}", _dur(step_s))
        )


def _dur(seconds: float) -> str:
    return f"{max(1, round(seconds))}s"


def _per_subtask(metric: str) -> str:
    return f'avg by (task_id, subtask_index) (avg_over_time({metric}{{job_id="{{job}}"}}[{{w}}]))'


def _per_subtask_measured(metric: str) -> str:
    """Like `_per_subtask` for gauges that are NaN while unmeasured (a source's lag before its first
    record after a restart): `>= 0` drops NaN samples, so one idle subtask does not blank the rest."""
    return f'avg by (task_id, subtask_index) (avg_over_time(({metric}{{job_id="{{job}}"}} >= 0)[{{w}}:{{step}}]))'


def _counter_rate(metric: str) -> str:
    return f'avg by (task_id, subtask_index) (rate({metric}{{job_id="{{job}}"}}[{{w}}]))'


T = "flink_taskmanager_job_task_"


def e2e_mean(selector: str, window: str) -> str:
    """Mean end-to-end latency (s) of the records the sinks took in the window: rate(sum) / rate(count)
    (NaN when none arrived: the rates are 0)."""
    return (f"sum(rate({E2E_SUM_MS}{selector}[{window}])) / sum(rate({E2E_COUNT}{selector}[{window}])) / 1000")


def _e2e_max_ms(selector: str, window: str) -> str:
    return f"max(max_over_time({E2E_MAX_MS}{selector}[{window}]))"


def e2e_max(selector: str, window: str) -> str:
    """Largest end-to-end latency (s) seen at any sink subtask in the window (its max gauge covers one
    scrape interval before each scrape; NaN samples, meaning no record, are skipped by max_over_time)."""
    return f"{_e2e_max_ms(selector, window)} / 1000"


def e2e_quantile(q: float, selector: str, window: str) -> str:
    """Quantile `q` of the end-to-end latency (s) over the records of the window, all sink subtasks together:
    Prometheus' histogram_quantile over the buckets' increase (`le` in ms). Interpolating inside a bucket
    can overshoot the oldest record, so the result is capped at the window's max."""
    return (f"clamp_max(histogram_quantile({q:g}, sum by (le) (rate({E2E_BUCKET}{selector}[{window}]))), "
            f"scalar({_e2e_max_ms(selector, window)})) / 1000")

CATALOGUE: tuple[Query, ...] = (
    # ---- per subtask (operator level is aggregated from these in harness.metrics.prometheus) ----
    # Rates from the counters over exactly the window: Flink's *PerSecond meters average over the
    # last 60 s, which lags a rate change by a minute; the meters remain as the fallback.
    Query(
        "records_in", (_counter_rate(T + "numRecordsIn"), _per_subtask(T + "numRecordsInPerSecond")),
        SUBTASK, "records/s", "records a subtask reads from its input gates",
        "DS2's observed rate and Dhalion's scale-up input; summed per operator",
        feeds=(Metric.RECORDS_IN,)),
    Query(
        "records_out", (_counter_rate(T + "numRecordsOut"), _per_subtask(T + "numRecordsOutPerSecond")),
        SUBTASK, "records/s", "records a subtask emits",
        "selectivity for DS2; for sources it is the records taken from Kafka (source tasks report 0 in)",
        feeds=(Metric.RECORDS_OUT, Metric.THROUGHPUT)),
    Query(
        "busy", (_per_subtask(T + "busyTimeMsPerSecond"),), SUBTASK, "ms/s",
        "time a subtask processes records",
        "DS2 true processing rate = rate / busy fraction; HPA-Varga utilisation",
        feeds=(Metric.BUSY, Metric.IDLE)),  # idle is derived from busy + backpressured when missing
    Query(
        "idle", (_per_subtask(T + "idleTimeMsPerSecond"),), SUBTASK, "ms/s",
        "time a subtask waits for input", "over-provisioning signal (thesis ch. 2.5)",
        feeds=(Metric.IDLE,)),
    Query(
        "backpressured", (_per_subtask(T + "backPressuredTimeMsPerSecond"),), SUBTASK, "ms/s",
        "time a subtask waits for output buffers", "Dhalion's backpressure symptom; bottleneck walk",
        feeds=(Metric.BACKPRESSURED, Metric.IDLE)),
    Query(
        "is_backpressured",
        (f'max by (task_id, subtask_index) (max_over_time({T}isBackPressured{{job_id="{{job}}"}}[{{w}}]))',),
        SUBTASK, "0/1", "whether the subtask was flagged back-pressured at any scrape of the window",
        "the thesis' binary backpressure status; its code took max_over_time over the window",
        feeds=(Metric.IS_BACKPRESSURED,)),
    Query(
        "input_buffer",
        (_per_subtask(T + "Shuffle_Netty_Input_Buffers_inPoolUsage"), _per_subtask(T + "buffers_inPoolUsage")),
        SUBTASK, "0..1", "input buffer pool usage",
        "Dhalion: an operator with full input buffers lags; near 0 means it keeps up",
        feeds=(Metric.BUFFER_USAGE,)),
    Query(
        "subtask_tm",
        (f'max by (task_id, subtask_index, tm_id) '
         f'(last_over_time({T}busyTimeMsPerSecond{{job_id="{{job}}"}}[{{w}}]))',),
        ("task_id", "subtask_index", "tm_id"), "-",
        "which task manager hosts each subtask (label join only, value unused)",
        "attributes task manager CPU to the operator running on it",
        feeds=(Metric.CPU, Metric.CPU_JVM)),
    # ---- per task manager ----
    Query(
        "tm_cpu_cores",
        ('sum by (tm_id) (rate(flink_taskmanager_Status_JVM_CPU_Time[{w}])) / 1e9',),
        TM, "cores", "CPU cores a task manager process used",
        "divided by the task manager's cgroup quota this is the utilisation HPA-CPU targets",
        feeds=(Metric.CPU,)),
    Query(
        "tm_cpu_load",
        ('avg by (tm_id) (avg_over_time(flink_taskmanager_Status_JVM_CPU_Load[{w}]))',),
        TM, "0..1 of the host", "JVM-reported process CPU load (Status.JVM.CPU.Load)",
        "HPA-CPU's signal in the thesis (relative to the whole host); converted to the quota when CPU time is missing",
        feeds=(Metric.CPU_JVM,)),
    # ---- sources / Kafka ----
    Query(
        "pending_records",
        (f'sum by (task_id) (avg by (task_id, subtask_index) '
         f'(avg_over_time({T}operator_pendingRecords{{job_id="{{job}}"}}[{{w}}])))',),
        VERTEX, "records", "records in Kafka not yet read by a source (KafkaSource pendingRecords)",
        "the thesis' lag (ch. 6.4.2); DS2/Dhalion source decisions",
        feeds=(Metric.LAG,)),
    Query(
        "pending_records_deriv",
        (f'sum by (task_id) (deriv((sum by (task_id, subtask_index) '
         f'({T}operator_pendingRecords{{job_id="{{job}}"}}))[{{w}}:{{step}}]))',),
        VERTEX, "records/s", "slope of the pending records over the window",
        "Dhalion's kafka-lag-rate-to-be-backpressured and HPA-Varga's relative lag change",
        feeds=(Metric.LAG_RATE,)),
    Query(
        "event_time_lag",
        (
            _per_subtask_measured(T + "operator_deserializer_recordLag"),
            _per_subtask_measured(T + "operator_KafkaSourceReader_deserializer_recordLag"),
            _per_subtask(T + "operator_currentEmitEventTimeLag"),
        ),
        SUBTASK, "ms", "emit time minus event time of the records a source subtask emits",
        "the thesis' latency: time a record spent in Kafka before Flink emitted it (ch. 5.3)",
        feeds=(Metric.LATENCY_KAFKA,)),
    Query(
        "input_rate",
        (
            'sum by (topic) (rate(generator_records_produced_total[{w}]))',
            'sum by (topic) (rate(kafka_server_brokertopicmetrics_messagesin_total{topic!=""}[{w}]))',
            'sum by (topic) (rate(kafka_server_BrokerTopicMetrics_MessagesIn_total{topic!=""}[{w}]))',
        ),
        ("topic",), "records/s", "records produced into each Kafka topic",
        "the input rate next to throughput; the generator's acked count, else Kafka's messages-in",
        feeds=(Metric.INPUT_RATE,)),
    # ---- end-to-end latency at the sinks (histogram of every record's sink time - event time) ----
    Query(
        "latency_e2e", (e2e_mean('{job_id="{job}"}', "{w}"),), JOB, "s",
        "sink processing time minus event time, mean over the records of the window",
        "the latency a user of the job sees, next to the thesis' time in Kafka (METRICS.md)",
        feeds=(Metric.LATENCY_E2E_MEAN,)),
    Query(
        "latency_e2e_p95", (e2e_quantile(0.95, '{job_id="{job}"}', "{w}"),), JOB, "s",
        "95th percentile of the same per-record latency over the window",
        "tail latency against an SLO",
        feeds=(Metric.LATENCY_E2E_P95,)),
    # ---- job ----
    Query(
        "registered_taskmanagers",
        ('max(last_over_time(flink_jobmanager_numRegisteredTaskManagers[{w}]))',),
        JOB, "count", "task managers registered with the job manager",
        "resources in use (avg/max TM); REST is the primary source, this is the recorded series",
        feeds=(Metric.TASKMANAGERS,)),
)

BY_NAME = {q.name: q for q in CATALOGUE}


def query(name: str) -> Query:
    return BY_NAME[name]
