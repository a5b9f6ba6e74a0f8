"""What the local stack keeps on disk, checked without services (issue 13: runs leave no trace).

The real-stack counterpart, several runs back to back under a size bound, is test_disk.py."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from harness.backends.flink_rest import UploadedJar
from harness.backends.local.config import LocalConfig
from harness.backends.local.flink import FlinkCluster
from harness.backends.local.kafka import TopicRetention
from harness.backends.local.stack import LocalStack, directory_bytes
from harness.backends.local.supervisor import Supervisor
from tests.local.offline_flink import offline_flink

MB = 1 << 20


def test_topic_retention_splits_the_budget_and_follows_the_run() -> None:
    cfg = LocalConfig(kafka_retention_mb=1024, kafka_segment_mb=16)
    r = TopicRetention.for_run(cfg, partitions=24, run_s=840)
    assert r.bytes_per_partition == (1024 * MB) // 24  # ~42.7 MB: 24 partitions hold the topic's 1 GB
    assert r.segment_bytes == 16 * MB  # small enough that retention can delete closed segments
    assert r.ms == 1000 * (2 * 840 + 600)
    small = TopicRetention.for_run(LocalConfig(kafka_retention_mb=16, kafka_segment_mb=16), 24, 60)
    assert small.bytes_per_partition == MB and small.segment_bytes == MB  # floors: one MB each
    assert set(r.configs()) == {"retention.bytes", "segment.bytes", "retention.ms", "segment.ms"}


def test_kafka_rolls_its_log_and_deletes_topic_files_promptly(tmp_path: Path) -> None:
    from harness.backends.local.kafka import LOG4J2, KafkaService

    cfg = LocalConfig(workdir=tmp_path, kafka_retention_mb=64, kafka_segment_mb=8)
    props = dict(line.split("=", 1) for line in KafkaService(cfg, Supervisor(tmp_path)).server_properties()
                 .splitlines() if "=" in line and not line.startswith("#"))
    assert props["log.retention.bytes"] == str(64 * MB) and props["log.segment.bytes"] == str(8 * MB)
    assert props["file.delete.delay.ms"] == "1000"
    assert "RollingFile" in LOG4J2 and "strategy.max = 2" in LOG4J2


def test_every_flink_process_gets_its_own_scratch_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = LocalConfig(workdir=tmp_path, class_data_sharing=False)
    flink, inst = offline_flink(cfg, tmp_path, monkeypatch)
    cmd, _ = flink.java_command(inst, "taskmanager", tmp_path / "tm.log", [],
                                flink.scratch_dir("tm-7"))
    scratch = tmp_path / "flink" / "tmp" / "tm-7"
    assert f"-Djava.io.tmpdir={scratch}" in cmd  # the RPC jar Flink extracts lands there too
    assert cmd[cmd.index(f"io.tmp.dirs={scratch}") - 1] == "-D"  # working dir, blobs, spill files
    assert scratch.is_dir()
    (scratch / "tm_tm-7" / "blobStorage").mkdir(parents=True)
    (scratch / "flink-rpc-akka1.jar").write_bytes(b"x" * 100)
    flink.stop_taskmanager("tm-7")  # no such process: stopping is idempotent, the scratch goes
    assert not scratch.exists()


def test_prune_leaves_no_scratch_checkpoint_or_old_log(tmp_path: Path) -> None:
    cfg = LocalConfig(workdir=tmp_path)
    flink = FlinkCluster(cfg, Supervisor(tmp_path))
    for sub in ("tmp/tm-1/x", "tmp/jobmanager/y", "checkpoints/j1/chk-3", "savepoints/sp-1"):
        (flink.dir / sub).mkdir(parents=True)
    (flink.dir / "tmp" / "flink-rpc-akka2.jar").write_text("x")
    for i in range(1, 26):
        (flink.dir / "log" / f"tm-{i}").mkdir(parents=True)
    (flink.dir / "log" / "jobmanager").mkdir()
    flink.prune(keep_logs=4)
    assert list((flink.dir / "tmp").iterdir()) == []
    assert list((flink.dir / "checkpoints").iterdir()) == [] and list((flink.dir / "savepoints").iterdir()) == []
    logs = sorted(d.name for d in (flink.dir / "log").iterdir())
    assert logs == ["jobmanager", "tm-22", "tm-23", "tm-24", "tm-25"]


@dataclass
class FakeJars:
    """The slice of FlinkRest the jar upload uses: an upload directory."""

    files: list[UploadedJar] = field(default_factory=list)
    uploads: int = 0
    deleted: list[str] = field(default_factory=list)

    def jars(self) -> list[UploadedJar]:
        return sorted(self.files, key=lambda j: -j.uploaded_ms)

    def upload_jar(self, jar: Path, name: str | None = None) -> str:
        self.uploads += 1
        jid = f"{self.uploads:04d}_{name}"
        self.files.append(UploadedJar(jid, name or jar.name, self.uploads))
        return jid

    def delete_jar(self, jar_id: str) -> None:
        self.deleted.append(jar_id)
        self.files = [f for f in self.files if f.id != jar_id]


def test_one_upload_per_job_jar_content(tmp_path: Path) -> None:
    stack = LocalStack(LocalConfig(workdir=tmp_path))
    rest = FakeJars(files=[UploadedJar("0000_nexmark-queries.jar", "nexmark-queries.jar", 0)])  # an old unnamed one
    stack.rest = rest  # type: ignore[assignment]
    jar = tmp_path / "nexmark-queries.jar"
    jar.write_bytes(b"build 1")
    first = stack.uploaded_jar(jar)
    assert stack.uploaded_jar(jar) == first and stack.uploaded_jar(jar) == first  # resubmissions reuse it
    assert rest.uploads == 1 and rest.deleted == ["0000_nexmark-queries.jar"]
    jar.write_bytes(b"build 2")  # a rebuilt jar replaces the old upload
    second = stack.uploaded_jar(jar)
    assert second != first and rest.uploads == 2
    assert [f.id for f in rest.files] == [second]


def test_purge_removes_the_work_directory_but_not_installs_inside_it(tmp_path: Path) -> None:
    work = tmp_path / "stack"
    (work / "kafka" / "data").mkdir(parents=True)
    (work / "install" / "kafka").mkdir(parents=True)
    (work / "install" / "kafka" / "lib.jar").write_text("jar")
    stack = LocalStack(LocalConfig(workdir=work, install_dir=work / "install"))
    stack.down(purge=True)
    assert sorted(p.name for p in work.iterdir()) == ["install"]
    assert (work / "install" / "kafka" / "lib.jar").exists()
    LocalStack(LocalConfig(workdir=work, install_dir=tmp_path / "cache")).down(purge=True)
    assert not work.exists()


def test_directory_bytes_counts_blocks_and_hard_links_once(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(os.urandom(3 * MB))
    os.link(tmp_path / "a" / "f", tmp_path / "g")
    size = directory_bytes(tmp_path)
    assert 3 * MB <= size < 3 * MB + 64 * 1024
    assert directory_bytes(tmp_path / "missing") == 0


def test_deleted_topics_leave_no_partition_directory(tmp_path: Path) -> None:
    from harness.backends.local.kafka import KafkaService

    kafka = KafkaService(LocalConfig(workdir=tmp_path), Supervisor(tmp_path))
    data = kafka.dir / "data"
    for name in ("bids-0", "bids-1", "persons-2.6f1c0d3e-delete", "__consumer_offsets-0", "__cluster_metadata-0",
                 "auctions-0"):
        (data / name).mkdir(parents=True)
    (data / "meta.properties").write_text("cluster.id=x")
    kafka.remove_deleted_logs(["bids"])  # `bids` was deleted, the broker stopped before it removed the files
    assert sorted(p.name for p in data.iterdir()) == ["__cluster_metadata-0", "__consumer_offsets-0", "auctions-0",
                                                      "meta.properties"]
