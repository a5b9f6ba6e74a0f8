"""Class-data-sharing archives: one dumper per kind, checked before use, never blocking a start."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.backends.local.cds import ClassDataSharing


def _plan(cds: ClassDataSharing, java: Path):  # noqa: ANN202
    return cds.plan(java, "flink-taskmanager", "/a.jar:/b.jar", ["-XX:+UseG1GC"])


def test_first_process_dumps_then_a_checked_archive_is_shared(tmp_path: Path) -> None:
    cds = ClassDataSharing(tmp_path)
    java = Path("/bin/true")  # the -Xshare:on check "passes"
    first = _plan(cds, java)
    assert first.flags[0].startswith("-XX:ArchiveClassesAtExit=") and first.marker is not None
    part = Path(first.flags[0].split("=", 1)[1])
    proc = subprocess.Popen(["sleep", "30"])
    try:
        cds.attach(first, proc.pid)
        assert _plan(cds, java).flags == []  # one dumper at a time; others start plain
        assert cds.dumping_pids() == {proc.pid}
        part.write_bytes(b"archive")
        assert cds.promote() == []  # the writer still runs
    finally:
        proc.kill()
        proc.wait()
    archives = cds.promote()
    assert len(archives) == 1 and archives[0].read_bytes() == b"archive"
    assert _plan(cds, java).flags == [f"-XX:SharedArchiveFile={archives[0]}"]
    other = cds.plan(java, "flink-jobmanager", "/a.jar:/b.jar", ["-XX:+UseG1GC"])
    assert other.flags[0].startswith("-XX:ArchiveClassesAtExit=")  # another kind has its own archive


def test_a_part_that_fails_the_check_is_dropped_and_dumping_retried(tmp_path: Path) -> None:
    cds = ClassDataSharing(tmp_path)
    java = Path("/bin/false")
    first = _plan(cds, java)
    part = Path(first.flags[0].split("=", 1)[1])
    part.write_bytes(b"truncated")
    assert cds.promote() == []
    assert not part.exists() and not list(tmp_path.glob("*.jsa"))
    assert _plan(cds, java).flags[0].startswith("-XX:ArchiveClassesAtExit=")


def test_a_dumper_that_died_without_writing_frees_the_slot(tmp_path: Path) -> None:
    cds = ClassDataSharing(tmp_path)
    first = _plan(cds, Path("/bin/true"))
    proc = subprocess.Popen(["true"])
    proc.wait()
    cds.attach(first, proc.pid)
    assert _plan(cds, Path("/bin/true")).flags[0].startswith("-XX:ArchiveClassesAtExit=")


def test_disabled_adds_nothing(tmp_path: Path) -> None:
    assert _plan(ClassDataSharing(tmp_path, enabled=False), Path("/bin/true")).flags == []
