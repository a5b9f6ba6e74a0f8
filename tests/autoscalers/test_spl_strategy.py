"""The SPL strategy (Gedik et al. 2014 as MPC's sec. 5.4 describes it): its rules, by hand."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from autoscalers import create
from autoscalers.base import AppliedAction, History
from autoscalers.baselines.config import SPLConfig
from autoscalers.baselines.spl import LevelSeen, SPLStrategy, congestion_index
from tests.builders import chain, op, snapshot

PAIR = chain("src", "win")  # the source feeds the scaled operator, as the splitter does in Ref. [2]
NONE = History()


def decide(scaler: SPLStrategy, p: int, served: float, blocked_ms: float, t: float = 4.0):
    """One control step with `win` at `p` replicas taking `served`/s while its feeder is blocked `blocked_ms`/s."""
    snap = snapshot(PAIR, t=t, window_s=4.0)(
        src=op(2, rin=served, bp=blocked_ms, lag_rate=0.0, input_rate=served), win=op(p, rin=served))
    return scaler.decide(snap, NONE)


def win_target(decision) -> int | None:
    return None if decision is None else decision.parallelism.get("win")


def test_congestion_index_is_the_feeders_blocking_fraction_and_kafkas_pile_up_for_a_source():
    snap = snapshot(PAIR, t=4.0)(src=op(2, rin=900.0, bp=250.0, lag_rate=100.0, input_rate=1000.0),
                                 win=op(3, rin=900.0))
    assert congestion_index(snap, "win") == pytest.approx(0.25)
    assert congestion_index(snap, "src") == pytest.approx(0.1)  # 100/s of 1000/s pile up in Kafka
    drained = snapshot(PAIR, t=4.0)(src=op(2, rin=900.0, lag_rate=-500.0, input_rate=1000.0), win=op(3))
    assert congestion_index(drained, "src") == 0.0  # a draining backlog is no congestion
    unknown = snapshot(PAIR, t=4.0)(src=op(2, rin=900.0, bp=math.nan), win=op(3))
    assert math.isnan(congestion_index(unknown, "win"))
    assert math.isnan(congestion_index(unknown, "src"))  # no lag rate measured


@pytest.mark.parametrize(("blocked_ms", "expected"), [(110.0, 4), (500.0, 4), (100.0, 2), (0.0, 2)])
def test_one_replica_more_above_the_congestion_threshold_one_less_below(blocked_ms, expected):
    # first step: no history, so a congested operator grows and a free one tries one less (amplitude 1, Tab. 7)
    assert win_target(decide(SPLStrategy(), 3, 1000.0, blocked_ms)) == expected


def test_an_increase_that_did_not_improve_throughput_is_not_repeated():
    scaler = SPLStrategy()
    assert scaler.step("win", 4, LevelSeen(1000.0, True))[0] == 1
    assert scaler.step("win", 5, LevelSeen(1020.0, True))[0] == 1  # 6 never tried: explore
    # back at 4 with the same load: 5 served 1020/s, not beyond 1000/s by the sensitivity (1020 * 0.9 < 1000)
    delta, why = scaler.step("win", 4, LevelSeen(1000.0, True))
    assert delta == 0 and "no better" in why


def test_a_count_seen_uncongested_at_a_lower_load_is_no_evidence_against_scaling_up():
    # the mpc-scaled lock-in: 3 replicas were seen free at a low load (served its 1000/s input), then
    # the operator went down to 2 and saturates at 1050/s; one more must still be tried
    scaler = SPLStrategy()
    scaler.step("win", 3, LevelSeen(1000.0, False))
    scaler.step("win", 2, LevelSeen(1050.0, True))
    assert scaler.step("win", 2, LevelSeen(1050.0, True))[0] == 1


def test_an_increase_that_improved_throughput_is_repeated():
    scaler = SPLStrategy()
    scaler.step("win", 4, LevelSeen(1000.0, True))
    scaler.step("win", 5, LevelSeen(1200.0, True))
    assert scaler.step("win", 4, LevelSeen(1000.0, True))[0] == 1  # 1200 * 0.9 > 1000: one more helped


def test_no_decrease_back_to_a_count_that_was_congested_until_the_workload_changes():
    scaler = SPLStrategy()
    assert scaler.step("win", 4, LevelSeen(1000.0, False))[0] == -1  # 3 never tried: try one less
    assert scaler.step("win", 3, LevelSeen(850.0, True))[0] == 1  # congested at 3; 4 served 1000 > 850 / 0.9
    delta, why = scaler.step("win", 4, LevelSeen(1000.0, False))
    assert delta == 0 and "congested" in why
    # the input falls: 4 now serves 700/s, significantly less than the 1000/s first seen there -> forget
    assert scaler.step("win", 4, LevelSeen(700.0, False))[0] == -1


def test_no_decrease_to_a_count_that_served_significantly_less():
    scaler = SPLStrategy()
    scaler.step("win", 3, LevelSeen(800.0, False))
    scaler.step("win", 4, LevelSeen(1000.0, False))  # the first sight of 4
    delta, why = scaler.step("win", 4, LevelSeen(1000.0, False))
    assert delta == 0 and "800" in why


def test_a_changed_congestion_status_forgets_the_history():
    scaler = SPLStrategy()
    scaler.step("win", 4, LevelSeen(1000.0, True))
    scaler.step("win", 5, LevelSeen(1010.0, True))
    # at 5, no longer congested at the same throughput: the workload changed, so 4's record is gone
    assert scaler.step("win", 5, LevelSeen(1010.0, False))[0] == -1
    assert set(scaler._seen["win"]) == {5}


def test_decide_acts_per_operator_and_waits_out_a_restart():
    scaler = SPLStrategy()
    snap = snapshot(PAIR, t=8.0, window_s=4.0)(src=op(2, rin=1000.0, bp=500.0, lag_rate=0.0, input_rate=1000.0),
                                              win=op(3, rin=1000.0))
    d = scaler.decide(snap, NONE)
    assert d is not None and d.parallelism == {"win": 4, "src": 1}  # src: nothing piles up in Kafka
    scaler.on_applied(AppliedAction(t=8.0, before={"win": 3}, after={"win": 4}, downtime_s=6.0))
    later = snapshot(PAIR, t=16.0, window_s=4.0)(src=op(1, rin=1000.0, bp=500.0, lag_rate=0.0, input_rate=1000.0),
                                                 win=op(4, rin=1000.0))
    assert scaler.decide(later, NONE) is None  # its 12-16 s window still covers the downtime (8-14 s)


def test_decide_leaves_an_operator_with_unmeasured_signals_alone():
    snap = snapshot(PAIR, t=4.0)(src=op(2, rin=1000.0, bp=math.nan, lag_rate=None, input_rate=1000.0),
                                 win=op(3, rin=1000.0))
    assert SPLStrategy().decide(snap, NONE) is None


def test_tab7_parameters_are_the_defaults_and_validated():
    cfg = SPLConfig()
    assert (cfg.congestion_threshold, cfg.sensitivity) == (0.1, 0.9)
    assert isinstance(create("spl-strategy"), SPLStrategy)
    with pytest.raises(ValidationError):
        SPLConfig(sensitivity=1.5)
    with pytest.raises(ValidationError):
        SPLConfig(congestion_treshold=0.2)
