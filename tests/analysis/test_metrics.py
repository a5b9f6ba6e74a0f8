"""The metric core on hand-made series whose answers are worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from harness.analysis import metrics as mx


class TestTimeWeightedMean:
    def test_irregular_steps_weigh_by_duration(self):
        # 1 for 10 s, 4 for 30 s, 2 for 20 s (held until the end at 60 s)
        assert mx.time_weighted_mean([0, 10, 40], [1, 4, 2], end=60) == pytest.approx(170 / 60)

    def test_without_end_the_last_sample_has_no_weight(self):
        assert mx.time_weighted_mean([0, 10, 40], [1, 4, 2]) == pytest.approx((10 + 120) / 40)

    def test_differs_from_plain_mean_on_irregular_steps(self):
        tw = mx.time_weighted_mean([0, 1, 61], [100, 0, 0], end=61)
        assert tw == pytest.approx(100 / 61)
        assert tw != pytest.approx(np.mean([100, 0, 0]))

    def test_unsorted_input_is_sorted(self):
        assert mx.time_weighted_mean([40, 0, 10], [2, 1, 4], end=60) == pytest.approx(170 / 60)

    def test_a_nan_sample_is_a_gap_not_the_previous_value_held(self):
        # 1 for [0, 10), unknown for [10, 20), 2 for [20, 30): the gap counts in neither area nor span
        assert mx.time_weighted_mean([0, 10, 20], [1, math.nan, 2], end=30) == pytest.approx((1 * 10 + 2 * 10) / 20)
        assert mx.held_area([0, 10, 20], [1, math.nan, 2], end=30) == pytest.approx((30.0, 20.0))

    def test_an_outage_does_not_read_as_cheap(self):
        # 0.1 s latency, an outage (gap) of 60 s, then 30 s of records that waited through it
        ts, lat = [0, 10, 20, 80, 90], [0.1, 0.1, math.nan, 30.0, 1.0]
        assert mx.time_weighted_mean(ts, lat, end=100) == pytest.approx((0.1 * 20 + 30 * 10 + 1 * 10) / 40)

    def test_a_series_ending_in_a_gap_holds_nothing_after_it(self):
        assert mx.time_weighted_mean([0, 10], [4, math.nan], end=100) == 4
        assert mx.held_area([0, 10], [4, math.nan], end=100) == pytest.approx((40.0, 10.0))
        assert math.isnan(mx.time_weighted_mean([0, 10], [math.nan, math.nan], end=100))

    def test_single_sample_and_empty(self):
        assert mx.time_weighted_mean([5], [7]) == 7
        assert math.isnan(mx.time_weighted_mean([], []))


class TestPercentile:
    def test_linear_interpolation(self):
        assert mx.percentile([5, 1, 3, 2, 4], 50) == 3
        # rank 0.95 * 4 = 3.8 -> 4 + 0.8 * (5 - 4)
        assert mx.percentile([1, 2, 3, 4, 5], 95) == pytest.approx(4.8)

    def test_nan_ignored_and_empty(self):
        assert mx.percentile([1, math.nan, 3], 50) == 2
        assert math.isnan(mx.percentile([], 95))


class TestConvergence:
    stage = mx.Stage("stage1", 600.0, 3000.0)  # a 40-minute stage

    def test_never_moves_converges_at_once(self):
        c = mx.convergence(self.stage, [], settle_s=315)
        assert (c.converged, c.actions, c.time_s) == (True, 0, 0.0)

    def test_actions_outside_the_stage_do_not_count(self):
        c = mx.convergence(self.stage, [100.0, 3000.0, 3100.0], settle_s=315)
        assert c.actions == 0 and c.converged

    def test_converges_after_a_few_actions(self):
        c = mx.convergence(self.stage, [700.0, 1000.0, 1300.0], settle_s=315)
        assert c.converged and c.actions == 3
        assert c.time_s == pytest.approx(1300.0 - 600.0)

    def test_moves_until_the_end_is_not_converged(self):
        actions = np.arange(615.0, 3000.0, 315.0)  # every cool-down + period, right to the end
        c = mx.convergence(self.stage, actions, settle_s=315)
        assert not c.converged
        assert math.isnan(c.time_s)
        assert c.actions == len(actions)

    def test_converged_then_one_late_action(self):
        c = mx.convergence(self.stage, [700.0, 1000.0, 2900.0], settle_s=315)
        assert not c.converged and c.actions == 3 and c.last_action_s == 2900.0

    def test_late_action_with_enough_quiet_after_it_moves_the_convergence_time(self):
        c = mx.convergence(self.stage, [700.0, 1000.0, 2000.0], settle_s=315)
        assert c.converged and c.time_s == pytest.approx(1400.0)


class TestSpec:
    def test_ideal_resources_rounds_up_per_operator(self):
        ideal = mx.ideal_resources(np.array([0.0, 100.0, 150.0]), {"a": 1 / 100, "b": 1 / 30})
        assert ideal.tolist() == [2, 5, 7]

    def test_exact_multiple_does_not_round_up_on_float_noise(self):
        coef = 0.1 * 6  # 0.6000000000000001
        assert 5 * coef > 3  # the float product really is above 3
        assert mx.ideal_resources(np.array([5.0]), {"a": coef}).tolist() == [3]

    def test_min_parallelism(self):
        assert mx.ideal_resources(np.array([0.0]), {"a": 0.1, "b": 0.1}, min_parallelism=2).tolist() == [4]

    def test_toy_ideal_curve(self):
        # ideal: 2, 4 from 100 s, 2 from 200 s; actual follows 50 s late; T = 300 s
        p = mx.provisioning(np.array([0.0, 100, 200]), np.array([2.0, 4, 2]),
                            np.array([0.0, 150, 250]), np.array([2.0, 4, 2]), end=300)
        assert p.period_s == 300
        assert p.accuracy_u == pytest.approx(2 * 50 / 300)
        assert p.accuracy_o == pytest.approx(2 * 50 / 300)
        assert p.timeshare_u == pytest.approx(100 * 50 / 300)
        assert p.timeshare_o == pytest.approx(100 * 50 / 300)

    def test_perfect_provisioning_is_zero(self):
        p = mx.provisioning(np.array([0.0, 10]), np.array([3.0, 5]), np.array([0.0, 10]), np.array([3.0, 5]), 20)
        assert (p.accuracy_u, p.accuracy_o, p.timeshare_u, p.timeshare_o) == (0, 0, 0, 0)

    def test_period_starts_when_both_series_are_known(self):
        p = mx.provisioning(np.array([0.0]), np.array([1.0]), np.array([50.0]), np.array([3.0]), end=100)
        assert p.period_s == 50 and p.accuracy_o == pytest.approx(2.0) and p.timeshare_o == 100

    def test_replica_minutes(self):
        assert mx.replica_minutes(np.array([0.0, 60]), np.array([2.0, 4]), end=180) == pytest.approx(2 + 8)


class TestSaso:
    def test_amplitude_is_mean_euclidean_distance(self):
        changes = [({"a": 1, "b": 1}, {"a": 4, "b": 5}), ({"a": 4, "b": 5}, {"a": 4, "b": 6})]
        assert mx.amplitude(changes) == pytest.approx((5 + 1) / 2)
        assert math.isnan(mx.amplitude([]))


class TestMeanCI:
    def test_t_interval(self):
        ci = mx.mean_ci([1, 2, 3, 4, 5])
        sd = math.sqrt(2.5)
        assert ci.mean == 3 and ci.n == 5
        assert ci.half_width == pytest.approx(2.776 * sd / math.sqrt(5), rel=1e-3)  # t(0.975, 4) = 2.776
        assert ci.low < 3 < ci.high

    def test_wider_for_fewer_repetitions(self):
        assert mx.mean_ci([1, 2, 3]).half_width > mx.mean_ci([1, 2, 3, 1, 2, 3]).half_width

    def test_single_and_nan(self):
        assert math.isnan(mx.mean_ci([4.0]).half_width) and mx.mean_ci([4.0]).n == 1
        assert mx.mean_ci([1.0, math.nan, 3.0]).n == 2
        assert mx.mean_ci([]).n == 0
