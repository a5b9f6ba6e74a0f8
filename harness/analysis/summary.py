"""The per-run summary: its columns and how engine outputs become one row.

An engine (pandas or Spark) reduces a run's long-format timeseries to a few
small pieces - per-series statistics, SPEC provisioning, and the seed papers'
scores (`papers.score_run`, one definition both engines run) - and
`assemble_row` turns those plus the event-derived columns into the row. Keeping the assembly shared means the
two engines can only disagree where they aggregate, which is what the
cross-check is for.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pandas as pd

from harness.analysis.meta import RunMeta
from harness.analysis.metrics import SHORTFALL_FLAG, StageConvergence, load_shortfall
from harness.analysis.papers import SCORE_COLUMNS, PaperSpec
from harness.analysis.profile import drain_rate
from harness.vocabulary import Metric

if TYPE_CHECKING:
    from harness.analysis.loader import SkippedRecord

# columns of the long per-series statistics table both engines produce
SERIES_STATS_COLUMNS = ["run_id", "metric", "operator", "tw_mean", "tw_sum", "span", "max", "min", "last",
                        "n", "p50", "p95"]
# series whose percentiles are reported (keeps Spark's exact percentile cheap)
PERCENTILE_METRICS = (Metric.LATENCY_KAFKA, Metric.LATENCY_E2E_P50, Metric.LATENCY_E2E_P95)

# Latency columns, both labelled by what they measure (METRICS.md), in seconds:
# - latency_kafka_*: the thesis' time in Kafka; avg = time-weighted mean of the per-scrape samples (gaps
#   are gaps), p50/p95 = percentiles over those samples, max = the largest sample;
# - latency_e2e_*: sink processing time - event time of every record, recorded per interval (mean, p50,
#   p95, p99, max over the interval's records); avg = time-weighted mean of the interval means, p50 / p95 =
#   the median of the interval medians / the 95th percentile of the interval p95s, max = the oldest record.
LATENCY_COLUMNS = ["latency_kafka_avg", "latency_kafka_p50", "latency_kafka_p95", "latency_kafka_max",
                   "latency_e2e_avg", "latency_e2e_p50", "latency_e2e_p95", "latency_e2e_max"]
# Offered vs lost load: records the generator skipped and Kafka retention deleted unread, and their
# share of the pattern's records (`load_shortfall`; `shortfall_flagged` above SHORTFALL_FLAG).
LOAD_COLUMNS = ["load_skipped", "load_expired", "load_shortfall", "shortfall_flagged"]

# numeric columns of the summary, grouped as the tables show them
THESIS_COLUMNS = ["tm_avg", "tm_max", *LATENCY_COLUMNS, "input_rate_avg",
                  "throughput_avg", "throughput_ratio", *LOAD_COLUMNS, "cpu_avg", "lag_max", "lag_end",
                  "scale_count", "decisions_skipped", "duration_s"]
SPEC_COLUMNS = ["spec_accuracy_u", "spec_accuracy_o", "spec_timeshare_u", "spec_timeshare_o",
                "spec_excess_time", "spec_reconfigurations", "spec_cost_replica_min", "spec_ideal_avg",
                "spec_processed_in_trace", "spec_trace_s"]
SASO_COLUMNS = ["saso_reconfigurations", "saso_qos_violations", "saso_control_steps", "saso_qos_violation_pct",
                "saso_violations_in_rescale_steps", "saso_amplitude", "saso_overshoot", "saso_overshoot_vs_ideal",
                "alloc_cores_avg"]
MEAD_COLUMNS = ["mead_rt_mean", "mead_rt_p95", "mead_rt_target", "mead_rt_ratio", "mead_target_met",
                "mead_cpu_share"]
FAILURE_COLUMNS = ["faults", "injected_faults", "crashes", "failed_rescales", "recoveries", "failed", "flagged",
                   "crashed"]
METRIC_COLUMNS = THESIS_COLUMNS + SPEC_COLUMNS + SASO_COLUMNS + MEAD_COLUMNS + FAILURE_COLUMNS


@dataclass(frozen=True)
class SeriesStats:
    tw_mean: float
    tw_sum: float  # area under the step function (value * seconds)
    span: float  # seconds covered (first sample to run end)
    max: float
    min: float
    last: float
    n: int
    p50: float = math.nan
    p95: float = math.nan


@dataclass(frozen=True)
class SpecFacts:
    accuracy_u: float
    accuracy_o: float
    timeshare_u: float
    timeshare_o: float
    ideal_avg: float


@dataclass
class RunPieces:
    """Everything an engine computed for one run."""

    run_start: float
    run_end: float
    series: dict[tuple[str, str], SeriesStats] = field(default_factory=dict)
    spec: SpecFacts | None = None
    scores: dict[str, float] = field(default_factory=dict)  # papers.score_run


def series_from_frame(df: pd.DataFrame) -> dict[str, dict[tuple[str, str], SeriesStats]]:
    """Split the long series-stats table into {run_id: {(metric, operator): SeriesStats}}."""
    out: dict[str, dict[tuple[str, str], SeriesStats]] = {}
    for r in df.itertuples(index=False):
        out.setdefault(r.run_id, {})[(r.metric, r.operator)] = SeriesStats(
            float(r.tw_mean), float(r.tw_sum), float(r.span), float(r.max), float(r.min), float(r.last),
            int(r.n), float(r.p50), float(r.p95))
    return out


def final_parallelism(series: Mapping[tuple[str, str], SeriesStats]) -> dict[str, float]:
    return {op: st.last for (m, op), st in series.items() if m == Metric.PARALLELISM and op}


def paper_spec(meta: RunMeta, run_start: float, run_end: float, final_par: Mapping[str, float]) -> PaperSpec:
    """What `papers.score_run` needs besides the samples: SLO, control step, final drain rate."""
    return PaperSpec(
        run_start=run_start, run_end=run_end, control_step_s=meta.period_s,
        qos=meta.slo_qos,  # type: ignore[arg-type]
        throughput_ratio=meta.slo_throughput_ratio, latency_slo_s=meta.slo_latency_s,
        latency_statistic=meta.slo_latency_statistic,  # type: ignore[arg-type]
        drain_rate=drain_rate(list(meta.operators), final_par, meta.topic_shares),
    )


def _div(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) and not math.isnan(a) else math.nan


def assemble_row(meta: RunMeta, pieces: RunPieces, event_cols: Mapping[str, Any]) -> dict[str, Any]:
    s = pieces.series
    nan_stats = SeriesStats(math.nan, math.nan, 0.0, math.nan, math.nan, math.nan, 0)
    tm, lat, cpu, lag = (s.get((m, ""), nan_stats)
                         for m in (Metric.TASKMANAGERS, Metric.LATENCY_KAFKA, Metric.CPU, Metric.LAG))
    e2e_mean, e2e_p50, e2e_p95, e2e_max = (
        s.get((m, ""), nan_stats)
        for m in (Metric.LATENCY_E2E_MEAN, Metric.LATENCY_E2E_P50, Metric.LATENCY_E2E_P95, Metric.LATENCY_E2E_MAX))
    # cumulative counters: their largest sample is the run's total (robust to a restarted exporter)
    skipped = s.get((Metric.SKIPPED_TOTAL, ""), nan_stats).max
    expired = s.get((Metric.EXPIRED_TOTAL, ""), nan_stats).max
    shortfall = load_shortfall(skipped, expired, meta.pattern_records)
    inp, thr = s.get((Metric.INPUT_RATE, ""), nan_stats), s.get((Metric.THROUGHPUT, ""), nan_stats)
    duration = pieces.run_end - pieces.run_start
    shares = [st.tw_mean for (m, op), st in s.items() if m == Metric.CPU_SHARE and op]
    spec = pieces.spec
    ideal_avg = spec.ideal_avg if spec else math.nan
    scores = {c: pieces.scores.get(c, math.nan) for c in SCORE_COLUMNS}
    row: dict[str, Any] = {
        **meta.identity(),
        "tm_avg": tm.tw_mean, "tm_max": tm.max,
        "latency_kafka_avg": lat.tw_mean, "latency_kafka_p50": lat.p50, "latency_kafka_p95": lat.p95,
        "latency_kafka_max": lat.max,
        "latency_e2e_avg": e2e_mean.tw_mean, "latency_e2e_p50": e2e_p50.p50, "latency_e2e_p95": e2e_p95.p95,
        "latency_e2e_max": e2e_max.max,
        "input_rate_avg": inp.tw_mean, "throughput_avg": thr.tw_mean,
        "throughput_ratio": _div(thr.tw_mean, inp.tw_mean),
        "load_skipped": skipped, "load_expired": expired, "load_shortfall": shortfall,
        "shortfall_flagged": bool(shortfall > SHORTFALL_FLAG),
        "cpu_avg": cpu.tw_mean, "lag_max": lag.max, "lag_end": lag.last,
        "duration_s": duration,
        "spec_accuracy_u": spec.accuracy_u if spec else math.nan,
        "spec_accuracy_o": spec.accuracy_o if spec else math.nan,
        "spec_timeshare_u": spec.timeshare_u if spec else math.nan,
        "spec_timeshare_o": spec.timeshare_o if spec else math.nan,
        "spec_ideal_avg": ideal_avg,
        "saso_overshoot": tm.tw_mean, "saso_overshoot_vs_ideal": tm.tw_mean - ideal_avg,
        "mead_cpu_share": float(sum(shares) / len(shares)) if shares else math.nan,
        **scores,
        **event_cols,
    }
    return row


def convergence_rows(meta: RunMeta, conv: list[StageConvergence]) -> list[dict[str, Any]]:
    return [
        {**meta.identity(), "stage": c.stage, "start_s": c.start_s, "end_s": c.end_s, "actions": c.actions,
         "converged": c.converged, "time_s": c.time_s, "time_min_pattern": c.time_s * meta.time_scale / 60.0,
         "length_min_pattern": (c.end_s - c.start_s) * meta.time_scale / 60.0}
        for c in conv
    ]


def operator_rows(meta: RunMeta, pieces: RunPieces) -> list[dict[str, Any]]:
    """Per-operator time-weighted means (parallelism, CPU, rates) for the report."""
    return [
        {"run_id": meta.run_id, "operator": op, "metric": m, "tw_mean": st.tw_mean, "max": st.max,
         "last": st.last}
        for (m, op), st in sorted(pieces.series.items())
        if op
    ]


@dataclass
class AnalysisResult:
    """What an engine returns: per-run summary, per-stage convergence, per-operator stats; per injected
    fault its recovery (`fault_recovery.FAULT_COLUMNS`); the run records it could not read."""

    summary: pd.DataFrame
    convergence: pd.DataFrame
    operators: pd.DataFrame
    series_stats: pd.DataFrame
    faults: pd.DataFrame = field(default_factory=pd.DataFrame)
    skipped: list[SkippedRecord] = field(default_factory=list)
