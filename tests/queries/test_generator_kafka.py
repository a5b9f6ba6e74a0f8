"""The Java generator against a real Kafka broker (the local stack's Kafka service, ports offset by
1100): records land in exactly the query's topics, in Nexmark proportions, parseable, with the Kafka
timestamp equal to the event time, and produced + skipped equals the schedule's total."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.queries.conftest import PORT_OFFSET, consume, end_offsets
from workloads.generator import FIELDS, Generator, expected_shares

pytestmark = pytest.mark.integration

RATE = 2000.0
SECONDS = 4


@pytest.mark.parametrize("topics", [("bids",), ("persons", "auctions")], ids=["bids", "persons+auctions"])
def test_generator_fills_only_its_topics(kafka: str, jar: Path, topics: tuple[str, ...], tmp_path: Path) -> None:
    all_topics = ("bids", "persons", "auctions")
    before = {t: end_offsets(kafka, t) for t in all_topics}
    gen = Generator(jar=jar, bootstrap=kafka, topics=topics, workdir=tmp_path, producers=2,
                    metrics_port=9405 + PORT_OFFSET, timestamps_every=10)
    t_start_ms = time.time() * 1000
    with gen:
        gen.start(rates=[RATE] * SECONDS)
        during = gen.metrics()
        final = gen.wait_done(timeout_s=SECONDS + 60)
        assert final.done
        summary = gen.stop()
    assert summary is not None and summary.errors == 0
    assert during.target_rate in (0.0, RATE)
    scheduled = RATE * SECONDS
    # pacing invariant: every scheduled record was produced or (if the machine was too slow) skipped
    assert abs(summary.total + summary.skipped - scheduled) <= len(topics) * 2
    assert summary.total > 0

    for t in all_topics:
        records = consume(kafka, t, before[t])
        if t not in topics:
            assert records == [], f"{t} should receive nothing"
            continue
        assert len(records) == summary.produced[t]
        if t != "bids":  # persons and auctions get dense, unique ids from the event numbers
            ids = [int(v.split(",", 1)[0]) for _, v in records]
            assert len(set(ids)) == len(ids) and min(ids) >= 1000
        for ts, value in records:
            fields = value.split(",")
            assert len(fields) == len(FIELDS[t]), value
            row = dict(zip(FIELDS[t], fields, strict=True))
            assert int(row["dateTime"]) == ts  # event time is the Kafka timestamp
            assert t_start_ms - 60_000 <= ts <= time.time() * 1000
            if t == "bids":
                assert int(row["auction"]) >= 1000 and int(row["bidder"]) >= 1000 and int(row["price"]) > 0
            elif t == "persons":
                assert row["state"] in {"AZ", "CA", "ID", "OR", "WA", "WY"}
            else:
                assert 10 <= int(row["category"]) < 15 and int(row["seller"]) >= 1000
    if len(topics) > 1:
        shares = expected_shares(topics)
        for t in topics:
            assert summary.produced[t] / summary.total == pytest.approx(shares[t], abs=0.01)
    stamps = (tmp_path / "generator-timestamps.csv").read_text().splitlines()
    assert stamps[0] == "t_us,topic,producer" and len(stamps) > 1
