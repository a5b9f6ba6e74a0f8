import pytest

from autoscalers.base import ScalingDecision
from harness.config import ScaleManagerConfig
from harness.scaling import ScaleManager, proportional_cap


def test_proportional_cap_thesis_example():
    assert proportional_cap({"a": 10, "b": 30, "c": 20}, 30) == {"a": 5, "b": 15, "c": 10}


def test_proportional_cap_keeps_minimum_and_total():
    out = proportional_cap({"a": 1, "b": 50, "c": 49}, 10)
    assert sum(out.values()) == 10 and min(out.values()) >= 1


def test_proportional_cap_too_few():
    with pytest.raises(ValueError):
        proportional_cap({"a": 5, "b": 5}, 1)


def test_max_increase_per_action():
    sm = ScaleManager(ScaleManagerConfig(max_increase_per_action=15))
    plan = sm.plan(ScalingDecision(parallelism={"a": 40}), {"a": 10, "b": 2})
    assert plan.parallelism == {"a": 25, "b": 2}
    assert plan.changed and any("max increase" in x for x in plan.limits)


def test_decreases_are_not_capped_and_min_parallelism_holds():
    sm = ScaleManager(ScaleManagerConfig())
    plan = sm.plan(ScalingDecision(parallelism={"a": 0}), {"a": 30})
    assert plan.parallelism == {"a": 1}


def test_total_capped_proportionally():
    sm = ScaleManager(ScaleManagerConfig(max_taskmanagers=30, max_increase_per_action=100))
    plan = sm.plan(ScalingDecision(parallelism={"a": 10, "b": 30, "c": 20}), {"a": 1, "b": 1, "c": 1})
    assert plan.parallelism == {"a": 5, "b": 15, "c": 10}


def test_overprovisioning_only_on_requested_operators():
    sm = ScaleManager(ScaleManagerConfig(overprovisioning=1.5))
    plan = sm.plan(ScalingDecision(parallelism={"a": 3}), {"a": 2, "b": 2})
    assert plan.parallelism == {"a": 5, "b": 2}


def test_overprovisioning_multiplies_scale_ups_only():
    """ch. 6.6.4: "every scale-up target"; a scale-down (8 -> 4) or a kept size is taken as asked."""
    sm = ScaleManager(ScaleManagerConfig(overprovisioning=1.2, max_increase_per_action=100))
    plan = sm.plan(ScalingDecision(parallelism={"up": 5, "down": 4, "same": 6}), {"up": 2, "down": 8, "same": 6})
    assert plan.parallelism == {"up": 6, "down": 4, "same": 6}  # ceil(5 * 1.2) = 6, not 6.000000000000001 -> 7
    assert plan.limits == ["overprovisioning x1.2 on up"]
    only_down = sm.plan(ScalingDecision(parallelism={"down": 4}), {"down": 8})
    assert only_down.parallelism == {"down": 4} and only_down.limits == []


def test_no_change_is_reported():
    sm = ScaleManager(ScaleManagerConfig())
    plan = sm.plan(ScalingDecision(parallelism={"a": 2}), {"a": 2})
    assert not plan.changed


def test_cpu_share_only_change_counts():
    sm = ScaleManager(ScaleManagerConfig())
    plan = sm.plan(ScalingDecision(cpu_share={"a": 0.4}), {"a": 2}, {"a": 1.0})
    assert plan.changed and plan.cpu_share == {"a": 0.4} and plan.parallelism == {"a": 2}


def test_unknown_operator_is_an_error():
    with pytest.raises(ValueError, match="not in the job"):
        ScaleManager(ScaleManagerConfig()).plan(ScalingDecision(parallelism={"zz": 2}), {"a": 1})
