"""The Nexmark job jar (queries/): build it on demand and spell the command that submits a query.

`ensure_jar` rebuilds `queries/target/nexmark-queries.jar` with Maven when it is missing or older than
any file under `queries/src` or `queries/pom.xml`. `job_command` turns a query, a Kafka address and a
per-operator parallelism into the main class and program arguments for Flink's `POST /jars/:id/run`
(or `flink run`). The operator names are the uids of the job (queries/src/.../QueryJob.java) and the
names in `queries/topologies/*.yaml`.

Vertex names in Flink's REST API and metrics equal the operator names, except that Flink prefixes
sources with "Source: " (`vertex_operator` undoes that).
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]
QUERIES_DIR = REPO / "queries"
POM = QUERIES_DIR / "pom.xml"
JAR = QUERIES_DIR / "target" / "nexmark-queries.jar"
MAIN_CLASS = "bench.nexmark.QueryJob"
GENERATOR_CLASS = "bench.nexmark.Generator"

# Must match QueryJob.OPERATORS (the Java side rejects unknown names too).
OPERATORS: dict[str, tuple[str, ...]] = {
    "q1": ("bids_source", "map", "sink"),
    "q2": ("bids_source", "filter", "sink"),
    "q3": ("auction_source", "person_source", "person_filter", "join", "sink"),
    "q5": ("bids_source", "sliding_window", "sink"),
    "q8": ("person_source", "auction_source", "window_join", "sink"),
    "q11": ("bids_source", "session_window", "sink"),
}
# Kafka topics each query reads (the generator produces only these).
TOPICS: dict[str, tuple[str, ...]] = {
    "q1": ("bids",),
    "q2": ("bids",),
    "q3": ("persons", "auctions"),
    "q5": ("bids",),
    "q8": ("persons", "auctions"),
    "q11": ("bids",),
}
SOURCE_PREFIX = "Source: "

# job_command options -> QueryJob flags (value options; booleans are flags given only when True)
_OPTION_FLAGS: dict[str, str] = {
    "group_id": "--group-id",
    "max_parallelism": "--max-parallelism",
    "default_parallelism": "--default-parallelism",
    "from_earliest": "--from-earliest",
    "job_name": "--job-name",
    "out_of_orderness_ms": "--out-of-orderness-ms",
    "idle_timeout_ms": "--idle-timeout-ms",
    "window_size_s": "--window-size-s",
    "window_slide_s": "--window-slide-s",
    "session_gap_s": "--session-gap-s",
    "tumble_s": "--tumble-s",
    "state_ttl_s": "--state-ttl-s",
    "checkpoint_interval_ms": "--checkpoint-interval-ms",
    "latency_max_window_ms": "--latency-max-window-ms",
}

Progress = Callable[[str], None]


class JobJarError(RuntimeError):
    """The jar cannot be built (tool missing or Maven failed); the message says what to do."""


def vertex_operator(vertex_name: str) -> str:
    """Operator name of a Flink job vertex ("Source: bids_source" -> "bids_source")."""
    return vertex_name[len(SOURCE_PREFIX):] if vertex_name.startswith(SOURCE_PREFIX) else vertex_name


def sources(root: Path = QUERIES_DIR) -> list[Path]:
    """Every input of the build: the pom and all files under src/."""
    files = [root / "pom.xml"]
    src = root / "src"
    if src.exists():
        files.extend(p for p in src.rglob("*") if p.is_file())
    return files


def is_stale(jar: Path, inputs: Iterable[Path]) -> bool:
    """True if the jar is missing or older than any input."""
    if not jar.exists():
        return True
    built = jar.stat().st_mtime
    return any(p.stat().st_mtime > built for p in inputs if p.exists())


def ensure_jar(progress: Progress | None = None, force: bool = False) -> Path:
    """Return the job jar, building it with Maven first if it is missing or stale.

    Builds are serialised with a lock file (several harness processes may ask at once; two concurrent
    shade runs in one target/ leave no jar behind), and staleness is re-checked under the lock.
    """
    if not force and not is_stale(JAR, sources()):
        return JAR
    JAR.parent.mkdir(parents=True, exist_ok=True)
    with (JAR.parent / ".build.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if not force and not is_stale(JAR, sources()):
                return JAR
            return _build(progress)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _build(progress: Progress | None) -> Path:
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        raise JobJarError(
            f"cannot build {JAR.relative_to(REPO)}: {' and '.join(missing)} not found on PATH "
            "(install a JDK 17 and Maven 3.8+, e.g. `apt-get install -y openjdk-17-jdk-headless maven`)"
        )
    if progress:
        progress(f"building {JAR.relative_to(REPO)} with Maven (first build downloads Flink's API jars)")
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), "package", "-DskipTests"],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0 or not JAR.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise JobJarError(f"mvn package of {POM.relative_to(REPO)} failed (exit {proc.returncode}):\n{tail}")
    return JAR


def job_command(
    query: str, bootstrap: str, parallelism: Mapping[str, int], **opts: Any
) -> tuple[str, list[str]]:
    """Main class and program arguments that run `query` with the given per-operator parallelism.

    Options (all optional): group_id, max_parallelism, default_parallelism, from_earliest (bool),
    job_name, out_of_orderness_ms, idle_timeout_ms, window_size_s / window_slide_s (q5), session_gap_s
    (q11), tumble_s (q8), state_ttl_s (q3), checkpoint_interval_ms, latency_max_window_ms (the sink's
    max-latency gauge window; the harness passes its scrape interval). None values are left out.
    """
    if query not in OPERATORS:
        raise ValueError(f"unknown query {query!r}; one of {sorted(OPERATORS)}")
    unknown = sorted(set(parallelism) - set(OPERATORS[query]))
    if unknown:
        raise ValueError(f"{query} has no operator(s) {unknown}; operators: {list(OPERATORS[query])}")
    bad = {k: v for k, v in parallelism.items() if int(v) < 1}
    if bad:
        raise ValueError(f"parallelism must be >= 1: {bad}")
    args = ["--query", query, "--bootstrap", bootstrap]
    opts.setdefault("group_id", f"bench-{query}")
    if parallelism:
        spec = ",".join(f"{op}={int(parallelism[op])}" for op in OPERATORS[query] if op in parallelism)
        args += ["--parallelism", spec]
    for key, value in opts.items():
        if key not in _OPTION_FLAGS:
            raise ValueError(f"unknown job option {key!r}; known: {sorted(_OPTION_FLAGS)}")
        if value is None or value is False:
            continue
        args += [_OPTION_FLAGS[key]] if value is True else [_OPTION_FLAGS[key], str(value)]
    return MAIN_CLASS, args
