"""Pure parts of the local backend: checkpoint lookup for job-manager recovery, export queries."""

from __future__ import annotations

import os
from pathlib import Path

from harness.backends.local.backend import LocalBackend, latest_checkpoint
from harness.topology import load_topology
from harness.vocabulary import Metric


def test_latest_complete_checkpoint_across_jobs(tmp_path: Path) -> None:
    assert latest_checkpoint(tmp_path / "none") is None
    for i, (job, chk, complete) in enumerate([("a", 3, True), ("b", 7, True), ("b", 8, False)]):
        d = tmp_path / job / f"chk-{chk}"
        d.mkdir(parents=True)
        if complete:
            (d / "_metadata").write_text("x")
            os.utime(d / "_metadata", (1000 + i, 1000 + i))
    assert latest_checkpoint(tmp_path) == tmp_path / "b" / "chk-7"  # chk-8 has no _metadata yet
    # only this run's jobs: a newer checkpoint of another run in the same work directory is ignored
    assert latest_checkpoint(tmp_path, ["a"]) == tmp_path / "a" / "chk-3"
    assert latest_checkpoint(tmp_path, ["c"]) is None


def test_export_queries_cover_the_record_metrics_and_all_vertex_ids() -> None:
    b = LocalBackend()
    b.topology = load_topology("q11")
    b._vertex_ids_seen = {"bids_source": {"s1"}, "session_window": {"w1", "w2"}, "sink": {"k1"}}
    q = b._export_queries(5.0)
    assert {m for m, op in q if op == ""} >= {Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LAG, Metric.LATENCY_KAFKA,
                                              Metric.TASKMANAGERS}
    for op in ("bids_source", "session_window", "sink"):
        assert {(m, op) for m in (Metric.RECORDS_IN, Metric.RECORDS_OUT, Metric.BUSY, Metric.BACKPRESSURED)} <= set(q)
    assert 'task_id=~"w1|w2"' in q[(Metric.BUSY, "session_window")]
    assert 'task_id=~"s1"' in q[(Metric.THROUGHPUT, "")]
