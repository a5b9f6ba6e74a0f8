"""The end-of-run table `bench run` prints, and its `--json` document (thesis ch. 5.3 metrics for one run).

The PySpark analysis computes the same numbers over many runs; this module is
the quick single-run view and reuses the analysis metric core and definitions
(`harness.analysis.summary`): both latencies labelled by what they measure,
in ms below 1 s, the load the run could not offer, and the decisions the loop
skipped for want of a measured metric.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.analysis.metrics import (
    SHORTFALL_FLAG,
    fmt_latency,
    fmt_share,
    load_shortfall,
    percentile,
    time_weighted_mean,
)
from harness.record import RunRecord, read_run_record
from harness.vocabulary import EventKind, Metric


@dataclass(frozen=True)
class Latency:
    """avg / p50 / p95 / max of one latency over the run, in seconds (NaN: never measured)."""

    avg: float
    p50: float
    p95: float
    max: float

    def text(self) -> str:
        """ms below 1 s (a healthy run no longer reads "p50 0.00")."""
        return " / ".join(fmt_latency(v) for v in (self.avg, self.p50, self.p95, self.max))


@dataclass(frozen=True)
class RunSummary:
    avg_tm: float
    max_tm: float
    latency_kafka: Latency
    latency_e2e: Latency
    scale_count: int
    input_rate: float
    throughput: float
    load_skipped: float  # records the generator could not offer (NaN: not measured)
    load_expired: float  # records Kafka retention deleted before the job read them
    pattern_records: float  # records the pattern asked for over the run
    decisions_skipped: int
    cpu: float  # mean CPU load of the task managers, of their CPU quota
    cpu_jvm: float  # mean Status.JVM.CPU.Load of the task managers (NaN: not measured)
    cpu_signal: str | None  # the CPU reading the run's autoscaler decided on (None: it reads no CPU signal)
    cpu_share: float  # mean CPU share per task manager (vertical scaling); nan when never set
    status: str
    flagged: bool

    @property
    def load_shortfall(self) -> float:
        return load_shortfall(self.load_skipped, self.load_expired, self.pattern_records)

    @property
    def shortfall_flagged(self) -> bool:
        return bool(self.load_shortfall > SHORTFALL_FLAG)

    def _shortfall_text(self) -> str:
        if math.isnan(self.load_shortfall):
            return "not measured"
        text = (f"{fmt_share(self.load_shortfall)} ({self.load_skipped:,.0f} skipped + "
                f"{self.load_expired:,.0f} expired of {self.pattern_records:,.0f})")
        if self.shortfall_flagged:
            text += f" FLAGGED: > {SHORTFALL_FLAG:.0%} never offered"
        return text

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("status", self.status + (" (flagged: faults recorded)" if self.flagged else "")),
            ("avg task managers", f"{self.avg_tm:.2f}"),
            ("max task managers", f"{self.max_tm:.0f}"),
            ("latency_kafka avg/p50/p95/max", self.latency_kafka.text()),
            ("latency_e2e avg/p50/p95/max", self.latency_e2e.text()),
            ("scale count", str(self.scale_count)),
            ("decisions skipped", str(self.decisions_skipped)),
            ("input rate vs throughput (rec/s)", f"{self.input_rate:,.0f} vs {self.throughput:,.0f}"),
            ("load shortfall", self._shortfall_text()),
            ("avg task manager CPU load", f"{self.cpu:.2f}"),
            ("avg task manager JVM CPU load", "not measured" if math.isnan(self.cpu_jvm) else f"{self.cpu_jvm:.2f}"),
            *([("autoscaler's CPU signal", _cpu_signal_text(self.cpu_signal))] if self.cpu_signal else []),
            *([("mean CPU share per operator", f"{self.cpu_share:.2f}")] if not np.isnan(self.cpu_share) else []),
        ]


def _nanmax(v: np.ndarray) -> float:
    v = v[~np.isnan(v)]
    return float(v.max()) if len(v) else math.nan


def _cpu_signal_text(signal: str) -> str:
    from autoscalers.hpa.config import CPU_SIGNALS

    return f"{signal}: {CPU_SIGNALS.get(signal, '?')}"


def cpu_signal(meta: dict) -> str | None:
    """The `cpu_signal` the run's autoscaler was configured with (its default when not set), else None."""
    import autoscalers

    spec = (meta.get("config") or {}).get("autoscaler") or {}
    name = spec.get("name") if isinstance(spec, dict) else None
    if name not in autoscalers.REGISTRY:
        return None
    try:
        config = autoscalers.config_class(name)(**(spec.get("params") or {}))
    except (ValueError, TypeError):  # a record written by other code: say nothing rather than guess
        return None
    signal = getattr(config, "cpu_signal", None)
    return str(signal) if signal is not None else None


