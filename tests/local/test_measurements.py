"""Numbers a user cares about, asserted on the real stack (issue 8, point 7): one stack, two runs.

1. One q1 run through the runner with a probe autoscaler that asks for a decision at every tick:
   - a steady rate well below capacity: end-to-end p95 and time-in-Kafka p95 below 1 s, throughput
     within 5 % of the input rate, nothing skipped or expired (load shortfall 0);
   - then every task manager is frozen (SIGSTOP) for 30 s and resumed: the records that waited show
     an end-to-end latency of at least 30 s, and the run summary's max says so;
   - then Prometheus is stopped for 60 s: no decision in that gap, `decision_skipped` events naming
     the unmeasured metrics, and the run completes with every series present after the gap.
2. DS2 (over-provisioning 1.0) decides on a real q1 job at a known rate, with the source's CPU share set
   from its measured true rate (not below SOURCE_SHARE_FLOOR) so that the rate needs several source
   subtasks on this machine; the parallelism it asks for is within 1 of the one that keeps up, measured
   in the same test (its answer keeps up, two fewer subtasks of its largest operator do not; or, if its
   answer falls short, one more source subtask does). A comparison in which the source's task managers
   fell behind without getting 85 % of their CPU quota was decided by other work on the host, not by the
   parallelism: the test then skips and says so (measured per task manager from /proc). The task
   managers run C1 only (`taskmanager_jit: c1`): with C2, the compiler took a third to a half of a
   0.1-CPU source task manager for minutes after every rescale, so "the parallelism that keeps up" kept
   changing.

Port offset 6600; work directory `$BENCH_MEASURE_WORKDIR` or /tmp/bench-measure-it.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import autoscalers
from autoscalers.base import Autoscaler, AutoscalerConfig, History, ScalingDecision
from harness.analysis.metrics import percentile
from harness.metrics.snapshot import MetricsSnapshot, needs
from harness.record import read_run_record
from harness.summary import summarise
from harness.vocabulary import EventKind, Metric

pytestmark = pytest.mark.integration

WORKDIR = Path(os.environ.get("BENCH_MEASURE_WORKDIR", "/tmp/bench-measure-it"))
LOCAL = {"workdir": str(WORKDIR), "port_offset": 6600,
         # a frozen task manager must not be declared lost during the 30 s pause (the job would fail over)
         "heartbeat_timeout_s": 60,
         # capacity must settle within the test's windows (see the module docstring)
         "taskmanager_jit": "c1"}
STEADY = (25.0, 55.0)  # the steady window of run 1
PAUSE_AT, PAUSE_S = 55.0, 30.0
PROM_STOP_AT, PROM_DOWN_S = 100.0, 60.0
RUN_S = 200.0
STARVED_BELOW = 0.85  # a saturated task manager that got less of its CPU quota was starved by the host
HELD_S = 10.0  # a gauge's last sample is read for at most one rate window (harness.metrics.export.held)
# The source's share never goes below half the quota (0.125 CPU). A task manager spends ~0.02 CPU whatever
# its load, and the source's Kafka fetcher thread, which busy time does not see, needs CPU too; a new task
# manager also compiles its hot code on the quota. At small shares these costs are a large and variable part
# of a task manager, its capacity is no longer proportional to its share, and DS2's linear model does not
# describe it. (Unfloored, a fast CI host got a share of 0.10, 0.025 CPU: DS2 read a true rate of 23k/s and
# kept one subtask, which then did 3k/s of 12k/s. At a share of 0.25 here, three source subtasks did 9k/s in
# one run and 12k/s in the next.)
SOURCE_SHARE_FLOOR = 0.5


class ProbeConfig(AutoscalerConfig):
    """No parameters."""


class Probe(Autoscaler):
    """Asks to keep the current parallelism at every tick it is asked: a decision event per tick, so a
    decision taken while metrics were missing would show. Needs what every real scaler needs."""

    name = "probe"
    Config = ProbeConfig
    NEEDS = needs(job=(Metric.INPUT_RATE, Metric.THROUGHPUT), operators=(Metric.BUSY,))

    def decide(self, snapshot: MetricsSnapshot, history: History) -> ScalingDecision | None:
        return ScalingDecision(parallelism=dict(snapshot.parallelism), reason="probe: keep")


@pytest.fixture(scope="module")
def stack() -> Iterator[Any]:
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack

    s = LocalStack(LocalConfig.model_validate(LOCAL))
    try:
        yield s
    finally:
        s.down(purge=True)  # the test cleans its own stack directory (tests.stacks)


def _experiment(name: str, autoscaler: dict[str, Any], rate: float, duration_s: float, **extra: Any) -> Any:
    from harness.config import Experiment

    return Experiment.model_validate({
        "name": name, "backend": "local", "query": "q1",
        "pattern": {"name": "constant", "params": {"rate": rate, "duration_min": 30}},
        "autoscaler": autoscaler, "duration_s": duration_s, "local": LOCAL, **extra,
    })


def _window(rec: Any, metric: str, lo: float, hi: float) -> np.ndarray:
    s = rec.series(metric)
    return s[(s.index >= lo) & (s.index <= hi)].to_numpy(dtype=float)


def _signal_taskmanagers(stack: Any, sig: signal.Signals) -> list[str]:
    tms = stack.taskmanager_ids()
    for tm in tms:
        pid = stack.taskmanager_pid(tm)
        if pid is not None:
            os.killpg(pid, sig)  # each task manager leads its own process group
    return tms


def test_latency_throughput_lost_load_and_a_blind_monitor(stack: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.backends.local.backend import LocalBackend
    from harness.runner import run_experiment

    probe = autoscalers.Entry(f"{__name__}:ProbeConfig", f"{__name__}:Probe")
    monkeypatch.setitem(autoscalers.REGISTRY, "probe", probe)
    exp = _experiment("it-measure", {"name": "probe"}, rate=600, duration_s=RUN_S,
                      loop={"period_s": 10, "metrics_window_s": 10, "cooldown_s": 0})
    backend = LocalBackend(stack, keep_stack_up=True)
    seen: dict[str, float] = {}

    def on_progress(t: float, _total: float) -> None:
        if "paused" not in seen and t >= PAUSE_AT:
            seen["paused"] = backend.now()
            frozen = _signal_taskmanagers(stack, signal.SIGSTOP)
            try:
                time.sleep(PAUSE_S)
            finally:
                for tm in frozen:
                    pid = stack.taskmanager_pid(tm)
                    if pid is not None:
                        os.killpg(pid, signal.SIGCONT)
            seen["resumed"] = backend.now()
        elif "prom_down" not in seen and t >= PROM_STOP_AT:
            stack.stop_prometheus()
            seen["prom_down"] = backend.now()
        elif "prom_down" in seen and "prom_up" not in seen and backend.now() - seen["prom_down"] >= PROM_DOWN_S:
            seen["prom_up_took"] = stack.start_prometheus()
            seen["prom_up"] = backend.now()

    run_dir = run_experiment(exp, tmp_path / "run", on_progress=on_progress, backend=backend)
    rec = read_run_record(run_dir)
    assert rec.completed, rec.status
    assert {"paused", "resumed", "prom_down", "prom_up"} <= set(seen), seen

    # -- steady, well below capacity
    lo, hi = STEADY
    e2e_p95, kafka = _window(rec, Metric.LATENCY_E2E_P95, lo, hi), _window(rec, Metric.LATENCY_KAFKA, lo, hi)
    assert len(e2e_p95) >= 4 and len(kafka) >= 4, rec.timeseries.groupby("metric").size()
    assert percentile(e2e_p95, 95) < 1.0, e2e_p95
    assert percentile(kafka, 95) < 1.0, kafka
    inp, thr = _window(rec, Metric.INPUT_RATE, lo, hi), _window(rec, Metric.THROUGHPUT, lo, hi)
    assert np.nanmean(inp) == pytest.approx(600, rel=0.05)
    assert np.nanmean(thr) == pytest.approx(np.nanmean(inp), rel=0.05)
    summary = summarise(rec)
    print(f"\nsteady {lo:.0f}-{hi:.0f} s: e2e p95 samples {np.round(e2e_p95 * 1000, 1)} ms, "
          f"kafka {np.round(kafka * 1000, 1)} ms, input {np.nanmean(inp):.0f}/s, "
          f"throughput {np.nanmean(thr):.0f}/s; events {seen}")
    print("\n".join(f"  {k}: {v}" for k, v in summary.rows()))
    assert summary.load_skipped == 0 and summary.load_expired == 0 and summary.load_shortfall == 0.0

    # -- the job frozen for 30 s: the records that waited carry the wait, and the summary shows it
    after = _window(rec, Metric.LATENCY_E2E_MAX, seen["resumed"], seen["resumed"] + 30)
    assert np.nanmax(after) >= PAUSE_S, after
    assert summary.latency_e2e.max >= PAUSE_S
    # (the time-in-Kafka gauge samples one record per subtask per scrape: a backlog drained between two
    # scrapes - 18,000 records take well under a second here - is not seen by it, on a fast machine never;
    # that is the thesis' metric and why the sink histogram above is recorded next to it)
    # while frozen nothing reached the sink: that time is a gap (NaN), not the steady value held
    frozen = rec.series(Metric.LATENCY_E2E_MEAN)
    frozen = frozen[(frozen.index > seen["paused"] + HELD_S + 1) & (frozen.index < seen["resumed"] - 1)]
    assert len(frozen) and frozen.isna().all(), frozen

    # -- Prometheus down for 60 s: no decision in the gap, skipped decisions recorded, record complete
    down, up = seen["prom_down"], seen["prom_up"]
    decisions = [e["ts"] for e in rec.events_of(EventKind.DECISION)]
    skipped = rec.events_of(EventKind.DECISION_SKIPPED)
    assert not [t for t in decisions if down <= t < up], (down, up, decisions)
    assert any(t < down for t in decisions) and any(t >= up for t in decisions)  # the probe decides otherwise
    in_gap = [e for e in skipped if down <= e["ts"] < up]
    assert len(in_gap) >= 4, skipped
    # each names a metric it lacked and why (the local snapshot's reason: Prometheus not answering)
    assert all("input_rate" in e["reason"] and "prometheus" in e["reason"].lower() for e in in_gap), in_gap[0]
    assert summary.decisions_skipped == len(skipped)
    ts = rec.timeseries
    for metric in (Metric.INPUT_RATE, Metric.THROUGHPUT, Metric.LATENCY_KAFKA, Metric.LATENCY_E2E_P95,
                   Metric.TASKMANAGERS, Metric.SKIPPED_TOTAL, Metric.EXPIRED_TOTAL):
        s = ts[(ts.metric == metric) & (ts.operator == "")].dropna(subset=["value"])
        assert (s.ts > up + 5).any(), f"{metric} not measured after Prometheus came back"
        gap = ts[(ts.metric == metric) & (ts.operator == "") & (ts.ts > down + HELD_S + 1) & (ts.ts < up - 1)]
        assert len(gap) >= 8 and gap.value.isna().all(), f"{metric} holds values while Prometheus was down"
    assert (run_dir / "prometheus-snapshot").is_dir()


def _describe(snap: MetricsSnapshot) -> str:
    ops = ", ".join(f"{n} p={m.parallelism} in={m.records_in_per_s:.0f}/s busy={m.busy_ms_per_s:.0f}ms/s"
                    for n, m in snap.operators.items())
    return (f"input {snap.input_rate:.0f}/s, throughput {snap.throughput:.0f}/s, lag {snap.kafka_lag:.0f} "
            f"({snap.kafka_lag_rate:+.0f}/s); {ops}")


def _cpu_seconds(stack: Any) -> dict[str, float]:
    """CPU seconds each task manager's processes used so far (all threads; /proc/<pid>/stat utime+stime)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    for tm in stack.taskmanager_ids():
        total = 0.0
        for pid in stack.cgroups.group(tm).pids():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # exited meanwhile
            total += (int(fields[11]) + int(fields[12])) / tick
        out[tm] = total
    return out


