"""Turn the simulator's per-step rows into what autoscalers and the run record read.

Flink's gauges are derived from the model's amounts (METRICS.md, AUTOSCALERS.md):
- busyTimeMsPerSecond of subtask k = records it processed / its capacity x 1000
  (a throttled CPU share makes a record take longer, so busy time grows);
- backPressuredTimeMsPerSecond = records it could have processed but could not
  hand downstream / its capacity x 1000; idle = the rest of the second;
- TM CPU, two signals (harness.vocabulary): `cpu` (CPU time / the task
  manager's quota) = cpu_base + (1 - cpu_base) x busy fraction, and `cpu_jvm`
  (Status.JVM.CPU.Load) = cpu_base + (cpu_max - cpu_base) x busy fraction: the
  JVM's reading tops out near 0.9 (thesis ch. 6.7.1 on HPA-CPU);
- deriv(lag) is a least-squares slope over `lag_deriv_window_s`, like
  Prometheus' deriv() that HPA-Varga uses (60 s);
- end-to-end latency: the sink's per-step histogram (the real sink's buckets),
  summed over an interval: mean = summed age / records, p50/p95/p99 by
  Prometheus' histogram_quantile, max = the oldest record of the interval;
  NaN for an interval in which no record reached the sink (a gap, never the
  last value held).
Pure functions over arrays; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from harness.backends.sim.model import (
    J_ARRIVED,
    J_E2E_COUNT,
    J_E2E_MAX,
    J_E2E_SUM,
    J_LAG,
    J_LATENCY,
    J_LATENCY_MAX,
    J_PROCESSED,
    J_PROCESSING,
    J_PRODUCED,
    J_TAKEN,
    JOB_COLS,
    O_ARRIVED,
    O_BLOCKED,
    O_BLOCKED_LANE0,
    O_BUFFER,
    O_IN,
    O_IN_LANE0,
    O_LAG,
    O_LAG_LANE0,
    O_OUT,
    O_PAR,
    O_SHARE,
    O_STATE,
    OP_COLS,
    SimModel,
)
from harness.metrics.latency import histogram_quantile, histogram_quantiles
from harness.metrics.snapshot import MetricsSnapshot, OperatorMetrics, SubtaskMetrics
from harness.record import empty_timeseries, timeseries_table
from harness.vocabulary import Metric

# Series the harness knows itself (not scraped by Prometheus): kept through a Prometheus outage.
HARNESS_SERIES = (Metric.PARALLELISM, Metric.CPU_SHARE, Metric.PROCESSING)
# Load the pattern asked for that the simulator did not offer. Its generator never falls behind: every
# record the arrival process draws enters Kafka (skipped = 0, measured). It has no Kafka retention yet,
# so no record expires unread; when the model gains retention, its expired count replaces this 0.
SIM_SKIPPED_TOTAL = 0.0
SIM_EXPIRED_TOTAL = 0.0


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def _nanmax(col: np.ndarray) -> float:
    ok = ~np.isnan(col)
    return float(col[ok].max()) if ok.any() else math.nan


def _nanmean(col: np.ndarray) -> float:
    ok = ~np.isnan(col)
    return float(col[ok].mean()) if ok.any() else math.nan


def slope(y: np.ndarray, dt: float) -> float:
    """Least-squares slope of equally spaced samples (records/s), 0 with fewer than 2."""
    n = len(y)
    if n < 2:
        return 0.0
    t = np.arange(n) - (n - 1) / 2.0
    return float(t @ y) / (float(t @ t) * dt)


def snapshot(model: SimModel, window_s: float, interarrival: np.ndarray | None = None) -> MetricsSnapshot:
    """Metrics averaged over the last `window_s` seconds, in the current configuration's subtasks."""
    cfg = model.cfg
    dt = model.dt
    n_win = max(1, int(round(window_s / dt)))
    n_der = max(2, int(round(cfg.lag_deriv_window_s / dt)))
    rows = model.rows_array(max(n_win, n_der))
    topo = model.topology
    if len(rows) == 0:
        ops = {nm: OperatorMetrics(parallelism=p, cpu_share=s) for nm, p, s in
               zip(model.names, model.par, model.share, strict=True)}
        return MetricsSnapshot(t=model.now, window_s=window_s, topology=topo, operators=ops,
                               taskmanagers=sum(model.par), why_missing={"*": "no step simulated yet"})
    win = rows[-n_win:]
    der = rows[-n_der:]
    hist = model.e2e_array(n_win).sum(axis=0)
    mean = win.mean(axis=0).tolist()  # plain floats: scalar maths on numpy items is slow
    final = rows[-1].tolist()
    jvm_span, quota_span = cfg.cpu_max - cfg.cpu_base, 1.0 - cfg.cpu_base
    operators: dict[str, OperatorMetrics] = {}
    cpu_sum = jvm_sum = 0.0
    for i, name in enumerate(model.names):
        o = JOB_COLS + i * OP_COLS
        p = model.par[i]
        sub_cap = model.cap_sub[i] * model.share[i] * dt  # records per step of one subtask
        rin = mean[o + O_IN] / dt
        rout = mean[o + O_OUT] / dt
        lag = final[o + O_LAG] if model.is_src[i] else None
        buffer = mean[o + O_BUFFER]
        # Subtasks holding the same number of units report the same values: build each kind once.
        # A source's kinds are its partition groups (own records, backpressure and lag); other
        # operators split their totals by unit share.
        if model.is_src[i]:
            n0 = model.lane_n[i][0]
            per_kind = [(n0, mean[o + O_IN_LANE0], mean[o + O_BLOCKED_LANE0], final[o + O_LAG_LANE0])]
            if len(model.lane_n[i]) > 1:
                per_kind.append((model.lane_n[i][1], mean[o + O_IN] - per_kind[0][1],
                                 mean[o + O_BLOCKED] - per_kind[0][2], final[o + O_LAG] - per_kind[0][3]))
            kind_of = [k for k, cnt in enumerate(model.lane_n[i]) for _ in range(cnt)]
            shares = [(1.0 / cnt, cnt, x_in, blk, lg) for cnt, x_in, blk, lg in per_kind]
        else:
            kind_index = {sh: k for k, (sh, _) in enumerate(model.share_kinds[i])}
            kind_of = [kind_index[sh] for sh in model.shares[i]]
            shares = [(sh, cnt, mean[o + O_IN] * sh, mean[o + O_BLOCKED] * sh, None)
                      for sh, cnt in model.share_kinds[i]]
        kinds: list[SubtaskMetrics] = []
        busy_sum = bp_sum = cpu_sum_op = jvm_sum_op = max_bp = 0.0
        for frac, count, x_in, blk, lg in shares:
            # x_in, blk, lg: the kind's totals for sources, one subtask's part otherwise
            one = frac if model.is_src[i] else 1.0
            busy = min(1000.0, max(0.0, x_in * one) / sub_cap * 1000.0)
            bp = min(1000.0 - busy, max(0.0, blk * one) / sub_cap * 1000.0)
            cpu = cfg.cpu_base + quota_span * busy / 1000.0
            jvm = cfg.cpu_base + jvm_span * busy / 1000.0
            kinds.append(
                SubtaskMetrics(
                    records_in_per_s=x_in * one / dt,
                    records_out_per_s=x_in * one * model.sel[i] / dt,
                    busy_ms_per_s=busy,
                    idle_ms_per_s=max(0.0, 1000.0 - busy - bp),
                    backpressured_ms_per_s=bp,
                    input_buffer_usage=buffer,
                    cpu_load=cpu,
                    cpu_jvm_load=jvm,
                    lag=max(0.0, lg) * one if lg is not None else None,
                )
            )
            busy_sum += busy * count
            bp_sum += bp * count
            cpu_sum_op += cpu * count
            jvm_sum_op += jvm * count
            max_bp = max(max_bp, bp)
        subs = tuple([kinds[k] for k in kind_of])
        busy_op, bp_op, cpu_op = busy_sum / p, bp_sum / p, cpu_sum_op / p
        cpu_sum += cpu_sum_op
        jvm_sum += jvm_sum_op
        operators[name] = OperatorMetrics(
            parallelism=p,
            records_in_per_s=rin,
            records_out_per_s=rout,
            busy_ms_per_s=busy_op,
            idle_ms_per_s=max(0.0, 1000.0 - busy_op - bp_op),
            backpressured_ms_per_s=bp_op,
            is_backpressured=max_bp > cfg.backpressure_threshold * 1000.0,
            input_buffer_usage=buffer,
            cpu_load=cpu_op,
            cpu_jvm_load=jvm_sum_op / p,
            cpu_share=model.share[i],
            subtasks=subs,
            lag=lag,
            lag_rate=slope(der[:, o + O_LAG], dt) if model.is_src[i] else None,
            input_rate=mean[o + O_ARRIVED] / dt if model.is_src[i] else None,
        )
    tms = sum(model.par)
    latency = _nanmean(win[:, J_LATENCY])
    e2e_mean = _ratio(float(win[:, J_E2E_SUM].sum()), float(win[:, J_E2E_COUNT].sum()))
    why: dict[str, str] = {}
    if math.isnan(latency):
        why[Metric.LATENCY_KAFKA] = "no record taken from Kafka in the window (job not processing)"
    if math.isnan(e2e_mean):
        why[Metric.LATENCY_E2E_MEAN] = why[Metric.LATENCY_E2E_P95] = "no record reached the sink in the window"
    return MetricsSnapshot(
        t=model.now,
        window_s=window_s,
        topology=topo,
        operators=operators,
        kafka_lag=final[J_LAG],
        kafka_lag_rate=slope(der[:, J_LAG], dt),
        input_rate=mean[J_ARRIVED] / dt,
        throughput=mean[J_TAKEN] / dt,
        latency_s=latency,
        latency_e2e_s=e2e_mean,
        latency_e2e_p95_s=min(histogram_quantile(0.95, hist), _nanmax(win[:, J_E2E_MAX])),
        taskmanagers=tms,
        cpu_load=cpu_sum / tms if tms else math.nan,
        cpu_jvm_load=jvm_sum / tms if tms else math.nan,
        interarrival_s=interarrival,
        why_missing=why,
    )


