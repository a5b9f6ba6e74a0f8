"""The job jar: Maven builds it, it holds the entry points, and every query's job graph has exactly
the operators of its topology, one vertex each, with the requested parallelism (no cluster needed)."""

from __future__ import annotations

import importlib.util
import subprocess
import zipfile
from pathlib import Path

import pytest

from harness.backends.local.jobjar import OPERATORS, ensure_jar, vertex_operator
from harness.topology import load_topology

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def jar() -> Path:
    return ensure_jar()


def flink_lib() -> Path | None:
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        return None
    lib = Path(next(iter(spec.submodule_search_locations))) / "lib"
    return lib if list(lib.glob("flink-dist-*.jar")) else None


def test_jar_holds_main_classes_and_shaded_kafka(jar: Path) -> None:
    with zipfile.ZipFile(jar) as z:
        names = set(z.namelist())
        manifest = z.read("META-INF/MANIFEST.MF").decode()
    for cls in ("QueryJob", "Generator", "EventFactory", "CsvDeserializer", "LatencyHistogram", "Bid", "Person",
                "Auction"):
        assert f"bench/nexmark/{cls}.class" in names
    assert "org/apache/flink/connector/kafka/source/KafkaSource.class" in names
    assert "org/apache/kafka/clients/producer/KafkaProducer.class" in names
    # Flink's runtime is provided by the cluster, not bundled
    assert "org/apache/flink/streaming/api/environment/StreamExecutionEnvironment.class" not in names
    assert "Main-Class: bench.nexmark.QueryJob" in manifest


def test_job_graphs_match_topologies(jar: Path) -> None:
    lib = flink_lib()
    if lib is None:
        pytest.skip("pyflink (apache-flink) with its lib/ is not installed")
    proc = subprocess.run(
        ["java", "-cp", f"{jar}:{lib}/*", "bench.nexmark.QueryJob", "--query", "all", "--bootstrap",
         "127.0.0.1:1", "--print-plan", "--default-parallelism", "2", "--parallelism", "sink=3"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    vertices: dict[str, list[tuple[str, int, str]]] = {}
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 5 and parts[1] == "vertex":
            vertices.setdefault(parts[0], []).append((parts[2], int(parts[3]), parts[4]))
    assert set(vertices) == set(OPERATORS)
    for query, vs in vertices.items():
        names = [vertex_operator(name) for name, _, _ in vs]
        # chaining is off: one vertex per operator, named like the topology's operators
        assert sorted(names) == sorted(load_topology(query).names), query
        assert {n: p for n, (_, p, _) in zip(names, vs, strict=True)} == {
            n: (3 if n == "sink" else 2) for n in names
        }
    # vertex ids derive from the uids, so the same operator keeps its id across queries (savepoints map)
    ids = {(vertex_operator(n), i) for vs in vertices.values() for n, _, i in vs}
    assert len({op for op, _ in ids}) == len(ids)


def test_unknown_operator_is_rejected(jar: Path) -> None:
    lib = flink_lib()
    if lib is None:
        pytest.skip("pyflink (apache-flink) with its lib/ is not installed")
    proc = subprocess.run(
        ["java", "-cp", f"{jar}:{lib}/*", "bench.nexmark.QueryJob", "--query", "q1", "--bootstrap",
         "127.0.0.1:1", "--print-plan", "--parallelism", "window_join=2"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 2
    assert "window_join" in proc.stderr


def test_sink_latency_buckets_are_the_ones_python_reads(jar: Path) -> None:
    """The sink's histogram (LatencyHistogram.java) and the simulator/quantile code share one bucket list."""
    from harness.metrics.latency import E2E_BUCKETS_MS

    lib = flink_lib()
    if lib is None:
        pytest.skip("pyflink (apache-flink) with its lib/ is not installed")
    proc = subprocess.run(["java", "-cp", f"{jar}:{lib}/*", "bench.nexmark.LatencyHistogram"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [int(v) for v in proc.stdout.split()] == list(E2E_BUCKETS_MS)
