"""The Java generator against a real Kafka broker (the local stack's Kafka service, ports offset by
1100): records land in exactly the query's topics, in Nexmark proportions, parseable, with the Kafka
timestamp equal to the event time, and produced + skipped equals the schedule's total."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from workloads.generator import FIELDS, Generator, expected_shares

pytestmark = pytest.mark.integration

PORT_OFFSET = 1100
WORKDIR = Path(tempfile.gettempdir()) / "bench-tests-queries-kafka"
PARTITIONS = 4
RATE = 2000.0
SECONDS = 4


@pytest.fixture(scope="module")
def kafka() -> Iterator[str]:
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.errors import StackError
    from harness.backends.local.stack import LocalStack
    from harness.backends.local.supervisor import port_open

    stack = LocalStack(LocalConfig(workdir=WORKDIR, port_offset=PORT_OFFSET))
    if not stack.sup.alive("kafka") and port_open(stack.ports.kafka):
        pytest.skip(f"port {stack.ports.kafka} is taken by another process")
    try:
        inst = stack.ensure_installed()
    except StackError as exc:
        pytest.skip(f"local stack cannot install Kafka here: {exc}")
    stack.kafka.start(inst)
    try:
        deadline = time.monotonic() + 180
        while not stack.kafka.healthy():
            if time.monotonic() > deadline:
                pytest.fail(f"Kafka not healthy after 180 s; see {stack.kafka.log_file()}")
            time.sleep(0.5)
        stack.ensure_topics(["bids", "persons", "auctions"], PARTITIONS)
        for topic in ("bids", "persons", "auctions"):
            wait_for_leaders(stack.kafka_bootstrap, topic)
        yield stack.kafka_bootstrap
    finally:
        stack.kafka.stop()


@pytest.fixture(scope="module")
def jar() -> Path:
    from harness.backends.local.jobjar import ensure_jar

    return ensure_jar()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tests-offsets", "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts}
    finally:
        c.close()


def wait_for_leaders(bootstrap: str, topic: str, timeout_s: float = 90.0) -> None:
    """New topics answer offset queries only once every partition has a leader."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            end_offsets(bootstrap, topic)
            return
        except KafkaException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def consume(bootstrap: str, topic: str, start: dict[int, int]) -> list[tuple[int, str]]:
    """(Kafka timestamp ms, value) of every record after `start`, up to the current end offsets."""
    from confluent_kafka import Consumer, TopicPartition

    end = end_offsets(bootstrap, topic)
    want = sum(end[p] - start.get(p, 0) for p in end)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-tests-read", "enable.auto.commit": False})
    out: list[tuple[int, str]] = []
    try:
        c.assign([TopicPartition(topic, p, start.get(p, 0)) for p in end])
        deadline = time.monotonic() + 60
        while len(out) < want and time.monotonic() < deadline:
            for m in c.consume(num_messages=10_000, timeout=1.0):
                if m.error() is None:
                    out.append((m.timestamp()[1], m.value().decode()))
    finally:
        c.close()
    return out


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
