"""The end-of-run table `bench run` prints (thesis ch. 5.3 metrics for one run).

The PySpark analysis computes the same numbers over many runs; this module is
the quick single-run view and reuses the analysis metric core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.analysis.metrics import percentile, time_weighted_mean
from harness.record import RunRecord
from harness.vocabulary import EventKind, Metric


@dataclass(frozen=True)
class RunSummary:
    avg_tm: float
    max_tm: float
    latency_avg: float
    latency_p50: float
    latency_p95: float
    latency_max: float
    scale_count: int
    input_rate: float
    throughput: float
    cpu: float
    cpu_share: float  # mean CPU share per task manager (vertical scaling); nan when never set
    status: str
    flagged: bool

    def rows(self) -> list[tuple[str, str]]:
        return [
            ("status", self.status + (" (flagged: faults recorded)" if self.flagged else "")),
            ("avg task managers", f"{self.avg_tm:.2f}"),
            ("max task managers", f"{self.max_tm:.0f}"),
            ("latency avg / p50 / p95 / max (s)",
             f"{self.latency_avg:.2f} / {self.latency_p50:.2f} / {self.latency_p95:.2f} / {self.latency_max:.2f}"),
            ("scale count", str(self.scale_count)),
            ("input rate vs throughput (rec/s)", f"{self.input_rate:,.0f} vs {self.throughput:,.0f}"),
            ("avg task manager CPU load", f"{self.cpu:.2f}"),
            *([("mean CPU share per operator", f"{self.cpu_share:.2f}")] if not np.isnan(self.cpu_share) else []),
        ]


def summarise(record: RunRecord) -> RunSummary:
    end = float(record.meta.get("duration_s") or 0) or None

    series = record.arrays
    tm_t, tm_v = series(Metric.TASKMANAGERS)
    lat_t, lat_v = series(Metric.LATENCY_KAFKA)
    _, in_v = series(Metric.INPUT_RATE)
    _, thr_v = series(Metric.THROUGHPUT)
    cpu_t, cpu_v = series(Metric.CPU)
    shares = record.operator_values(Metric.CPU_SHARE)
    return RunSummary(
        avg_tm=time_weighted_mean(tm_t, tm_v, end),
        max_tm=float(tm_v.max()) if len(tm_v) else float("nan"),
        latency_avg=float(lat_v.mean()) if len(lat_v) else float("nan"),
        latency_p50=percentile(lat_v, 50),
        latency_p95=percentile(lat_v, 95),
        latency_max=float(lat_v.max()) if len(lat_v) else float("nan"),
        scale_count=len(record.events_of(EventKind.ACTION)),
        input_rate=float(in_v.mean()) if len(in_v) else float("nan"),
        throughput=float(thr_v.mean()) if len(thr_v) else float("nan"),
        cpu=time_weighted_mean(cpu_t, cpu_v, end),
        cpu_share=float(shares.mean()) if len(shares) else float("nan"),
        status=record.status,
        flagged=bool(record.meta.get("flagged")),
    )

