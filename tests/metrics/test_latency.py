"""The end-to-end latency histogram: bucket bounds, Prometheus' quantile estimator, and its PromQL."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from harness.metrics.export import export_queries, fill_gaps
from harness.metrics.latency import (
    E2E_BUCKET,
    E2E_BUCKETS_MS,
    E2E_BUCKETS_S,
    bucket_index,
    histogram_quantile,
    histogram_quantiles,
)
from harness.metrics.promql import BY_NAME
from harness.topology import load_topology
from harness.vocabulary import Metric


def test_buckets_span_milliseconds_to_most_of_an_hour_finely() -> None:
    b = np.asarray(E2E_BUCKETS_MS, dtype=float)
    assert b[0] == 1 and b[-1] == 3_150_000 and np.all(np.diff(b) > 0)
    # above 10 ms no bucket is wider than ~26 % of its upper bound (ten per decade)
    above = b >= 10
    assert (np.diff(b)[above[1:]] / b[1:][above[1:]]).max() <= 0.26


def test_bucket_index_puts_a_bound_in_its_own_bucket() -> None:
    assert bucket_index(0.0) == 0 and bucket_index(0.001) == 0 and bucket_index(0.0011) == 1
    assert bucket_index(1e9) == len(E2E_BUCKETS_S)  # the open bucket


def _counts(latencies_s: list[float]) -> np.ndarray:
    c = np.zeros(len(E2E_BUCKETS_S) + 1)
    np.add.at(c, bucket_index(np.asarray(latencies_s)), 1.0)
    return c


def test_quantile_interpolates_inside_the_bucket_as_prometheus_does() -> None:
    # 100 records in (0.1, 0.125] s: rank 50 is halfway through that bucket
    counts = _counts([0.11] * 100)
    assert histogram_quantile(0.5, counts) == pytest.approx(0.1 + 0.025 * 0.5)
    # the first bucket starts at 0; a rank in the open bucket returns the largest bound
    assert histogram_quantile(0.5, _counts([0.0] * 4)) == pytest.approx(0.0005)
    assert histogram_quantile(0.99, _counts([5000.0] * 10)) == E2E_BUCKETS_S[-1]
    assert math.isnan(histogram_quantile(0.5, np.zeros(len(E2E_BUCKETS_S) + 1)))


def test_quantiles_of_a_spread_sample_are_within_a_bucket_of_the_exact_ones() -> None:
    rng = np.random.default_rng(7)
    lat = rng.lognormal(mean=np.log(0.2), sigma=1.0, size=20_000)  # ms to seconds
    counts = _counts(list(lat))
    for q in (0.5, 0.95, 0.99):
        exact = float(np.quantile(lat, q))
        assert histogram_quantile(q, counts) == pytest.approx(exact, rel=0.1)


def test_vectorised_quantiles_equal_the_scalar_estimator() -> None:
    rng = np.random.default_rng(3)
    rows = np.stack([_counts(list(rng.exponential(s, size=50))) for s in (0.01, 0.5, 30.0)] +
                    [np.zeros(len(E2E_BUCKETS_S) + 1)])
    for q in (0.5, 0.95, 0.99):
        got = histogram_quantiles(q, rows)
        want = [histogram_quantile(q, r) for r in rows]
        np.testing.assert_allclose(got, want, equal_nan=True)


def test_snapshot_and_export_ask_prometheus_for_the_sinks_histogram() -> None:
    assert E2E_BUCKET in BY_NAME["latency_e2e_p95"].exprs[0]
    assert set(BY_NAME["latency_e2e"].feeds) == {Metric.LATENCY_E2E_MEAN}
    topo = load_topology("q1")
    q = export_queries(topo, {"bids_source": {"src1"}, "map": {"map1"}, "sink": {"sink1", "sink2"}}, 5.0)
    for m in (Metric.LATENCY_E2E_P50, Metric.LATENCY_E2E_P95, Metric.LATENCY_E2E_P99):
        assert 'task_id=~"sink1|sink2"' in q[(m, "")] and "histogram_quantile" in q[(m, "")]
    assert q[(Metric.LATENCY_E2E_P99, "")].startswith("clamp_max(histogram_quantile(0.99,")
    assert "generator_records_skipped_total" in q[(Metric.SKIPPED_TOTAL, "")]
    assert "kafka_log_start_offset" in q[(Metric.EXPIRED_TOTAL, "")] and "src1" in q[(Metric.EXPIRED_TOTAL, "")]


def test_the_kafka_exporter_names_the_log_start_offset_as_the_export_reads_it() -> None:
    from harness.backends.local.kafka import JMX_EXPORTER_YAML, LOG_START_OFFSET
    from harness.metrics.export import LOG_START_OFFSET as READ

    assert LOG_START_OFFSET == READ and f"name: {READ}" in JMX_EXPORTER_YAML


def test_fill_gaps_marks_every_missing_step_of_a_measured_series() -> None:
    series = pd.DataFrame({"ts": [0.0, 5.0, 20.0, 0.0], "metric": ["a", "a", "a", "b"], "operator": "",
                           "value": [1.0, 2.0, 3.0, 7.0]})
    out = fill_gaps(series, 0.0, 22.0, 5.0)
    a = out[out.metric == "a"].sort_values("ts")
    assert a.ts.tolist() == [0.0, 5.0, 10.0, 15.0, 20.0]
    assert np.isnan(a.value.to_numpy()[2:4]).all() and a.value.to_numpy()[4] == 3.0
    b = out[out.metric == "b"].sort_values("ts")
    assert b.ts.tolist() == [0.0, 5.0, 10.0, 15.0, 20.0] and np.isnan(b.value.to_numpy()[1:]).all()


def test_points_a_millisecond_off_the_grid_are_not_gaps() -> None:
    # a range query started at wall-clock x.2254 s: Prometheus answers at whole milliseconds (x.225 + k*step)
    off = -0.0004 - 0.001
    series = pd.DataFrame({"ts": [5.0 + off, 10.0 + off, 25.0 + off], "metric": "a", "operator": "",
                           "value": [1.0, 2.0, 3.0]})
    out = fill_gaps(series, 0.0, 27.0, 5.0)
    markers = out[out.value.isna()].ts.tolist()
    assert sorted(markers) == [0.0, 15.0, 20.0]  # only the steps without a point, none beside a point