def _keeps_up(backend: Any, settle_s: float = 30.0, window_s: float = 30.0) -> tuple[bool, str, float]:
    """After a rescale (and the new task managers' JIT warm-up): does the job take at least 95 % of what is
    produced? A backlog left from before only raises its throughput; one that cannot keep up stays below.

    Also returns the smallest fraction of its CPU quota that a task manager running the source received in
    the window: a job that falls behind while its source's task managers did not get their quota was
    starved by the host (other work on the machine), which says nothing about the parallelism it needs."""
    backend.advance_to(backend.now() + settle_s)
    state = backend.state
    source = backend.topology.sources[0].name
    tms = backend.rescaler.busy_taskmanagers(state).get(source, [])
    before, t0 = _cpu_seconds(backend.stack), time.monotonic()
    backend.advance_to(backend.now() + window_s)
    after, took = _cpu_seconds(backend.stack), time.monotonic() - t0
    got = [(after[tm] - before[tm]) / (took * share) for tm in tms if tm in before and tm in after
           and (share := backend.stack.taskmanager_cpu(tm))]
    received = min(got) if got else float("nan")
    snap = backend.snapshot(window_s)
    return (bool(snap.throughput >= 0.95 * snap.input_rate),
            f"{_describe(snap)}; source's task managers got >= {received:.0%} of their CPU quota", received)


