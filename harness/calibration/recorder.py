"""Record the raw truth and Flink's readings once a second while `bench calibrate` runs a phase.

Per task manager, straight from its probe reporter (`harness.backends.local.flink.PROBE_METRICS`: the same
values Prometheus scrapes from the full one, without Prometheus' own sampling, at a fraction of a full
scrape's cost to the task manager's quota): busy / idle / backpressured ms per second, isBackPressured,
the exact record counters, Status.JVM.CPU.Load and .Time, the sources' pending records and
event-time lag; and from the operating system the task manager process' CPU time (/proc) and its
cgroup's throttling. Per host: the 1-minute load average and the fraction of all CPUs busy
(/proc/stat), so every measurement carries the machine's state with it; and the load generator's
count of records Kafka acknowledged (`produced`, per generator instance `gen`: a phase restarts it),
so what was offered is measured, not assumed to be what was asked for.

The reporter's labels say which subtask a task manager runs (one slot each), so rows are keyed by
operator and subtask directly. Rows are plain dicts; `frame()` turns them into a DataFrame.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import requests

from harness.backends.flink_rest import vertex_operators
from workloads.generator import parse_prometheus

log = logging.getLogger(__name__)

T = "flink_taskmanager_job_task_"
TASK_GAUGES = {
    T + "busyTimeMsPerSecond": "busy_ms",
    T + "idleTimeMsPerSecond": "idle_ms",
    T + "backPressuredTimeMsPerSecond": "bp_ms",
    T + "isBackPressured": "is_bp",
    T + "numRecordsIn": "rec_in",
    T + "numRecordsOut": "rec_out",
    T + "operator_pendingRecords": "pending",
    T + "operator_deserializer_recordLag": "reclag_ms",
    T + "operator_KafkaSourceReader_deserializer_recordLag": "reclag_ms",
    T + "Shuffle_Netty_Input_Buffers_inPoolUsage": "in_pool",
}
TM_GAUGES = {
    "flink_taskmanager_Status_JVM_CPU_Load": "jvm_load",
    "flink_taskmanager_Status_JVM_CPU_Time": "jvm_time_ns",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process (and its reaped children are not counted)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def host_cpu_times() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs from /proc/stat."""
    with open("/proc/stat") as fh:
        parts = [float(x) for x in fh.readline().split()[1:]]
    idle = parts[3] + (parts[4] if len(parts) > 4 else 0.0)
    total = sum(parts[:8])
    return total - idle, total


def cgroup_throttled(path: Path) -> tuple[float, float] | None:
    """(periods, throttled periods) of a cgroup v1/v2 cpu.stat, or None."""
    try:
        text = (path / "cpu.stat").read_text()
    except OSError:
        return None
    stat = dict(line.split() for line in text.splitlines() if len(line.split()) == 2)
    try:
        return float(stat["nr_periods"]), float(stat["nr_throttled"])
    except KeyError:
        return None


def label_operator(task_name: str) -> str | None:
    """The operator of a reporter's `task_name` label. Flink's Prometheus reporter turns the characters
    of a label value it does not allow into '_' ("Source: bids_source" -> "Source:_bids_source")."""
    ops = vertex_operators(task_name.replace("_->_", " -> "))
    return ops[0].lstrip("_") if ops else None


def parse_reporter(text: str, job_id: str | None) -> dict[str, Any]:
    """One task manager's endpoint -> {operator, subtask, task readings, TM readings} (one slot)."""
    out: dict[str, Any] = {}
    for (name, labels), value in parse_prometheus(text).items():
        if name in TM_GAUGES:
            out[TM_GAUGES[name]] = value
            continue
        key = TASK_GAUGES.get(name)
        if key is None:
            continue
        lab = dict(labels)
        if job_id and lab.get("job_id") not in (None, job_id):
            continue
        op = label_operator(lab.get("task_name", ""))
        if op:
            out["operator"] = op
            out["subtask"] = int(lab.get("subtask_index", "0"))
        if key in ("rec_in", "rec_out") and name.startswith(T + "operator_"):
            continue
        out[key] = value
    return out


