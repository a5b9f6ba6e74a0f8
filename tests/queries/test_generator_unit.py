"""workloads.generator: schedule file, metrics parsing, proportions (no Java, no Kafka)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from workloads.generator import (
    Generator,
    GeneratorMetrics,
    expected_shares,
    parse_prometheus,
    read_timestamps,
    schedule_text,
)
from workloads.patterns import PatternConfig, build_pattern

METRICS = """\
# HELP generator_records_produced_total Records acknowledged by Kafka, per topic.
# TYPE generator_records_produced_total counter
generator_records_produced_total{topic="persons"} 20
generator_records_produced_total{topic="auctions"} 60
generator_records_sent_total{topic="persons"} 21
generator_send_errors_total 2
generator_records_skipped_total 7
generator_target_rate 1234.500
generator_schedule_position_seconds 12
generator_done 0
"""


def test_schedule_has_one_line_per_second_of_the_pattern() -> None:
    pat = build_pattern(PatternConfig.model_validate({"name": "cosine", "scale": 0.001, "time_scale": 60}), seed=3)
    text = schedule_text(pat.per_second())
    values = np.array([float(x) for x in text.splitlines()])
    assert len(values) == int(np.ceil(pat.duration_s))
    np.testing.assert_allclose(values, pat.per_second(), atol=1e-3)


@pytest.mark.parametrize("bad", [[1.0, -1.0], [float("nan")], [float("inf")]])
def test_schedule_rejects_invalid_rates(bad: list[float]) -> None:
    with pytest.raises(ValueError):
        schedule_text(bad)


def test_metrics_text_is_parsed() -> None:
    m = GeneratorMetrics.from_text(METRICS)
    assert m.produced == {"persons": 20, "auctions": 60}
    assert m.total == 80
    assert (m.errors, m.skipped, m.target_rate, m.position_s, m.done) == (2, 7, 1234.5, 12.0, False)
    samples = parse_prometheus(METRICS)
    assert samples[("generator_records_sent_total", (("topic", "persons"),))] == 21


def test_summary_is_parsed() -> None:
    m = GeneratorMetrics.from_summary({"produced": {"bids": 5}, "errors": 0, "skipped": 1, "elapsed_s": 3.5})
    assert m.produced == {"bids": 5} and m.done and m.skipped == 1


def test_expected_shares_follow_nexmark_proportions() -> None:
    assert expected_shares(["persons", "auctions"]) == pytest.approx({"persons": 0.25, "auctions": 0.75})
    assert expected_shares(["bids"]) == {"bids": 1.0}
    assert sum(expected_shares(["bids", "persons", "auctions"]).values()) == pytest.approx(1.0)


def test_generator_validates_topics_and_builds_command(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Generator(jar=Path("x.jar"), bootstrap="b:1", topics=["tweets"], workdir=tmp_path)
    g = Generator(jar=Path("x.jar"), bootstrap="b:1", topics=["persons", "auctions"], workdir=tmp_path,
                  producers=3, metrics_port=1234, timestamps_every=5)
    cmd = g.command()
    assert cmd[cmd.index("--topics") + 1] == "persons,auctions"
    assert cmd[cmd.index("--producers") + 1] == "3"
    assert cmd[cmd.index("--schedule") + 1] == str(g.schedule_path)
    assert cmd[cmd.index("--timestamps-every") + 1] == "5"
    with pytest.raises(ValueError, match="exactly one"):
        g.start()


def test_read_timestamps_sorts_per_topic(tmp_path: Path) -> None:
    p = tmp_path / "ts.csv"
    p.write_text("t_us,topic,producer\n3000000,bids,0\n1000000,bids,1\n2000000,persons,0\n")
    ts = read_timestamps(p)
    np.testing.assert_allclose(ts["bids"], [1.0, 3.0])
    np.testing.assert_allclose(ts["persons"], [2.0])
