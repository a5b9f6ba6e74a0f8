"""Class-data sharing archives: start the stack's JVMs in about half the CPU time.

A Flink task manager loads ~10 k classes on start; on a busy 2-core host that alone took 6-9 CPU
seconds (30 s wall), measured here. A dynamic AppCDS archive (JDK 13+) maps those classes from a file
instead: 3.5-5 CPU seconds, 9-14 s wall for the same task manager. This matters beyond `bench up`:
every scale-out starts task managers, so their start time is part of the measured rescale downtime.

How: the first process of a kind (key = java + role + classpath + flags) runs with
`-XX:ArchiveClassesAtExit=<part>` and writes the archive when it exits; `promote()` (called after
processes stop) checks a written part with `-Xshare:on` and renames it into place; later processes of
that kind get `-XX:SharedArchiveFile=<archive>`. A missing or stale archive only costs speed: the JVM
falls back to normal class loading (`-Xshare:auto`, the default).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

STALE_MARKER_S = 6 * 3600  # a dump marker whose writer vanished without a trace is dropped after this


@dataclass(frozen=True)
class CdsPlan:
    """Flags to add to one JVM command and, when it dumps, the marker to attach its pid to."""

    flags: list[str]
    marker: Path | None = None


def _alive(pid: int) -> bool:
    """Running (a zombie has finished writing whatever it wrote at exit)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


class ClassDataSharing:
    def __init__(self, cache_dir: Path, enabled: bool = True) -> None:
        self.dir = cache_dir
        self.enabled = enabled

    @staticmethod
    def key(java: Path, role: str, classpath: str, flags: list[str]) -> str:
        text = "\0".join([str(java.resolve()), role, classpath, *sorted(flags)])
        return f"{role}-{hashlib.sha256(text.encode()).hexdigest()[:16]}"

    def plan(self, java: Path, role: str, classpath: str, flags: list[str]) -> CdsPlan:
        """Use the archive if there is one; otherwise let this process dump it (one dumper at a time)."""
        if not self.enabled:
            return CdsPlan([])
        self.dir.mkdir(parents=True, exist_ok=True)
        key = self.key(java, role, classpath, flags)
        archive = self.dir / f"{key}.jsa"
        if archive.exists():
            return CdsPlan([f"-XX:SharedArchiveFile={archive}"])
        marker = self.dir / f"{key}.dumping"
        if marker.exists() and not self._marker_dead(marker):
            return CdsPlan([])
        part = self.dir / f"{key}.{uuid.uuid4().hex[:8]}.part"
        check = [str(java), "-Xshare:on", f"-XX:SharedArchiveFile={part}", *flags, "-cp", classpath, "-version"]
        marker.write_text(json.dumps({"part": str(part), "archive": str(archive), "check": check,
                                      "pid": None, "since": time.time()}))
        return CdsPlan([f"-XX:ArchiveClassesAtExit={part}"], marker)

    @staticmethod
    def attach(plan: CdsPlan, pid: int) -> None:
        """Record which process dumps, so a dumper that died without writing frees the slot."""
        if plan.marker is None:
            return
        with contextlib.suppress(OSError, ValueError):
            data = json.loads(plan.marker.read_text())
            data["pid"] = pid
            plan.marker.write_text(json.dumps(data))

    def _marker_dead(self, marker: Path) -> bool:
        try:
            data = json.loads(marker.read_text())
        except (OSError, ValueError):
            return True
        if Path(data["part"]).exists():
            return False  # written, waiting for promote()
        pid = data.get("pid")
        if pid is not None:
            return not _alive(int(pid))
        return time.time() - float(data.get("since", 0)) > STALE_MARKER_S

    def dumping_pids(self) -> set[int]:
        """Processes that will write an archive when they exit (stop them gently, give them time)."""
        pids: set[int] = set()
        for marker in self.dir.glob("*.dumping") if self.dir.exists() else []:
            with contextlib.suppress(OSError, ValueError, TypeError):
                pid = json.loads(marker.read_text()).get("pid")
                if pid is not None:
                    pids.add(int(pid))
        return pids

    def promote(self) -> list[Path]:
        """Check every written part with -Xshare:on and move the good ones into place."""
        done: list[Path] = []
        if not self.dir.exists():
            return done
        for marker in self.dir.glob("*.dumping"):
            try:
                data = json.loads(marker.read_text())
            except (OSError, ValueError):
                marker.unlink(missing_ok=True)
                continue
            part, archive = Path(data["part"]), Path(data["archive"])
            pid = data.get("pid")
            if pid is not None and _alive(int(pid)):
                continue  # still running (or still writing the archive)
            if part.exists():
                ok = subprocess.run(data["check"], capture_output=True, check=False, timeout=120).returncode == 0
                if ok:
                    os.replace(part, archive)
                    done.append(archive)
                else:
                    part.unlink(missing_ok=True)
                marker.unlink(missing_ok=True)
            elif self._marker_dead(marker):
                marker.unlink(missing_ok=True)
        return done