def summarise(record: RunRecord) -> RunSummary:
    end = float(record.meta.get("duration_s") or 0) or None

    series = record.arrays
    tm_t, tm_v = series(Metric.TASKMANAGERS)
    lat_t, lat_v = series(Metric.LATENCY_KAFKA)
    e2e_t, e2e_v = series(Metric.LATENCY_E2E_MEAN)
    _, e2e_p50 = series(Metric.LATENCY_E2E_P50)
    _, e2e_p95 = series(Metric.LATENCY_E2E_P95)
    _, e2e_max = series(Metric.LATENCY_E2E_MAX)
    in_t, in_v = series(Metric.INPUT_RATE)
    thr_t, thr_v = series(Metric.THROUGHPUT)
    cpu_t, cpu_v = series(Metric.CPU)
    jvm_t, jvm_v = series(Metric.CPU_JVM)
    _, skipped = series(Metric.SKIPPED_TOTAL)
    _, expired = series(Metric.EXPIRED_TOTAL)
    shares = record.operator_values(Metric.CPU_SHARE)
    records = (record.meta.get("pattern") or {}).get("records")
    return RunSummary(
        avg_tm=time_weighted_mean(tm_t, tm_v, end),
        max_tm=_nanmax(tm_v),
        latency_kafka=Latency(time_weighted_mean(lat_t, lat_v, end), percentile(lat_v, 50), percentile(lat_v, 95),
                              _nanmax(lat_v)),
        latency_e2e=Latency(time_weighted_mean(e2e_t, e2e_v, end), percentile(e2e_p50, 50),
                            percentile(e2e_p95, 95), _nanmax(e2e_max)),
        scale_count=len(record.events_of(EventKind.ACTION)),
        input_rate=time_weighted_mean(in_t, in_v, end),
        throughput=time_weighted_mean(thr_t, thr_v, end),
        load_skipped=_nanmax(skipped),
        load_expired=_nanmax(expired),
        pattern_records=float(records) if records is not None else math.nan,
        decisions_skipped=len(record.events_of(EventKind.DECISION_SKIPPED)),
        cpu=time_weighted_mean(cpu_t, cpu_v, end),
        cpu_jvm=time_weighted_mean(jvm_t, jvm_v, end),
        cpu_signal=cpu_signal(record.meta),
        cpu_share=float(shares.mean()) if len(shares) else float("nan"),
        status=record.status,
        flagged=bool(record.meta.get("flagged")),
    )


def run_document(run_dir: Path) -> dict[str, Any]:
    """`bench run --json`: the record's place and identity, and the summary with the table's fields.

    `summary` is every field of `RunSummary`, the value the table is printed from, so
    the two cannot drift apart; a field added there appears here."""
    record = read_run_record(run_dir)
    summary = summarise(record)
    config = record.meta.get("config") or {}
    autoscaler = config.get("autoscaler") or {}
    pattern = config.get("pattern") or {}
    return {
        "run_dir": str(run_dir),
        "experiment": record.meta.get("experiment"),
        "backend": config.get("backend"),
        "query": config.get("query"),
        "pattern": pattern.get("name") if isinstance(pattern, dict) else pattern,
        "autoscaler": autoscaler.get("name") if isinstance(autoscaler, dict) else autoscaler,
        "seed": record.meta.get("seed"),
        "status": record.status,
        "summary": asdict(summary),
    }
