"""Operator graphs of the Nexmark queries and their cost profiles.

One YAML file per query in `queries/topologies/` describes the job graph
(operator names match the Flink job's operator uids) and a first-guess cost
profile the simulator uses: records/s one subtask can process at a full CPU,
output/input ratio (selectivity) and state growth per record. The `local`
backend reads the same graph to map Flink job vertices to operators.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

# the query names live apart (`bench list` needs no graph); re-exported for the modules that read graphs
from harness.query_names import QUERIES_DIR as QUERIES_DIR
from harness.query_names import TOPOLOGIES_DIR as TOPOLOGIES_DIR
from harness.query_names import available_queries as available_queries


@dataclass(frozen=True)
class OperatorSpec:
    """One job vertex: its place in the graph and its cost profile."""

    name: str
    upstream: tuple[str, ...] = ()
    topic: str | None = None  # Kafka topic a source reads
    capacity: float = 1.0e5  # records/s one subtask processes at CPU share 1.0
    selectivity: float = 1.0  # records out per record in
    state_bytes_per_record: float = 0.0  # state growth per processed record
    state_ttl_s: float | None = None  # state older than this is dropped (windows, joins)
    max_parallelism: int = 128  # Flink key groups
    # an event-time window: it emits a window's result once the watermark (the slowest source partition's event
    # time) passes the window's end, so a result's event time is about the watermark's (q5, q8, q11)
    fires_on_watermark: bool = False

    @property
    def is_source(self) -> bool:
        return not self.upstream

    @property
    def keyed(self) -> bool:
        """Its input is partitioned by key (it keeps state in key groups), not sent forward or round-robin."""
        return not self.is_source and (self.state_bytes_per_record > 0 or self.state_ttl_s is not None)


def input_spread(keyed: bool, parallelism: int, upstream_parallelisms: Iterable[int]) -> bool:
    """Whether a (non-source) operator's input is spread over its subtasks by key or round-robin (Flink
    rebalances where an upstream runs at another parallelism) rather than paired one to one (forward). A sender
    blocks as soon as one channel runs out of credit, so there its slowest subtask caps all of them."""
    return keyed or any(u != parallelism for u in upstream_parallelisms)


def fed_by_several_channels(keyed: bool, parallelism: int, upstream_parallelisms: Iterable[int]) -> bool:
    """Whether each subtask takes records over several channels: its input spread (`input_spread`) from an
    upstream at 2+ subtasks. The layout in which the calibration's bottleneck phase measured `fed_scaled_out`."""
    ups = tuple(upstream_parallelisms)
    return input_spread(keyed, parallelism, ups) and any(u > 1 for u in ups)


@dataclass(frozen=True)
class Topology:
    """A DAG of operators in topological order (sources first)."""

    query: str
    operators: tuple[OperatorSpec, ...]
    partitions: int = 24  # Kafka partitions per topic
    rescale_downtime: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for op in self.operators:
            missing = [u for u in op.upstream if u not in seen]
            if missing:
                raise ValueError(
                    f"topology {self.query}: operator {op.name!r} lists upstream {missing} "
                    "that is unknown or not listed before it (operators must be in topological order)"
                )
            seen.add(op.name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(op.name for op in self.operators)

    def op(self, name: str) -> OperatorSpec:
        for op in self.operators:
            if op.name == name:
                return op
        raise KeyError(f"operator {name!r} not in query {self.query} (has {list(self.names)})")

    @property
    def sources(self) -> tuple[OperatorSpec, ...]:
        return tuple(op for op in self.operators if op.is_source)

    @property
    def sinks(self) -> tuple[OperatorSpec, ...]:
        fed = {u for op in self.operators for u in op.upstream}
        return tuple(op for op in self.operators if op.name not in fed)

    def upstream(self, name: str) -> tuple[str, ...]:
        return self.op(name).upstream

    def downstream(self, name: str) -> tuple[str, ...]:
        return tuple(op.name for op in self.operators if name in op.upstream)

    def ancestors(self, name: str) -> set[str]:
        """Every operator whose records reach `name`."""
        return self._reach(name, self.upstream)

    def descendants(self, name: str) -> set[str]:
        """Every operator `name`'s records reach."""
        return self._reach(name, self.downstream)

    @staticmethod
    def _reach(name: str, step: Callable[[str], tuple[str, ...]]) -> set[str]:
        out: set[str] = set()
        todo = list(step(name))
        while todo:
            n = todo.pop()
            if n not in out:
                out.add(n)
                todo.extend(step(n))
        return out

    @property
    def topics(self) -> tuple[str, ...]:
        return tuple(sorted({op.topic for op in self.sources if op.topic}))

    def hops(self, source: str, name: str) -> int:
        """Edges on the shortest path from `source` down to `name` (a ValueError where `name` is not below it)."""
        frontier, hops = {source}, 0
        while name not in frontier:
            frontier = {d for f in frontier for d in self.downstream(f)}
            hops += 1
            if not frontier:
                raise ValueError(f"{name} is not downstream of {source}")
        return hops

    def paths(self) -> list[tuple[str, ...]]:
        """Every source-to-sink path (MEAD evaluates response time per path)."""
        out: list[tuple[str, ...]] = []

        def walk(path: tuple[str, ...]) -> None:
            nxt = self.downstream(path[-1])
            if not nxt:
                out.append(path)
            for n in nxt:
                walk(path + (n,))

        for s in self.sources:
            walk((s.name,))
        return out


def _parse(data: dict, where: str) -> Topology:
    try:
        ops = tuple(
            OperatorSpec(
                name=o["name"],
                upstream=tuple(o.get("upstream", ())),
                topic=o.get("topic"),
                capacity=float(o.get("capacity", 1.0e5)),
                selectivity=float(o.get("selectivity", 1.0)),
                state_bytes_per_record=float(o.get("state_bytes_per_record", 0.0)),
                state_ttl_s=(float(o["state_ttl_s"]) if o.get("state_ttl_s") is not None else None),
                max_parallelism=int(o.get("max_parallelism", 128)),
                fires_on_watermark=_flag(o, "fires_on_watermark"),
            )
            for o in data["operators"]
        )
        return Topology(
            query=str(data["query"]),
            operators=ops,
            partitions=int(data.get("partitions", 24)),
            rescale_downtime={k: float(v) for k, v in (data.get("rescale_downtime") or {}).items()},
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: invalid topology: {exc}") from exc


def _flag(op: dict, key: str) -> bool:
    """A yes/no field of an operator (absent: no); anything but a YAML boolean is an error, not a guess."""
    value = op.get(key, False)
    if not isinstance(value, bool):
        raise ValueError(f"operator {op.get('name')!r}: {key} must be true or false, got {value!r}")
    return value


def topology_path(query: str, directory: Path | None = None) -> Path:
    """`queries/topologies/<query>.yaml`: the one place the file's name is made (the loader and run identity)."""
    return (directory or TOPOLOGIES_DIR) / f"{query}.yaml"


@cache
def load_topology(query: str, directory: Path | None = None) -> Topology:
    """Read `queries/topologies/<query>.yaml`."""
    path = topology_path(query, directory)
    if not path.exists():
        raise ValueError(f"unknown query {query!r}; known: {', '.join(available_queries())}")
    with path.open() as fh:
        from harness import yamlio  # here: listing the queries (`bench list`) reads no YAML

        return _parse(yamlio.load(fh), str(path))


def topology_from_ops(query: str, ops: Iterable[OperatorSpec], partitions: int = 24) -> Topology:
    """Build a topology in code (tests, hand-made snapshots)."""
    return Topology(query=query, operators=tuple(ops), partitions=partitions)
