"""q1 end to end on an in-process Flink mini cluster (`QueryJob --local`) reading the generator's bids
from a real Kafka broker: the job's consumer group commits offsets (on checkpoints) up to everything the
generator produced, i.e. every record went through source -> map -> sink."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

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


def test_q1_consumes_everything_produced(kafka: str, jar: Path, tmp_path: Path) -> None:
    lib = flink_lib()
    if lib is None:
        pytest.skip("pyflink (apache-flink) with its lib/ is not installed")
    group = f"test-q1-{uuid.uuid4().hex[:8]}"
    gen = Generator(jar=jar, bootstrap=kafka, topics=["bids"], workdir=tmp_path / "gen",
                    metrics_port=9405 + PORT_OFFSET)
    with gen:
        gen.start(rates=[500.0] * 5)
        gen.wait_done(timeout_s=60)
        gen.stop()
    end = end_offsets(kafka, "bids")
    target = sum(end.values())
    log = (tmp_path / "q1.log").open("w")
    job = subprocess.Popen(
        ["java", "-Xmx768m", "-cp", f"{jar}:{lib}/*", "bench.nexmark.QueryJob", "--query", "q1",
         "--bootstrap", kafka, "--group-id", group, "--from-earliest", "--local",
         "--checkpoint-interval-ms", "1000", "--parallelism", "bids_source=2,map=1,sink=1"],
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        done = 0
        while time.monotonic() < deadline and job.poll() is None:
            done = committed(kafka, group, "bids", list(end))
            if done >= target:
                break
            time.sleep(2)
        assert job.poll() is None, (tmp_path / "q1.log").read_text()[-3000:]
        assert done >= target, f"job committed {done} of {target} offsets"
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGTERM)
            try:
                job.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                job.wait(5)
        log.close()