def _starved(received: float) -> bool:
    """A task manager that got less than 85 % of its quota while the job was behind was held back by
    the host, not by its quota (a saturated Flink task manager uses its whole quota)."""
    return not received >= STARVED_BELOW


def _true_rate(snap: MetricsSnapshot, op: str) -> float:
    """Records/s one subtask of `op` takes when busy all the time (DS2's true processing rate)."""
    m = snap.operators[op]
    return m.records_in_per_s / m.parallelism / (m.busy_ms_per_s / 1000.0)


def _measured_true_rate(backend: Any, op: str, window_s: float = 20.0, tries: int = 4) -> tuple[MetricsSnapshot, float]:
    """`op`'s true rate from the first window in which Flink's busy time measured it. A Kafka source can read
    0 ms busy for a whole window (seen at t = 40 s in one full run): no rate to divide by, so unknown, and the
    next window is read instead of failing on a division by zero."""
    for _ in range(tries):
        snap = backend.snapshot(window_s)
        m = snap.operators[op]
        if m.busy_ms_per_s > 0 and m.records_in_per_s > 0:
            return snap, _true_rate(snap, op)
        backend.advance_to(backend.now() + window_s)
    raise AssertionError(f"{op}'s busy time read 0 in {tries} windows of {window_s:g} s: its true rate is unknown")


