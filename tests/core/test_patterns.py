import numpy as np
import pytest
from pydantic import ValidationError

from workloads.patterns import PatternConfig, SpikesConfig, build_pattern


def pat(name, seed=1, query=None, **kw):
    return build_pattern(PatternConfig(name=name, **kw), seed, query)


def test_cosine_starts_at_max_and_stays_in_bounds():
    p = pat("cosine", params={"noise": 0})
    assert p.step_rates[0] == pytest.approx(2_200_000)
    assert p.step_rates.min() >= 250_000 - 1e-6
    assert p.step_rates.max() <= 2_200_000 + 1e-6
    # period 60 min: the minimum is at minute 30 and the max again at minute 60
    assert int(np.argmin(p.step_rates[:60])) == 30
    assert p.step_rates[60] == pytest.approx(2_200_000)
    assert p.duration_s == 140 * 60


def test_noise_is_bounded_and_seeded():
    a, b, c = pat("cosine", seed=1), pat("cosine", seed=1), pat("cosine", seed=2)
    clean = pat("cosine", params={"noise": 0})
    assert np.array_equal(a.step_rates, b.step_rates)
    assert not np.array_equal(a.step_rates, c.step_rates)
    diff = a.step_rates - clean.step_rates
    assert diff.min() >= 0 and diff.max() <= 100_000


def test_random_walk_steps_and_clamp():
    p = pat("random", seed=3)
    assert p.step_rates[0] == 1_250_000
    assert np.abs(np.diff(p.step_rates)).max() <= 500_000 + 1e-6
    assert p.step_rates.min() >= 0 and p.step_rates.max() <= 2_500_000


def test_increasing_and_decreasing_are_monotone_to_their_ends():
    inc, dec = pat("increasing", seed=4), pat("decreasing", seed=4)
    assert inc.step_rates[0] == 0 and inc.step_rates[-1] == pytest.approx(2_500_000)
    assert (np.diff(inc.step_rates) >= 0).all()
    assert dec.step_rates[0] == pytest.approx(2_500_000) and dec.step_rates[-1] == pytest.approx(0)
    assert (np.diff(dec.step_rates) <= 0).all()


def test_convergence_stages():
    p = pat("convergence")
    assert p.duration_s == 90 * 60
    assert [s.name for s in p.stages] == ["stage0", "stage1", "stage2"]
    assert p.rate_at(5 * 60) == 0
    assert p.rate_at(20 * 60) == 2_000_000
    assert p.rate_at(70 * 60) == 1_000_000
    assert p.stages[1].start_s == 600 and p.stages[1].end_s == 3000


def test_scale_and_time_scale():
    full = pat("cosine", params={"noise": 0})
    small = pat("cosine", params={"noise": 0}, scale=0.01, time_scale=10)
    assert small.duration_s == pytest.approx(full.duration_s / 10)
    assert small.max_rate == pytest.approx(full.max_rate * 0.01)
    assert small.rate_at(6 * 30) == pytest.approx(full.rate_at(60 * 30) * 0.01)
    # records are conserved by the integral: 1/10 of the time at 1/100 of the rate
    assert small.records_between(0, small.duration_s) == pytest.approx(
        full.records_between(0, full.duration_s) / 1000
    )


def test_query_specific_cosine_rates():
    p = pat("cosine", query="q3", params={"noise": 0})
    assert p.max_rate == pytest.approx(33_000)
    assert p.step_rates.min() == pytest.approx(3_000)


def test_spikes_add_on_top():
    base = pat("constant", params={"rate": 100, "duration_min": 30})
    spiky = pat("constant", params={"rate": 100, "duration_min": 30},
                spikes=SpikesConfig(at_min=[10], magnitude=2.0, duration_min=3))
    assert spiky.rate_at(10 * 60) == 300 and spiky.rate_at(12 * 60) == 300
    assert spiky.rate_at(13 * 60) == 100 and base.rate_at(10 * 60) == 100


def test_trace_replay(tmp_path):
    f = tmp_path / "trace.csv"
    f.write_text("rate\n10\n20\n30\n")
    p = pat("trace", params={"path": str(f)})
    assert p.duration_s == 3 and list(p.per_second()) == [10, 20, 30]
    g = tmp_path / "events.csv"
    g.write_text("timestamp\n100.1\n100.5\n101.2\n102.9\n102.95\n")
    q = pat("trace", params={"path": str(g), "column": "timestamp"})
    assert list(q.per_second()) == [2, 1, 2]
    # a coarser trace: one row per minute, replayed 10 times faster (6 s per row)
    r = pat("trace", params={"path": str(f), "step_s": 60}, time_scale=10)
    assert r.duration_s == 18 and r.rate_at(5.9) == 10 and r.rate_at(6.0) == 20 and r.rate_at(17) == 30


@pytest.mark.parametrize("params", [{"min_rate": -1}, {"bogus": 1}, {"max_rate": 1, "min_rate": 5}])
def test_bad_params_are_rejected_with_the_field(params):
    with pytest.raises(ValidationError) as exc:
        PatternConfig(name="cosine", params=params)
    assert "params." in str(exc.value) or "max_rate" in str(exc.value)
