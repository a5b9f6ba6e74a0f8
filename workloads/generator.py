"""Drive the Java Nexmark load generator (`bench.nexmark.Generator` in the job jar) from Python.

The pattern is precomputed here (`LoadPattern.per_second()`, WORKLOADS-AND-QUERIES.md) and handed to
the Java process as a schedule file, one target rate (records/s, summed over the produced topics) per
line and second; with an arrival process (`PatternConfig.arrivals`) the lines are 100 ms steps whose
counts are drawn from it (`workloads.arrivals.fine_schedule`, seeded), so bursts reach Kafka. Java does
the pacing, Python only starts, watches and stops it. Produced totals come
from the generator's Prometheus endpoint (`generator_records_produced_total{topic=...}`), or from its
summary file once it has exited.

Record format (CSV, UTF-8, Kafka timestamp = event time in epoch ms):
  bids:     auction,bidder,price,channel,url,dateTime
  persons:  id,name,emailAddress,creditCard,city,state,dateTime
  auctions: id,itemName,description,initialBid,reserve,dateTime,expires,seller,category
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import requests

from workloads.arrivals import ArrivalConfig, fine_schedule
from workloads.patterns import LoadPattern

GENERATOR_CLASS = "bench.nexmark.Generator"
ARRIVAL_STEP_S = 0.1  # schedule resolution when an arrival process is drawn
_ARRIVAL_SALT = 0xA11  # the generator's arrival draws are independent of the pattern's stream
TOPICS = ("bids", "auctions", "persons")
# Records per 50 Nexmark events (Nexmark generator proportions; no hot items).
PROPORTIONS = {"persons": 1, "auctions": 3, "bids": 46}
BID_FIELDS = ("auction", "bidder", "price", "channel", "url", "dateTime")
PERSON_FIELDS = ("id", "name", "emailAddress", "creditCard", "city", "state", "dateTime")
AUCTION_FIELDS = (
    "id", "itemName", "description", "initialBid", "reserve", "dateTime", "expires", "seller", "category",
)
FIELDS = {"bids": BID_FIELDS, "persons": PERSON_FIELDS, "auctions": AUCTION_FIELDS}

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class GeneratorError(RuntimeError):
    """The generator could not start or died; the message carries its log tail."""


def schedule_text(rates: Iterable[float]) -> str:
    """The schedule file: one non-negative target rate per line (records/s for that second)."""
    out = []
    for r in rates:
        r = float(r)
        if not np.isfinite(r) or r < 0:
            raise ValueError(f"rates must be finite and >= 0, got {r}")
        out.append(f"{r:.3f}")
    return "\n".join(out) + "\n"


def expected_shares(topics: Sequence[str]) -> dict[str, float]:
    """Fraction of the produced records each topic gets (Nexmark 1:3:46, restricted to `topics`)."""
    total = sum(PROPORTIONS[t] for t in topics)
    return {t: PROPORTIONS[t] / total for t in topics}


def parse_prometheus(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Samples of a Prometheus text exposition: (name, sorted labels) -> value."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = tuple(sorted(_LABEL.findall(m.group(2) or "")))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


@dataclass(frozen=True)
class GeneratorMetrics:
    """One reading of the generator's endpoint (or its final summary)."""

    produced: dict[str, int]  # acknowledged by Kafka, per topic
    target_rate: float = 0.0
    skipped: int = 0
    errors: int = 0
    position_s: float = 0.0
    done: bool = False

    @property
    def total(self) -> int:
        return sum(self.produced.values())

    @classmethod
    def from_text(cls, text: str) -> GeneratorMetrics:
        s = parse_prometheus(text)
        produced = {
            dict(labels)["topic"]: int(v)
            for (name, labels), v in s.items()
            if name == "generator_records_produced_total" and "topic" in dict(labels)
        }
        return cls(
            produced=produced,
            target_rate=s.get(("generator_target_rate", ()), 0.0),
            skipped=int(s.get(("generator_records_skipped_total", ()), 0)),
            errors=int(s.get(("generator_send_errors_total", ()), 0)),
            position_s=s.get(("generator_schedule_position_seconds", ()), 0.0),
            done=s.get(("generator_done", ()), 0.0) >= 1.0,
        )

    @classmethod
    def from_summary(cls, summary: dict) -> GeneratorMetrics:
        return cls(
            produced={k: int(v) for k, v in summary.get("produced", {}).items()},
            skipped=int(summary.get("skipped", 0)),
            errors=int(summary.get("errors", 0)),
            position_s=float(summary.get("elapsed_s", 0.0)),
            done=True,
        )