def test_ds2_asks_for_the_parallelism_that_keeps_up(stack: Any) -> None:
    from autoscalers.ds2 import DS2, DS2Config
    from harness.backends.local.backend import LocalBackend
    from harness.topology import load_topology
    from workloads.patterns import build_pattern

    # Only the source is held to a fraction of its task manager's quota, so that the rate needs ~2.5 source
    # subtasks: its true rate is measured warm at the full quota first (C1 only, see LOCAL), then its share
    # is set from it. The map and the sink keep the full quota (they have headroom at this rate).
    rate, target_subtasks = 18_000.0, 2.5
    exp = _experiment("it-measure-ds2", {"name": "ds2"}, rate=rate, duration_s=1800)
    backend = LocalBackend(stack, keep_stack_up=True)
    try:
        backend.start(exp, build_pattern(exp.pattern, exp.seed, "q1"), load_topology("q1"))
        source = backend.topology.sources[0].name
        backend.advance_to(40)
        full, true_rate = _measured_true_rate(backend, source)
        share = min(1.0, max(SOURCE_SHARE_FLOOR, rate / (target_subtasks * true_rate)))
        print(f"\nfull quota: {_describe(full)}; source true rate {true_rate:.0f}/s, share {share:.2f}")
        assert backend.rescale({}, {source: share}).ok
        backend.advance_to(backend.now() + 30)
        snap = backend.snapshot(20)
        decision = DS2(DS2Config(overprovisioning_factor=1.0)).decide(snap, History())
        print(f"DS2 on {_describe(snap)}\n -> {decision.reason if decision else 'keep'}")
        # no decision means "the current parallelism is right": that answer is judged the same way
        asked = {**snap.parallelism, **(decision.parallelism if decision else {})}
        if asked != snap.parallelism:
            res = backend.rescale(asked, None)
            assert res.ok, res.error
        ok, why, _ = _keeps_up(backend)
        print(f"DS2's {asked}: keeps up {ok}: {why}")
        if ok:
            # and it did not ask for 2 or more too many: its largest operator with two fewer falls behind
            op, p = max(asked.items(), key=lambda kv: kv[1])
            if p >= 3:
                assert backend.rescale({**asked, op: p - 2}, None).ok
                fewer_ok, fewer_why, fewer_received = _keeps_up(backend)
                print(f"{op}={p - 2}: keeps up {fewer_ok}: {fewer_why}")
                if not fewer_ok and _starved(fewer_received):
                    pytest.skip(f"inconclusive, the host starved the task managers: {op}={p - 2}: {fewer_why}")
                assert not fewer_ok, f"DS2 asked {asked}, but {op}={p - 2} keeps up too: {fewer_why}"
        else:
            more = {**asked, source: asked[source] + 1}
            assert backend.rescale(more, None).ok
            more_ok, more_why, more_received = _keeps_up(backend)
            print(f"one more source subtask {more}: keeps up {more_ok}: {more_why}")
            if not more_ok and _starved(more_received):
                pytest.skip(f"inconclusive, the host starved the task managers: {more}: {more_why}")
            assert more_ok, f"DS2 asked {asked} ({why}); one more source subtask does not keep up either: {more_why}"
    finally:
        backend.stop()
