"""Queries end to end on an in-process Flink mini cluster (`QueryJob --local`) reading the generator's
records from a real Kafka broker: the job's consumer group commits offsets (on checkpoints, which only
complete while no operator fails) up to everything the generator produced in every topic it reads."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness.backends.local.jobjar import TOPICS
from tests.queries.conftest import PORT_OFFSET, end_offsets
from tests.queries.test_build import flink_lib
from workloads.generator import Generator

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def committed(bootstrap: str, group: str, topic: str, partitions: list[int]) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = c.committed([TopicPartition(topic, p) for p in partitions], timeout=10)
        return sum(tp.offset for tp in tps if tp.offset >= 0)
    finally:
        c.close()


# small windows keep q5's state and the test short; the first source runs with parallelism 2
QUERY_ARGS = {
    "q1": ["--parallelism", "bids_source=2"],
    "q3": ["--parallelism", "auction_source=2"],
    "q5": ["--window-size-s", "10", "--window-slide-s", "2", "--parallelism", "bids_source=2"],
    "q8": ["--tumble-s", "2", "--parallelism", "person_source=2"],
    "q11": ["--session-gap-s", "2", "--parallelism", "bids_source=2"],
}


def start_group_at_end(bootstrap: str, group: str, topics: tuple[str, ...]) -> None:
    """Commit the topics' current end offsets for `group`, so the job (which starts from its group's
    committed offsets) reads only what this test produces, however much earlier runs left."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, off) for t in topics for p, off in end_offsets(bootstrap, t).items()],
                 asynchronous=False)
    finally:
        c.close()


@pytest.mark.parametrize("query", sorted(QUERY_ARGS))
def test_query_consumes_everything_produced(query: str, kafka: str, jar: Path, tmp_path: Path) -> None:
    lib = flink_lib()
    if lib is None:
        pytest.skip("pyflink (apache-flink) with its lib/ is not installed")
    group = f"test-{query}-{uuid.uuid4().hex[:8]}"
    topics = TOPICS[query]
    start_group_at_end(kafka, group, topics)
    gen = Generator(jar=jar, bootstrap=kafka, topics=topics, workdir=tmp_path / "gen",
                    metrics_port=9405 + PORT_OFFSET)
    with gen:
        gen.start(rates=[500.0] * 5)
        gen.wait_done(timeout_s=60)
        gen.stop()
    ends = {t: end_offsets(kafka, t) for t in topics}
    log_path = tmp_path / f"{query}.log"
    log = log_path.open("w")
    job = subprocess.Popen(
        # the mini cluster's scratch (and the 21 MB RPC jar Flink extracts) in the test's own directory, not /tmp
        ["java", "-Xmx768m", f"-Djava.io.tmpdir={tmp_path}", "-cp", f"{jar}:{lib}/*", "bench.nexmark.QueryJob",
         "--query", query,
         "--bootstrap", kafka, "--group-id", group, "--local",
         "--checkpoint-interval-ms", "1000", *QUERY_ARGS[query]],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 360  # generous: the 2 cores are shared
        done: dict[str, int] = {}
        while time.monotonic() < deadline and job.poll() is None:
            done = {t: committed(kafka, group, t, list(end)) for t, end in ends.items()}
            if all(done[t] >= sum(ends[t].values()) for t in topics):
                break
            time.sleep(2)
        assert job.poll() is None, log_path.read_text()[-3000:]
        for t in topics:
            assert done.get(t, 0) >= sum(ends[t].values()), (
                f"{query} committed {done.get(t, 0)} of {sum(ends[t].values())} offsets of {t}\n"
                + log_path.read_text()[-3000:]
            )
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(5)
        log.close()
