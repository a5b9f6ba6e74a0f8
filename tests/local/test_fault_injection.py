"""The injectable fault kinds on the real local stack, in one shared run (one stack start for five kinds).

q1 at 1,000 records/s with the `static` autoscaler runs through `harness.runner.run_experiment` with
`faults:` in the experiment: a task manager killed at 30 s, Prometheus stopped at 65 s for 30 s, the
generator paused at 115 s for 20 s, Kafka restarted at 150 s (down 10 s), the job manager killed at
190 s; the run ends at 260 s. Each test then checks its fault in the one record: injected as an
event, what the real processes did (recovery events, gaps, no input) and that the job processed again afterwards; the
run completes, is flagged, and is no crash; `bench analyze` reports a recovery time for every kind.
Port offset 5300; work directory `$BENCH_FAULTS_WORKDIR` or /tmp/bench-faults-it.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.config import Experiment
from harness.record import RunRecord, read_run_record
from harness.runner import run_experiment
from harness.vocabulary import Metric

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_FAULTS_WORKDIR", "/tmp/bench-faults-it"))
FAULTS = [
    {"kind": "kill-taskmanager", "at_s": 30},
    {"kind": "stop-prometheus", "at_s": 65, "for_s": 30},
    {"kind": "pause-generator", "at_s": 115, "for_s": 20},
    {"kind": "restart-kafka", "at_s": 150, "for_s": 10},
    {"kind": "kill-jobmanager", "at_s": 190},
]
DURATION_S = 260



@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunRecord, Path]]:
    from harness.backends.local.backend import LocalBackend

    exp = Experiment.model_validate({
        "name": "it-faults", "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": 1000, "duration_min": 20}},
        "autoscaler": {"name": "static"}, "duration_s": DURATION_S,
        "loop": {"period_s": 10, "metrics_window_s": 10, "cooldown_s": 0},
        "local": {"workdir": str(WORKDIR), "port_offset": 5300, "checkpoint_interval_s": 5},
        "faults": FAULTS,
    })
    results = tmp_path_factory.mktemp("faults")
    backend = LocalBackend()
    OFFSETS.clear()

    def on_progress(t: float, _total: float) -> None:  # the job's committed offsets around the JM kill
        if "before_jm" not in OFFSETS and t >= FAULTS[-1]["at_s"] - 10:
            OFFSETS["before_jm"] = committed_offsets(backend)
        elif "before_jm" in OFFSETS and "end" not in OFFSETS and t >= DURATION_S - 20:
            OFFSETS["end"] = committed_offsets(backend)

    run_dir = run_experiment(exp, results / "it-faults" / "run-r0", backend=backend, on_progress=on_progress)
    yield read_run_record(run_dir), results


OFFSETS: dict[str, Any] = {}  # offsets before the JM kill and at the end; "error" if unreadable


def committed_offsets(backend: Any, tries: int = 10) -> dict[int, int]:
    """The job's consumer group offsets on `bids` (committed by the Kafka source on each checkpoint).

    Retried: after the broker restart its group coordinator may answer NOT_COORDINATOR for a while.
    After the last try the error is kept in OFFSETS for the test to report (a hook that raised would
    fail the whole shared run)."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    error: Exception | None = None
    for _ in range(tries):
        c = Consumer({"bootstrap.servers": backend.stack.kafka_bootstrap, "group.id": backend._group_id,
                      "enable.auto.commit": False})
        try:
            parts = c.list_topics("bids", timeout=10).topics["bids"].partitions
            got = c.committed([TopicPartition("bids", p) for p in parts], timeout=10)
            return {tp.partition: tp.offset for tp in got}
        except KafkaException as exc:
            error = exc
            time.sleep(1.0)
        finally:
            c.close()
    OFFSETS["error"] = str(error)
    return {}


def injected(rec: RunRecord, kind: str) -> dict[str, Any]:
    (ev,) = [f for f in rec.events_of("fault") if f.get("fault_kind") == kind and f["reason"].startswith("injected")]
    return ev


def recovery(rec: RunRecord, fault: dict[str, Any]) -> dict[str, Any]:
    recs = [r for r in rec.events_of("recovery") if r.get("fault_id") == fault["fault_id"]]
    assert recs, (fault, rec.events_of("recovery"))
    return recs[0]


def processes_after(rec: RunRecord, t: float, metric: str = Metric.THROUGHPUT) -> float:
    s = rec.series(metric)
    after = s[s.index > t + 5]
    assert len(after), f"no {metric} samples after {t}"
    return float(after.max())