@dataclass
class Generator:
    """One Java generator process producing the topics of a query, paced by a schedule file.

    `workdir` receives the schedule, the log, the summary and (optionally) the sampled per-record
    timestamps (`t_us,topic,producer`; every `timestamps_every`-th record) for inter-arrival analysis.
    """

    jar: Path
    bootstrap: str
    topics: Sequence[str]
    workdir: Path
    producers: int = 2
    metrics_port: int = 9405
    seed: int = 1
    timestamps_every: int | None = None
    java: str = "java"
    extra_args: Sequence[str] = ()
    schedule_step_s: float = field(default=1.0, init=False)
    _proc: subprocess.Popen | None = field(default=None, init=False, repr=False)
    _log: object = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        unknown = [t for t in self.topics if t not in TOPICS]
        if unknown or not self.topics:
            raise ValueError(f"topics must be a non-empty subset of {TOPICS}, got {list(self.topics)}")
        self.workdir = Path(self.workdir)

    # ---- paths ----------------------------------------------------------------------------------
    @property
    def schedule_path(self) -> Path:
        return self.workdir / "generator-schedule.txt"

    @property
    def summary_path(self) -> Path:
        return self.workdir / "generator-summary.json"

    @property
    def log_path(self) -> Path:
        return self.workdir / "generator.log"

    @property
    def timestamps_path(self) -> Path:
        return self.workdir / "generator-timestamps.csv"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    # ---- lifecycle ------------------------------------------------------------------------------
    def command(self) -> list[str]:
        cmd = [
            self.java, "-Xmx512m", "-XX:+UseParallelGC", "-cp", str(self.jar), GENERATOR_CLASS,
            "--bootstrap", self.bootstrap,
            "--topics", ",".join(self.topics),
            "--schedule", str(self.schedule_path),
            "--step-ms", str(int(round(self.schedule_step_s * 1000))),
            "--producers", str(self.producers),
            "--metrics-port", str(self.metrics_port),
            "--summary-out", str(self.summary_path),
            "--seed", str(self.seed),
        ]
        if self.timestamps_every:
            cmd += ["--timestamps-out", str(self.timestamps_path), "--timestamps-every", str(self.timestamps_every)]
        return [*cmd, *self.extra_args]

    def start(self, pattern: LoadPattern | None = None, rates: Sequence[float] | None = None,
              wait_s: float = 90.0, arrivals: ArrivalConfig | None = None) -> None:
        """Write the schedule (from `pattern.per_second()` or explicit per-second `rates`) and start.

        `arrivals`: draw the records per 100 ms from this process (seeded by `seed`); None keeps
        the per-second rates exactly, paced evenly (a fluid, like `deterministic`).

        Returns once the metrics endpoint answers, so schedule second 0 is (within the JVM's start-up)
        now; raises GeneratorError if the process exits first.
        """
        if self.running:
            raise GeneratorError("generator already running")
        if (pattern is None) == (rates is None):
            raise ValueError("give exactly one of pattern or rates")
        per_second = pattern.per_second() if pattern is not None else np.asarray(rates, dtype=float)
        if arrivals is not None and arrivals.kind != "deterministic":
            rng = np.random.default_rng([self.seed, _ARRIVAL_SALT])
            steps = fine_schedule(per_second, arrivals, rng, ARRIVAL_STEP_S)
            self.schedule_step_s = ARRIVAL_STEP_S
        else:
            steps, self.schedule_step_s = per_second, 1.0
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.schedule_path.write_text(schedule_text(steps))
        self.summary_path.unlink(missing_ok=True)
        self._log = self.log_path.open("w")
        self._proc = subprocess.Popen(
            self.command(), stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise GeneratorError(f"generator exited with {self._proc.returncode}:\n{self._log_tail()}")
            try:
                requests.get(self.metrics_url, timeout=0.5)
                return
            except requests.RequestException:
                time.sleep(0.1)
        self.stop()
        raise GeneratorError(f"generator metrics endpoint not up after {wait_s:.0f} s:\n{self._log_tail()}")

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def metrics(self) -> GeneratorMetrics:
        """Current counts: from the endpoint while running, else from the summary file."""
        if self.running:
            try:
                return GeneratorMetrics.from_text(requests.get(self.metrics_url, timeout=2).text)
            except requests.RequestException:
                pass
        if self.summary_path.exists():
            return GeneratorMetrics.from_summary(json.loads(self.summary_path.read_text()))
        raise GeneratorError(f"no metrics: endpoint down and no summary at {self.summary_path}")

    def produced(self) -> dict[str, int]:
        """Records acknowledged by Kafka so far, per topic."""
        return self.metrics().produced

    def wait_done(self, timeout_s: float, poll_s: float = 0.5) -> GeneratorMetrics:
        """Block until the schedule has been played (generator_done == 1) or `timeout_s` passed."""
        deadline = time.monotonic() + timeout_s
        while True:
            m = self.metrics()
            if m.done or time.monotonic() >= deadline:
                return m
            if not self.running:
                raise GeneratorError(f"generator exited early:\n{self._log_tail()}")
            time.sleep(poll_s)

    def stop(self, timeout_s: float = 15.0) -> GeneratorMetrics | None:
        """Stop the process (SIGTERM: producers flush and the summary is written) and return final counts."""
        if self._proc is None:
            return None
        last: GeneratorMetrics | None = None
        if self.running:
            try:
                last = self.metrics()
            except GeneratorError:
                last = None
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(5)
        if self._log is not None:
            self._log.close()  # type: ignore[attr-defined]
            self._log = None
        self._proc = None
        if self.summary_path.exists():
            return GeneratorMetrics.from_summary(json.loads(self.summary_path.read_text()))
        return last

    def __enter__(self) -> Generator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def read_timestamps(path: Path) -> dict[str, np.ndarray]:
    """Sampled send times (seconds, sorted) per topic from a `--timestamps-out` file."""
    data = np.genfromtxt(path, delimiter=",", names=True, dtype=None, encoding="utf-8")
    data = np.atleast_1d(data)
    out: dict[str, np.ndarray] = {}
    for topic in np.unique(data["topic"]):
        out[str(topic)] = np.sort(data["t_us"][data["topic"] == topic].astype(float)) / 1e6
    return out