class Recorder:
    """A background thread sampling every task manager and the host once a second."""

    def __init__(self, stack: Any, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic,
                 generator: Callable[[], Any] | None = None) -> None:
        self.stack = stack
        self.generator = generator  # the running load generator (replaced per phase), or None
        self.interval_s = interval_s
        self.clock = clock
        self.t0 = clock()
        self.phase = "setup"
        self.job_id: str | None = None
        self.rows: list[dict[str, Any]] = []
        self.host: list[dict[str, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._session = requests.Session()
        self.reads = {"probe": 0, "full": 0}  # task-manager scrapes by the reporter that answered
        self._warned: set[str] = set()  # task managers whose probe did not answer (warned once each)

    def now(self) -> float:
        return self.clock() - self.t0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="calibration-recorder", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _run(self) -> None:
        last_host = host_cpu_times()
        while not self._stop.is_set():
            started = self.clock()
            try:
                self.sample()
                busy, total = host_cpu_times()
                db, dtot = busy - last_host[0], total - last_host[1]
                last_host = (busy, total)
                self.host.append({"t": self.now(), "phase": self.phase, "load1": os.getloadavg()[0],
                                  "host_busy": db / dtot if dtot > 0 else float("nan"), **self._offered()})
            except Exception as exc:  # noqa: BLE001 - a missed sample is a gap, never a crash of the calibration
                log.info("calibration sample missed at t=%.1f s: %s", self.now(), exc)
            self._stop.wait(max(0.0, self.interval_s - (self.clock() - started)))

    def _offered(self) -> dict[str, Any]:
        """The generator's acknowledged records so far and which instance counted them (empty: unknown)."""
        gen = self.generator() if self.generator is not None else None
        if gen is None or gen.pid is None:
            return {}
        try:
            return {"produced": float(gen.metrics().total), "gen": int(gen.pid)}
        except Exception as exc:  # noqa: BLE001 - the endpoint between two phases: a gap, not a zero
            log.debug("generator count missed: %s", exc)
            return {}

    def sample(self) -> None:
        stack = self.stack
        t = self.now()
        for tm in stack.taskmanager_ids():
            pid = stack.taskmanager_pid(tm)
            text = self._scrape(tm) if pid is not None else None
            if text is None:
                continue
            row: dict[str, Any] = {"t": t, "phase": self.phase, "tm": tm, **parse_reporter(text, self.job_id)}
            row["proc_cpu_s"] = proc_cpu_seconds(pid)
            quota = stack.taskmanager_cpu(tm)
            row["quota"] = quota
            if stack.cgroups.base is not None:
                thr = cgroup_throttled(stack.cgroups.group(tm).path)
                if thr is not None:
                    row["periods"], row["throttled"] = thr
            self.rows.append(row)

    def _scrape(self, tm: str) -> str | None:
        """A task manager's metrics: from its probe reporter where it was started with one (a tenth of the full
        reporter's bytes, read each second), else, or where the probe does not answer with Flink's metrics, from
        the full one (warned once per task manager); None when neither does."""
        flink = self.stack.flink
        probe = flink.probe_port_of(tm)
        for kind, port in (("probe", probe), ("full", flink.reporter_port_of(tm))):
            if port is None:
                continue
            try:
                resp = self._session.get(f"http://127.0.0.1:{port}/metrics", timeout=2)
                resp.raise_for_status()
            except requests.RequestException:
                resp = None
            if resp is not None and "flink_taskmanager_" in resp.text:
                self.reads[kind] += 1
                return resp.text
            if kind == "probe" and tm not in self._warned:
                self._warned.add(tm)
                log.warning("%s: no probe reporter answered on port %d; reading its full reporter", tm, port)
        return None

    @property
    def probe_share(self) -> float:
        """The fraction of the task-manager scrapes the probe reporter answered (NaN before any)."""
        n = self.reads["probe"] + self.reads["full"]
        return self.reads["probe"] / n if n else math.nan

    def frame(self) -> pd.DataFrame:
        # a copy first: the sampling thread appends while pandas reads the list (a row appended midway
        # made columns of different lengths: "Length of values (299) does not match length of index (300)")
        return pd.DataFrame(list(self.rows))

    def host_frame(self) -> pd.DataFrame:
        return pd.DataFrame(list(self.host))