def test_run_completes_flagged_and_is_no_crash(record) -> None:
    rec, results = record
    assert rec.completed, rec.status
    assert rec.meta["flagged"] is True and rec.meta["injected_faults"] == len(FAULTS)
    assert not any("failed" in f["reason"] for f in rec.events_of("fault")), rec.events_of("fault")
    from harness.analysis.pipeline import analyze

    out = analyze(results, engine="pandas")
    row = out.result.summary.iloc[0]
    assert row.flagged and not row.crashed  # every fault was injected: flagged, not a crash
    kinds = dict(zip(out.fault_recovery.fault_kind, out.fault_recovery.recovered, strict=True))
    assert kinds == {f["kind"]: 1 for f in FAULTS}, out.fault_recovery
    assert (out.fault_recovery.recovery_s > 0).all() and out.fault_recovery.recovery_s.notna().all()


def test_kill_taskmanager(record) -> None:
    rec, _ = record
    fault = injected(rec, "kill-taskmanager")
    died = [f for f in rec.events_of("fault") if f["reason"].startswith("task manager died")]
    assert died and died[0]["injected"] and fault["process"] in died[0]["process"]
    rec_ev = recovery(rec, fault)
    assert fault["process"] in rec_ev["replaced"] and rec_ev["outage_s"] > 0
    processing = rec.series(Metric.PROCESSING)  # the outage is downtime in the record until the recovery
    window = processing[(processing.index >= died[0]["ts"]) & (processing.index < rec_ev["ts"])]
    assert len(window) and (window == 0).all()
    assert processes_after(rec, rec_ev["ts"]) > 0


def test_stop_prometheus(record) -> None:
    rec, _ = record
    fault = injected(rec, "stop-prometheus")
    rec_ev = recovery(rec, fault)
    assert rec_ev["outage_s"] >= 30
    thr = rec.series(Metric.THROUGHPUT)
    # no scrape while Prometheus was down: a gap in the exported series (unknown, not zero)
    inside = thr[(thr.index > fault["ts"] + 10) & (thr.index < fault["ts"] + 25)]
    assert inside.dropna().empty, inside  # at most gap markers (NaN), never a number
    assert processes_after(rec, rec_ev["ts"]) > 0


def test_pause_generator(record) -> None:
    rec, _ = record
    fault = injected(rec, "pause-generator")
    rate = rec.series(Metric.INPUT_RATE)
    # ~1,000/s before; while paused nothing is offered: the rate reads ~0, or has no samples at all (the
    # stopped generator's own counter cannot be scraped: unknown, never a made-up value)
    paused = rate[(rate.index > fault["ts"] + 10) & (rate.index < fault["ts"] + 20)].dropna()  # NaN: a gap
    assert paused.empty or paused.max() < 100, paused
    thr = rec.series(Metric.THROUGHPUT)  # and the job (still measured) takes (almost) nothing from Kafka
    idle = thr[(thr.index > fault["ts"] + 10) & (thr.index < fault["ts"] + 20)].dropna()
    assert len(idle) and idle.max() < 100, idle
    assert processes_after(rec, fault["ts"] + 20, Metric.INPUT_RATE) > 500


def test_restart_kafka(record) -> None:
    rec, _ = record
    fault = injected(rec, "restart-kafka")
    rec_ev = recovery(rec, fault)
    assert rec_ev["kafka_restart_s"] > 0 and rec_ev["outage_s"] >= 10
    assert processes_after(rec, rec_ev["ts"]) > 0
    assert processes_after(rec, rec_ev["ts"], Metric.INPUT_RATE) > 500


def test_kill_jobmanager(record) -> None:
    rec, _ = record
    fault = injected(rec, "kill-jobmanager")
    died = [f for f in rec.events_of("fault") if f["reason"] == "job manager died"]
    assert died and died[0]["injected"]
    rec_ev = recovery(rec, fault)
    assert rec_ev["job_id"] != rec_ev["previous_job_id"]
    assert rec_ev["restored_checkpoint"] is not None and "/chk-" in str(rec_ev["checkpoint"]), rec_ev
    assert processes_after(rec, rec_ev["ts"]) > 0
    assert not math.isnan(rec_ev["outage_s"])
    # resubmitted from the crashed job's checkpoint: the consumer offsets continue, never rewind
    assert "error" not in OFFSETS, f"the committed offsets could not be read: {OFFSETS['error']}"
    before = {p: o for p, o in OFFSETS["before_jm"].items() if o >= 0}
    after = OFFSETS["end"]
    assert before and all(after[p] >= before[p] for p in before), OFFSETS
    assert sum(after[p] for p in before) > sum(before.values()), OFFSETS
