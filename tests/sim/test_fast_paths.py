"""The simulator's fast paths change no result: each run here is repeated through a reference path that
does the same work the plain way, and every output must be bit-identical.

The fast paths (issue 13: the simulation CPU of a run): the step packs its row with `struct` into a flat
C-double buffer (reference: numpy's own conversion of the row list into the row array); the lag slope
reuses the centred sample times per length (reference: `slope`'s formula computed afresh); the
inter-arrival sample is skipped when the run's autoscaler does not read it (reference: sampled at every
snapshot, as before `measure_only` existed); each snapshot's per-subtask readings are built when an autoscaler
first reads them (reference: built with the snapshot, as before); task managers started together compute
their warm-up once (reference: once per subtask), and a change of capacity alone leaves the layout as it is
(reference: the whole layout again); the loop takes no snapshot in a cool-down no one reads (reference: one
at every tick). The references are the code these paths replaced.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

import harness.backends.sim.backend as sim_backend
from autoscalers.base import Autoscaler
from autoscalers.ds2 import DS2
from harness.backends.sim import readout
from harness.backends.sim.backend import INTERARRIVALS_UNREAD, SimBackend
from harness.backends.sim.kafka import FifoTopic, regroup
from harness.backends.sim.model import SimModel
from harness.config import Experiment
from harness.metrics.snapshot import LazySubtasksOperatorMetrics, MetricsSnapshot, OperatorMetrics
from harness.runner import run_experiment
from harness.vocabulary import Metric
from tests.sim.conftest import constant, pipeline, start


class NumpyRowModel(SimModel):
    """The model with the pre-change row write: numpy converts the step's list into the row array."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pack_row = self._numpy_row

    def _numpy_row(self, _buf: object, offset: int, *row: float) -> None:
        self._rows[offset // (8 * self.row_width)] = list(row)


class ReferenceModel(NumpyRowModel):
    """Also the pre-change warm-up paths: each subtask's warm-up fraction computed on its own (no shared
    birth times; the slowest of them where it caps the operator), and a change of capacity re-running the whole
    layout (`_configure`: partition groups, shares, a new `version` that drops the readout's per-configuration
    caches)."""

    recomputed = 0  # capacity changes during the run: the comparison must have exercised the path

    def _warm_fraction(self, i: int, cores: float) -> tuple[float, float]:
        w = self.warmup
        assert w is not None
        now, ahead = self.now, self.recost_every * self.dt
        each = [w.mean_fraction((now - b) * cores, (now + ahead - b) * cores) for b in self.born[i]]
        if not self._capped_by_slowest(i):
            return sum(each) / len(each), 1.0
        slowest = min(each)
        if len(set(self.born[i])) == 1:
            return slowest, 1.0
        return slowest, sum(slowest / f if f > 0.0 else 1.0 for f in each) / len(each)

    def _apply_capacities(self) -> None:
        if getattr(self, "_in_layout", False):
            super()._apply_capacities()
            return
        type(self).recomputed += 1
        self._in_layout = True
        try:
            self._configure()
        finally:
            self._in_layout = False


def reference_slope(y: np.ndarray, dt: float) -> float:
    """`readout.slope` before its centred times were cached."""
    n = len(y)
    if n < 2:
        return 0.0
    t = np.arange(n) - (n - 1) / 2.0
    return float(t @ y) / (float(t @ t) * dt)


class SamplingBackend(SimBackend):
    """Takes the inter-arrival sample whatever the autoscaler reads (the pre-change behaviour)."""

    def measure_only(self, metrics: frozenset[Metric]) -> None:
        pass


def eager_operator(build: Any, **values: Any) -> OperatorMetrics:
    """The readout's operator built at once, subtasks included (the pre-change behaviour)."""
    return OperatorMetrics(**values, subtasks=build())


def unbuilt_subtasks(snap: MetricsSnapshot) -> int:
    """Operators of a snapshot whose per-subtask readings no one has read yet."""
    return sum("_build_subtasks" in vars(m) for m in snap.operators.values())


class Recorder:
    """Wraps a backend's `snapshot` to keep every snapshot the loop took."""

    def __init__(self, backend: SimBackend) -> None:
        self.snaps: list[MetricsSnapshot] = []
        inner = backend.snapshot

        def snapshot(window_s: float) -> MetricsSnapshot:
            snap = inner(window_s)
            self.snaps.append(snap)
            return snap

        backend.snapshot = snapshot  # type: ignore[method-assign]


def _plain(snap: MetricsSnapshot) -> dict[str, Any]:
    """A snapshot's values, without the inter-arrival sample and its reason (compared separately)."""
    out = {f.name: getattr(snap, f.name) for f in dataclasses.fields(snap)
           if f.name not in ("topology", "operators", "interarrival_s", "why_missing")}
    out["why"] = {k: v for k, v in snap.why_missing.items() if k != str(Metric.INTERARRIVAL)}
    out["operators"] = {name: dataclasses.asdict(m) for name, m in snap.operators.items()}
    return out


def _same(a: object, b: object) -> bool:
    """Equal values, NaN equal to NaN (bit-identical floats otherwise)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _run(tmp: Path, query: str, backend: SimBackend, readings: str = "flink") -> tuple[Recorder, Any, Any, np.ndarray]:
    exp = Experiment.model_validate({"name": f"ds2-{query}", "query": query, "backend": "sim",
                                     "autoscaler": {"name": "ds2"}, "pattern": {"name": "cosine"}, "seed": 2,
                                     "duration_s": 3600.0, "sim": {"readings": readings}})
    rec = Recorder(backend)
    run_dir = run_experiment(exp, tmp, backend=backend)
    ts = pq.read_table(run_dir / "timeseries.parquet").to_pandas()
    events = pq.read_table(run_dir / "events.parquet").to_pandas()[["ts", "kind", "reason"]]
    assert backend.model is not None
    return rec, ts, events, backend.model.rows_array().copy()


@pytest.mark.parametrize(("query", "readings"), [("q11", "flink"), ("q1", "flink"), ("q11", "exact")])
def test_a_ds2_run_is_bit_identical_to_the_reference_paths(tmp_path: Path, query: str, readings: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """flink: the calibrated profiles' noisy readings (one reading per subtask); exact: one per kind of subtask.

    Three runs: `fast` as a run goes (no monitor step in DS2's cool-downs), `every` with a snapshot at every
    tick (what an autoscaler that reads past snapshots gets: lazily built subtasks), and the reference."""
    fast, fast_ts, fast_events, fast_rows = _run(tmp_path / "fast", query, SimBackend(), readings)
    with monkeypatch.context() as patch:
        patch.setattr(DS2, "READS_PAST_SNAPSHOTS", True)  # the loop takes every tick's snapshot, as before
        every, every_ts, every_events, every_rows = _run(tmp_path / "every", query, SimBackend(), readings)
    # DS2 reads the subtasks' rates and busy time when it decides, not in its cool-down after an action: the
    # readings of most snapshots were never built (the saving), and are built now, when the comparison reads them
    unread = [s for s in every.snaps if unbuilt_subtasks(s)]
    assert all(unbuilt_subtasks(s) == len(s.operators) for s in unread)
    assert len(every.snaps) / 2 < len(unread) < len(every.snaps) - 2
    assert all(isinstance(m, LazySubtasksOperatorMetrics) for s in unread for m in s.operators.values())
    ReferenceModel.recomputed = 0
    with monkeypatch.context() as patch:
        patch.setattr(DS2, "READS_PAST_SNAPSHOTS", True)
        patch.setattr(sim_backend, "SimModel", ReferenceModel)
        patch.setattr(readout, "slope", reference_slope)
        patch.setattr(readout.LazySubtasksOperatorMetrics, "create", eager_operator)
        ref_backend = SamplingBackend()
        ref, ref_ts, ref_events, ref_rows = _run(tmp_path / "ref", query, ref_backend, readings)
        assert isinstance(ref_backend.model, ReferenceModel)
    assert not any(unbuilt_subtasks(s) for s in ref.snaps)
    assert ReferenceModel.recomputed > 20  # fresh task managers warmed up after the rescales

    for rows, ts, events in ((fast_rows, fast_ts, fast_events), (every_rows, every_ts, every_events)):
        assert np.array_equal(rows, ref_rows, equal_nan=True)
        assert ts.equals(ref_ts)
        assert events.equals(ref_events)
    assert len(every.snaps) == len(ref.snaps) > 200
    compared = 0
    for a, b in zip(every.snaps, ref.snaps, strict=True):
        assert _same(_plain(a), _plain(b)), f"snapshot at t={a.t} differs"
        for op in a.operators.values():
            # a lazy operator equals the plain one of the same values (`==`; built from its own values, as a
            # NaN computed apart in the reference run never equals its own: _same above compared those)
            assert op == OperatorMetrics(**{f.name: getattr(op, f.name) for f in dataclasses.fields(op)})
            compared += 1
    assert compared > 100
    # the plain run took only the snapshots DS2 decided on, each the same as the reference's at that time
    ref_at = {s.t: s for s in ref.snaps}
    assert 2 < len(fast.snaps) < len(ref.snaps) / 4
    for a in fast.snaps:
        assert _same(_plain(a), _plain(ref_at[a.t])), f"snapshot at t={a.t} differs"
    n_subtasks = [len(m.subtasks) for m in every.snaps[-1].operators.values()]
    assert n_subtasks == [m.parallelism for m in every.snaps[-1].operators.values()] and max(n_subtasks) > 1
    if readings == "flink":  # each subtask has its own noisy reading
        busy = {s.busy_ms_per_s for snap in every.snaps for m in snap.operators.values() for s in m.subtasks}
        assert len(busy) > 1000
    # DS2 does not read inter-arrival times: the fast run left them out and says why; the reference sampled them
    measured = [s for s in every.snaps if not s.why_missing.get("*")]
    assert all(s.interarrival_s is None and s.why_missing[str(Metric.INTERARRIVAL)] == INTERARRIVALS_UNREAD
               for s in measured)
    assert sum(s.interarrival_s is not None and len(s.interarrival_s) > 1000 for s in ref.snaps) > 200
    # and DS2 changed the job's parallelism, so rescales (regrouped Kafka backlogs, new rows) were compared too
    assert (fast_events.kind == "action").sum() >= 2


def test_rows_written_past_the_preallocated_steps_match_numpy_rows() -> None:
    """A model advanced beyond its arrivals grows its row buffers; the rows before and after stay exact."""
    fast = start(pipeline(state_bytes=32.0, ttl=10.0), constant(8_000, 120), 2, kind="poisson")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim_backend, "SimModel", NumpyRowModel)
        ref = start(pipeline(state_bytes=32.0, ttl=10.0), constant(8_000, 120), 2, kind="poisson")
    assert fast.model is not None and ref.model is not None
    capacity = len(fast.model._rows)
    for b in (fast, ref):
        b.advance_to(60)
        b.rescale({"mid": 1, "src": 3}, None)
        b.advance_to(3 * capacity)
    assert len(fast.model._rows) > capacity  # grew
    assert fast.model.k == ref.model.k >= 3 * capacity - 1
    assert np.array_equal(fast.model.rows_array(), ref.model.rows_array(), equal_nan=True)
    assert np.array_equal(fast.model.e2e_array(), ref.model.e2e_array())
    assert fast.model.rows_array()[:, 0].sum() > 0  # arrivals were recorded, not zeros


@pytest.mark.parametrize(("name", "params", "reads_sample"), [
    ("ds2", {}, False),
    ("dhalion", {}, False),
    ("mead", {}, True),
    ("mead", {"poisson_without_arrivals": True}, True),  # still uses a sample when there is one
    ("mpc", {}, True),  # the arrivals' SCV from the sample
    ("mpc", {"arrival_scv": 1.0}, False),
])
def test_autoscalers_that_read_inter_arrival_times_say_so(name: str, params: dict[str, Any],
                                                          reads_sample: bool) -> None:
    import autoscalers

    scaler: Autoscaler = autoscalers.create(name, params, autoscalers.RunContext())
    assert (Metric.INTERARRIVAL in scaler.reads()) is reads_sample
    assert scaler.needs().all() <= scaler.reads()


def _reference_regroup(queues: list[FifoTopic], weights: list[float]) -> list[list[list[float]]]:
    """`regroup`'s buckets as it computed them for every number of queues: np.unique + np.bincount."""
    flat = np.array([v for q in queues for b in q.buckets for v in b], dtype=float)
    steps, where = np.unique(flat[0::2], return_inverse=True)
    pooled = np.bincount(where.ravel(), weights=flat[1::2], minlength=len(steps))
    return [[[s, c] for s, c in zip(steps.tolist(), (pooled * w).tolist(), strict=True) if c > 0.0] for w in weights]


def test_regrouping_one_source_queue_is_bit_identical_to_pooling_it() -> None:
    rng = np.random.default_rng(7)
    q = FifoTopic()
    for step in range(2_000):
        q.produce(step, float(rng.poisson(40_000.0)) / 3.0)
    q.consume(2_000, 123_456.7)  # a partly taken head bucket
    weights = [10 / 24, 14 / 24]
    expected = _reference_regroup([q], weights)
    out = regroup([q], weights)
    assert [list(map(list, nq.buckets)) for nq in out] == expected
    assert len(expected[0]) > 1_900
    assert sum(nq.pending for nq in out) == pytest.approx(q.pending, rel=1e-12)
    # two queues (the general path) still pool equal steps
    two = regroup(out, [1.0])
    assert [list(map(list, nq.buckets)) for nq in two] == _reference_regroup(out, [1.0])


def test_the_noise_tables_running_sums_of_a_few_columns_equal_the_whole_tables() -> None:
    """Reference: each update's noise straight from the drawn table, all 128 subtasks' columns (the running sums
    are kept for the few columns a job has): its own interval's draw, or for a windowed gauge the mean of the draws
    of its window's intervals, cyclic over the table; then the mean over the updates."""
    seed, op = 7, 1
    n_rows = readout.NOISE_UPDATES
    z = np.random.default_rng([seed, 0x5EED, op]).standard_normal(
        (n_rows, len(readout._GAUGES), readout.NOISE_SUBTASKS))
    table = readout.NoiseTable(seed)
    windowed = np.array([True, True, False, False])
    cases = [(1, [0, 1, 2], [1, 2, 3]), (3, [510, 511, 512, 513], [12, 12, 12, 12]), (9, [100], [5]),
             (2, [77, 78], [12, 1]), (128, list(range(300, 320)), [12] * 20), (40, [5, 6, 7], [6, 7, 8])]
    for subtasks, updates, spans in cases:
        got = table.window_mean_all(op, updates, spans, windowed, subtasks)
        own = np.mean([z[u % n_rows] for u in updates], axis=0)[:, :subtasks]
        mean = np.mean([z[[(u - j) % n_rows for j in range(m)]].mean(axis=0)
                        for u, m in zip(updates, spans, strict=True)], axis=0)[:, :subtasks]
        assert np.allclose(got, np.where(windowed[:, None], mean, own), atol=1e-12)
    assert table._cum[op].shape[2] == readout.NOISE_SUBTASKS  # grown on demand, never shrunk


def test_a_sim_snapshot_is_pure_unless_it_draws_an_inter_arrival_sample() -> None:
    """The loop leaves out unread snapshots only when taking one changes nothing (`PureSnapshots`)."""
    from harness.backends.base import PureSnapshots

    backend = SimBackend()
    assert isinstance(backend, PureSnapshots)
    backend.measure_only(frozenset({Metric.BUSY}))
    assert backend.snapshot_is_pure()
    backend.measure_only(frozenset({Metric.BUSY, Metric.INTERARRIVAL}))
    assert not backend.snapshot_is_pure()
