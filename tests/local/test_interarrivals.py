"""Bursty arrivals for the real generator and the inter-arrival sample read back from its timestamps."""

from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest

from harness.backends.local.interarrivals import TimestampTail, thinned_gaps, timestamps_every
from workloads.arrivals import ArrivalConfig, coefficient_of_variation, fine_schedule
from workloads.generator import Generator, GeneratorError

BURSTY = ArrivalConfig(kind="map", burst_factor=4.0, mean_burst_s=5.0, mean_quiet_s=20.0)


def test_fine_schedule_keeps_the_mean_and_is_seeded() -> None:
    per_second = np.full(3000, 1000.0)
    a = fine_schedule(per_second, BURSTY, np.random.default_rng(3))
    b = fine_schedule(per_second, BURSTY, np.random.default_rng(3))
    assert len(a) == 30000  # 100 ms steps
    np.testing.assert_array_equal(a, b)
    assert a.mean() == pytest.approx(1000.0, rel=0.1)
    # per-step rates are whole records per 100 ms
    np.testing.assert_allclose(a * 0.1, np.round(a * 0.1))


def test_bursty_schedule_is_burstier_than_poisson_and_deterministic_is_exact() -> None:
    per_second = np.full(3000, 1000.0)
    mmpp = fine_schedule(per_second, BURSTY, np.random.default_rng(1))
    poisson = fine_schedule(per_second, ArrivalConfig(kind="poisson"), np.random.default_rng(1))
    det = fine_schedule(per_second, ArrivalConfig(kind="deterministic"), np.random.default_rng(1))
    np.testing.assert_allclose(det, 1000.0)
    # Poisson counts of mean 100 per step: CV 0.1; MMPP adds the burst/quiet spread
    assert coefficient_of_variation(poisson) == pytest.approx(0.1, rel=0.15)
    assert coefficient_of_variation(mmpp) > 3 * coefficient_of_variation(poisson)
    # rates of 1 s averages stay bursty (sojourns last seconds), Poisson's do not
    sec = mmpp.reshape(-1, 10).mean(axis=1)
    assert coefficient_of_variation(sec) > 0.5


def test_generator_writes_fine_schedule_with_step(tmp_path: Path) -> None:
    # a free metrics port: a real generator running on the default port must not answer for `false`
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    g = Generator(jar=Path("x.jar"), bootstrap="b:1", topics=["bids"], workdir=tmp_path, seed=5, java="false",
                  metrics_port=port)
    with pytest.raises(GeneratorError):  # `false` exits at once; the schedule is written first
        g.start(rates=[100.0, 200.0], wait_s=5, arrivals=BURSTY)
    lines = g.schedule_path.read_text().split()
    assert len(lines) == 20 and g.schedule_step_s == 0.1
    assert "--step-ms" in g.command() and g.command()[g.command().index("--step-ms") + 1] == "100"
    with pytest.raises(GeneratorError):
        g.start(rates=[100.0, 200.0], wait_s=5)
    assert g.schedule_path.read_text().split() == ["100.000", "200.000"] and g.schedule_step_s == 1.0


def test_timestamps_every_targets_twice_the_sample() -> None:
    assert timestamps_every(1000, 60, 5000) == 6
    assert timestamps_every(10, 60, 5000) == 1
    assert timestamps_every(0, 60, 5000) == 1


def test_thinned_gaps_bounded_and_sorted() -> None:
    rng = np.random.default_rng(0)
    t = rng.uniform(0, 60, 20000)
    gaps = thinned_gaps(t, 5000, rng)
    assert len(gaps) == 5000 and (gaps >= 0).all()
    assert gaps.sum() == pytest.approx(60, rel=0.01)  # still spans the window: gaps in real time
    assert len(thinned_gaps(t[:10], 5000, rng)) == 9


def _write(path: Path, rows: list[tuple[int, str, int]], header: bool = False, partial: str = "") -> None:
    with path.open("a") as f:
        if header:
            f.write("t_us,topic,producer\n")
        for t, topic, p in rows:
            f.write(f"{t},{topic},{p}\n")
        f.write(partial)


def test_tail_reads_incrementally_filters_topics_and_windows(tmp_path: Path) -> None:
    p = tmp_path / "ts.csv"
    tail = TimestampTail(p, ["bids"], window_s=10, size=100, seed=1)
    assert tail.sample() is None  # no file yet
    _write(p, [(1_000_000 * s, "bids", s % 2) for s in range(1, 6)] + [(2_500_000, "persons", 0)], header=True,
           partial="77")
    gaps = tail.sample()
    # producer 0's newest sample is at 4 s: later samples of producer 1 may still miss their peers
    assert gaps is not None and len(gaps) == 3
    np.testing.assert_allclose(gaps, 1.0)
    offset = tail._offset
    assert tail.poll() == 0 and tail._offset == offset  # nothing new; the partial line waits
    _write(p, [], partial="00000,bids,0\n")  # completes "7700000,bids,0"
    _write(p, [(30_000_000, "bids", 0), (31_000_000, "bids", 1), (32_000_000, "bids", 0)])
    gaps = tail.sample()
    # window = the last 10 s before the slowest producer's newest sample (31 s): 21..31 s -> 30, 31
    np.testing.assert_allclose(gaps, [1.0])
    assert tail.lines_read == 10


def test_tail_sample_of_a_bursty_stream_is_overdispersed(tmp_path: Path) -> None:
    """Send times paced evenly per 100 ms step of an MMPP schedule, thinned: CV well above 1."""
    rng = np.random.default_rng(2)
    rates = fine_schedule(np.full(60, 2000.0), BURSTY, rng)
    times = np.concatenate([k * 0.1 + np.arange(int(r * 0.1)) / max(r, 1) for k, r in enumerate(rates)])
    keep = times[rng.random(len(times)) < 1 / 6]
    p = tmp_path / "ts.csv"
    _write(p, [(int(t * 1e6) + 1_000_000, "bids", 0) for t in keep], header=True)
    gaps = TimestampTail(p, ["bids"], window_s=60, size=5000, seed=0).sample()
    assert gaps is not None and len(gaps) <= 5000
    if rates.max() > 1.5 * rates.min():  # the draw had a burst in the minute
        assert coefficient_of_variation(gaps) > 1.05
