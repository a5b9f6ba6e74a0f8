"""Fresh task managers warm up in the simulator as the calibrated profile measured (`WarmUp`).

The model: a subtask's speed is its warm speed times the warm-up fraction of the CPU time its task manager
has had since it began processing; an operator runs at the mean over its subtasks, or at its slowest one's
where that one caps it (a keyed or round-robin input). Pinned here: the
first seconds of a run are as slow as the curve says, a scale-up adds cold subtasks (the old ones stay
warm), a scale-down keeps the warm ones, and `sim.taskmanager_warmup: false` or a profile without a
curve leaves every task manager warm (bit-identical to a run without the model).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.backends.sim.model import SimModel
from harness.calibrated_profile import ColdStart, QueryProfile, WarmUp, load_profile
from harness.topology import load_topology
from tests.sim.conftest import constant
from workloads.arrivals import ArrivalConfig

CORES = 0.1
CURVE = WarmUp(initial_fraction=0.25, tau_cpu_s=3.0, cores=0.25, warm_rate=30_000.0)  # tau 30 s at 0.1 CPU


def profile(warmup: WarmUp | None) -> QueryProfile:
    base = load_profile("q1")
    assert base is not None
    return base.model_copy(update={"warmup": warmup})


def started(warmup: WarmUp | None, rate: float, seconds: int, seed: int = 1, **cfg: object) -> SimBackend:
    b = SimBackend()
    b.start_with(load_topology("q1"), constant(rate, seconds), SimConfig(readings="exact", **cfg),  # type: ignore[arg-type]
                 1, tm_cores=CORES, profile=profile(warmup), arrivals=ArrivalConfig(kind="deterministic"), seed=seed)
    return b


def test_the_first_minute_is_as_slow_as_the_measured_curve() -> None:
    probe = started(None, 1.0, 1)
    cap = min(c.capacity(CORES) for c in probe.costs.ops)  # type: ignore[union-attr]  # selectivity 1 up to the sink
    cold = started(CURVE, 10 * cap, 120)
    warm = started(None, 10 * cap, 120)
    for b in (cold, warm):
        b.advance_to(60.0)
    taken_cold = cold.model.totals().processed  # type: ignore[union-attr]
    taken_warm = warm.model.totals().processed  # type: ignore[union-attr]
    assert taken_warm == pytest.approx(60.0 * cap, rel=0.02)  # the warm job runs at its capacity throughout
    # the curve's mean over the first minute at 0.1 CPU: 1 - 0.75 x tau/60 x (1 - e^(-60/tau)), tau = 30 s
    expected = 1.0 - 0.75 * 30.0 / 60.0 * (1.0 - math.exp(-2.0))
    assert taken_cold / taken_warm == pytest.approx(expected, rel=0.06)
    # and it gets there: after five time constants the cold run is as fast as the warm one
    for b in (cold, warm):
        b.advance_to(120.0)
    rows_c, rows_w = cold.model.rows_array(), warm.model.rows_array()  # type: ignore[union-attr]
    last_c, last_w = rows_c[-10:, 1].sum(), rows_w[-10:, 1].sum()
    assert last_c == pytest.approx(last_w, rel=0.04)


def test_nothing_is_taken_before_the_first_record_then_the_curve_runs() -> None:
    """The measured dead time (job running, no record taken yet) scales like the curve, by CPU time: 10 s
    measured at 0.25 CPU are 25 s at 0.1."""
    probe = started(None, 1.0, 1)
    cap = min(c.capacity(CORES) for c in probe.costs.ops)  # type: ignore[union-attr]
    curve = CURVE.model_copy(update={"dead_s": 10.0})
    b = started(curve, 10 * cap, 120)
    b.advance_to(25.0)
    assert b.model.totals().processed == 0.0  # type: ignore[union-attr]
    b.advance_to(60.0)
    expected = 60.0 * cap * curve.mean_fraction(0.0, 60.0 * CORES)
    assert b.model.totals().processed == pytest.approx(expected, rel=0.06)  # type: ignore[union-attr]
    assert expected < 0.5 * 60.0 * cap


def test_a_curve_measured_without_overload_is_not_taken_for_a_speed() -> None:
    """A cold start whose backlog did not grow measured the load it got: the sim keeps only its dead time."""
    unsaturated = CURVE.model_copy(update={"dead_s": 10.0, "saturated": False})
    dead_only = CURVE.model_copy(update={"dead_s": 10.0, "initial_fraction": 1.0})
    runs = [started(w, 50_000.0, 60) for w in (unsaturated, dead_only)]
    for b in runs:
        b.advance_to(60.0)
    a, b = (r.model.rows_array() for r in runs)  # type: ignore[union-attr]
    assert np.array_equal(a, b, equal_nan=True)
    assert runs[0].model.totals().processed > 0  # type: ignore[union-attr]


def warm_map(rate: float) -> tuple[SimBackend, SimModel, int, float]:
    """A q1 run at `rate` 600 s in (every task manager warm): the backend, its model, the map's index and its
    warm capacity per subtask."""
    b = started(CURVE, rate, 900)
    m = b.model
    assert m is not None
    i = m.names.index("map")
    b.advance_to(600.0)
    return b, m, i, m.costs.ops[i].capacity(CORES)


def test_a_scale_up_adds_cold_subtasks_and_a_scale_down_keeps_the_warm_ones() -> None:
    b, m, i, warm = warm_map(2_000)
    assert m.subtask_capacity(i) == pytest.approx(warm, rel=1e-3)  # 60 CPU-s in: warm
    res = b.rescale({"map": 3}, None)
    assert res.ok
    # right after the restart: one warm subtask and two at the curve's beginning; the source (1 subtask) feeds
    # the 3 round-robin, so the slowest caps them all: the map runs at the fresh ones' fraction (the curve's mean
    # until its next recomputation, at most 5 s = 0.5 CPU-s ahead), not at the mean with the warm one
    lo, hi = (warm * CURVE.fraction(c) for c in (0.0, 0.5))
    assert lo <= m.subtask_capacity(i) <= hi
    assert m.subtask_capacity(i) < warm * (1.0 + 2 * CURVE.fraction(0.0)) / 3
    b.advance_to(b.now() + 20.0)
    mid = m.subtask_capacity(i)
    assert warm * 0.5 < mid < warm * 0.95  # warming
    b.rescale({"map": 1}, None)
    b.advance_to(b.now() + 10.0)
    assert m.subtask_capacity(i) == pytest.approx(warm, rel=1e-3)  # the subtask kept is the warm one


def test_forward_pairs_and_a_sources_partitions_run_at_their_subtasks_mean_a_keyed_operator_at_its_slowest() -> None:
    """Source and map both 1 -> 2: the map's input is forward (one to one), so each warm/fresh pair runs on its
    own and the operator at the mean, as does the source (independent partitions). q11's window is keyed: one
    fresh subtask of two caps it."""
    b = started(CURVE, 2_000, 900)
    m = b.model
    assert m is not None
    b.advance_to(600.0)
    assert b.rescale({"bids_source": 2, "map": 2}, None).ok
    for name in ("bids_source", "map"):
        i = m.names.index(name)
        warm = m.costs.ops[i].capacity(CORES)
        lo, hi = (warm * (1.0 + CURVE.fraction(c)) / 2 for c in (0.0, 0.5))
        assert lo <= m.subtask_capacity(i) <= hi, name
    k = SimBackend()
    k.start_with(load_topology("q11"), constant(2_000, 900), SimConfig(readings="exact"), 1, tm_cores=CORES,
                 profile=load_profile("q11").model_copy(update={"warmup": CURVE}),  # type: ignore[union-attr]
                 arrivals=ArrivalConfig(kind="deterministic"))
    k.advance_to(600.0)
    assert k.rescale({"bids_source": 2, "session_window": 2}, None).ok
    q = k.model
    assert q is not None
    j = q.names.index("session_window")
    warm = q.costs.ops[j].capacity(CORES) * q.costs.ops[j].fed_scaled_out  # its source now runs scaled out
    assert warm * CURVE.fraction(0.0) <= q.subtask_capacity(j) <= warm * CURVE.fraction(0.5)
    assert q.subtask_capacity(j) < warm * (1.0 + CURVE.fraction(0.0)) / 2  # not the mean with the warm one


def test_warm_subtasks_beside_a_fresh_one_read_idle_time_not_busy() -> None:
    """Source 1 -> 4 and map 1 -> 3 under a backlog: two fresh map subtasks cap the round-robin-fed map, so the
    warm one takes a third of the records at its full speed and waits for input the rest of each second, as a
    Flink subtask whose senders block on another channel does. The map's mean busy reading is (2 + f) / 3 of
    the second (f: the fresh ones' fraction of the warm speed), and its CPU under the saturated level; once all
    are warm it reads its true load again."""
    b, m, i, warm = warm_map(100_000)
    assert b.rescale({"bids_source": 4, "map": 3}, None).ok  # four sources: the map, not they, caps the job
    b.advance_to(620.0)
    f = m.subtask_capacity(i) / warm
    assert 0.2 < f < 0.6  # still warming
    snap = b.snapshot(5.0).operators["map"]
    assert snap.records_in_per_s == pytest.approx(3 * m.subtask_capacity(i), rel=0.02)  # at the slowest's limit
    assert snap.busy_ms_per_s == pytest.approx(1000.0 * (2.0 + f) / 3.0, rel=0.02)
    assert snap.cpu_load is not None and snap.cpu_load < m.costs.ops[i].saturated_fraction - 0.05
    subtasks = [s.busy_ms_per_s for s in snap.subtasks]
    assert sum(subtasks) / 3 == pytest.approx(snap.busy_ms_per_s)
    b.advance_to(900.0)  # all warm: busy is records / capacity again
    late = b.snapshot(5.0).operators["map"]
    assert m.busy_f[i] == 1.0 or m.busy_f[i] > 0.999
    assert late.busy_ms_per_s == pytest.approx(1000.0 * min(1.0, late.records_in_per_s / (3 * m.subtask_capacity(i))),
                                               rel=0.01)


def test_without_the_model_every_task_manager_is_warm_and_the_run_unchanged() -> None:
    off = started(CURVE, 40_000, 120, taskmanager_warmup=False)
    none = started(None, 40_000, 120)
    for b in (off, none):
        b.advance_to(120.0)
    assert np.array_equal(off.model.rows_array(), none.model.rows_array(), equal_nan=True)  # type: ignore[union-attr]
    assert "warm-up" not in off.costs.source  # type: ignore[union-attr]
    assert "measured warm-up" in started(CURVE, 1, 10).costs.source  # type: ignore[union-attr]


def test_with_several_cold_starts_measured_a_run_takes_the_one_its_seeds_draw() -> None:
    fast, slow = ColdStart(initial_fraction=0.6, tau_cpu_s=1.0), ColdStart(initial_fraction=0.1, tau_cpu_s=6.0)
    curve = CURVE.model_copy(update={"starts": [fast, slow]})
    probe = started(None, 1.0, 1)
    cap = min(c.capacity(CORES) for c in probe.costs.ops)  # type: ignore[union-attr]

    def first_half_minute(warmup: WarmUp, seed: int = 1, **cfg: object) -> float:
        b = started(warmup, 10 * cap, 60, seed=seed, **cfg)
        b.advance_to(30.0)
        return float(b.model.totals().processed)  # type: ignore[union-attr]

    # start (experiment seed + noise seed) mod 2: at seed 1, noise seeds 1 and 3 the fast one, 0 and 2 the slow one
    by_noise = {k: first_half_minute(curve, noise_seed=k) for k in range(4)}
    assert by_noise[1] == by_noise[3] and by_noise[0] == by_noise[2]
    assert by_noise[1] > 1.5 * by_noise[0]
    assert first_half_minute(curve) == by_noise[0]  # no noise seed: the experiment's seed alone
    assert first_half_minute(curve, seed=2) == by_noise[1]
    for k, start in ((1, fast), (0, slow)):
        one = CURVE.model_copy(update={"initial_fraction": start.initial_fraction, "tau_cpu_s": start.tau_cpu_s})
        assert by_noise[k] == pytest.approx(first_half_minute(one), rel=1e-9)
    # a curve measured without overload is no speed: its starts go too, only the dead time stays
    unsaturated = curve.model_copy(update={"saturated": False})
    assert first_half_minute(unsaturated, noise_seed=1) == first_half_minute(unsaturated, noise_seed=0)