def timeseries(model: SimModel, blind: Sequence[tuple[float, float]] = ()) -> pa.Table:
    """The run's series in the run record's long format, one point per `record_every_s`.

    Rates, busy/backpressured time, CPU and latency are interval means (a scrape of
    Flink's per-second meters); lag, totals, parallelism, CPU share and state are the
    values at the interval's end; latency_max is the interval's max. Latencies are NaN
    (a gap) in an interval without records to measure them on.
    """
    rows = model.rows_array()
    if len(rows) == 0:
        return empty_timeseries()
    dt = model.dt
    cfg = model.cfg
    g = max(1, int(round(cfg.record_every_s / dt)))
    starts = np.arange(0, len(rows), g)
    ends = np.minimum(starts + g, len(rows)) - 1
    counts = (ends - starts + 1).astype(float)
    ts = (ends + 1) * dt

    def mean(col: np.ndarray) -> np.ndarray:
        return np.add.reduceat(col, starts) / counts

    def last(col: np.ndarray) -> np.ndarray:
        return col[ends]

    def nanmean(col: np.ndarray) -> np.ndarray:
        ok = ~np.isnan(col)
        n = np.add.reduceat(ok.astype(float), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, np.add.reduceat(np.where(ok, col, 0.0), starts) / n, np.nan)

    e2e_n = np.add.reduceat(rows[:, J_E2E_COUNT], starts)
    with np.errstate(invalid="ignore", divide="ignore"):
        e2e_mean = np.where(e2e_n > 0, np.add.reduceat(rows[:, J_E2E_SUM], starts) / e2e_n, np.nan)
    e2e_hist = np.add.reduceat(model.e2e_array(), starts, axis=0)
    # interpolating inside a bucket may overshoot the interval's oldest record: a quantile is at most the max
    e2e_max = np.fmax.reduceat(rows[:, J_E2E_MAX], starts)
    zeros = np.zeros(len(ts))

    jvm_span, quota_span = cfg.cpu_max - cfg.cpu_base, 1.0 - cfg.cpu_base
    parts: list[tuple[str, str, np.ndarray]] = [
        (Metric.INPUT_RATE, "", mean(rows[:, J_ARRIVED]) / dt),
        (Metric.THROUGHPUT, "", mean(rows[:, J_TAKEN]) / dt),
        (Metric.LAG, "", last(rows[:, J_LAG])),
        (Metric.LATENCY_KAFKA, "", nanmean(rows[:, J_LATENCY])),
        (Metric.LATENCY_KAFKA_MAX, "", np.fmax.reduceat(rows[:, J_LATENCY_MAX], starts)),
        (Metric.LATENCY_E2E_MEAN, "", e2e_mean),
        (Metric.LATENCY_E2E_P50, "", np.minimum(histogram_quantiles(0.50, e2e_hist), e2e_max)),
        (Metric.LATENCY_E2E_P95, "", np.minimum(histogram_quantiles(0.95, e2e_hist), e2e_max)),
        (Metric.LATENCY_E2E_P99, "", np.minimum(histogram_quantiles(0.99, e2e_hist), e2e_max)),
        (Metric.LATENCY_E2E_MAX, "", e2e_max),
        (Metric.PROCESSING, "", mean(rows[:, J_PROCESSING])),
        (Metric.PRODUCED_TOTAL, "", last(rows[:, J_PRODUCED])),
        (Metric.PROCESSED_TOTAL, "", last(rows[:, J_PROCESSED])),
        (Metric.SKIPPED_TOTAL, "", zeros + SIM_SKIPPED_TOTAL),
        (Metric.EXPIRED_TOTAL, "", zeros + SIM_EXPIRED_TOTAL),
    ]
    tm_total = np.zeros(len(rows))
    cpu_total = np.zeros(len(rows))
    jvm_total = np.zeros(len(rows))
    for i, name in enumerate(model.names):
        o = JOB_COLS + i * OP_COLS
        par = rows[:, o + O_PAR]
        share = rows[:, o + O_SHARE]
        # mean subtask busy fraction; the busiest subtask's extra load from skew is ignored here
        sub_cap = model.cap_sub[i] * share * dt
        busy = np.minimum(1.0, rows[:, o + O_IN] / (sub_cap * par))
        bp = np.minimum(1.0 - busy, rows[:, o + O_BLOCKED] / (sub_cap * par))
        cpu = cfg.cpu_base + quota_span * busy
        jvm = cfg.cpu_base + jvm_span * busy
        tm_total += par
        cpu_total += cpu * par
        jvm_total += jvm * par
        parts += [
            (Metric.PARALLELISM, name, last(par)),
            (Metric.CPU_SHARE, name, last(share)),
            (Metric.RECORDS_IN, name, mean(rows[:, o + O_IN]) / dt),
            (Metric.RECORDS_OUT, name, mean(rows[:, o + O_OUT]) / dt),
            (Metric.BUSY, name, mean(busy) * 1000.0),
            (Metric.BACKPRESSURED, name, mean(bp) * 1000.0),
            (Metric.CPU, name, mean(cpu)),
            (Metric.CPU_JVM, name, mean(jvm)),
            (Metric.BUFFER_USAGE, name, mean(rows[:, o + O_BUFFER])),
            (Metric.STATE_BYTES, name, last(rows[:, o + O_STATE])),
        ]
        if model.is_src[i]:
            parts.append((Metric.LAG, name, last(rows[:, o + O_LAG])))
    parts += [
        (Metric.TASKMANAGERS, "", last(tm_total)),
        (Metric.CPU, "", mean(cpu_total / tm_total)),
        (Metric.CPU_JVM, "", mean(jvm_total / tm_total)),
    ]
    m = len(ts)
    metrics = list(dict.fromkeys(str(p[0]) for p in parts))
    operators = list(dict.fromkeys(p[1] for p in parts))
    all_ts = np.tile(ts, len(parts))
    metric_codes = np.repeat([metrics.index(str(p[0])) for p in parts], m)
    keep = np.ones(len(all_ts), dtype=bool)
    if blind:  # what Prometheus did not scrape is absent, not zero (the harness' own series stay)
        scraped = ~np.isin(metric_codes, [metrics.index(str(h)) for h in HARNESS_SERIES if str(h) in metrics])
        for a, b in blind:
            keep &= ~(scraped & (all_ts > a) & (all_ts <= b))
    return timeseries_table(
        ts=all_ts[keep],
        metric=(metric_codes[keep], metrics),
        operator=(np.repeat([operators.index(p[1]) for p in parts], m)[keep], operators),
        subtask=np.full(int(keep.sum()), -1, dtype=np.int32),
        value=np.concatenate([p[2] for p in parts]).astype(float)[keep],
    )
