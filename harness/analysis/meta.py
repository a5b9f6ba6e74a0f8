"""What analysis needs from a run's `run.yaml`, as one typed value.

The runner writes the resolved experiment under `config`, the topology with
its capacities under `topology`, pattern stages under `pattern`, backend
facts under `backend`. Runs from a matrix live in
`<results>/<matrix>/<cell_id>-r<repetition>/`. Older or hand-made records may
lack some of it; every field has a fallback so analysis never refuses a run.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import yamlio
from harness.analysis.metrics import Stage
from harness.analysis.profile import OperatorProfile, demand_coefficients
from harness.identity import recorded_hash
from harness.run_status import RunStatus

log = logging.getLogger(__name__)

_REP_SUFFIX = re.compile(r"^(?P<cell>.+)-r(?P<rep>\d+)$")

# identity columns of the per-run summary, in table order
IDENTITY_COLUMNS = [
    "run_id", "matrix", "cell_id", "config_hash", "repetition", "experiment", "backend", "query", "pattern",
    "autoscaler", "params", "seed", "status",
]


@dataclass(frozen=True)
class RunMeta:
    run_id: str  # path relative to the results dir: unique
    path: Path
    matrix: str
    cell_id: str
    repetition: int
    experiment: str
    backend: str
    query: str
    pattern: str
    autoscaler: str
    params: dict[str, Any]
    seed: int
    status: str  # a RunStatus value: completed | failed | interrupted
    duration_s: float | None
    time_scale: float
    period_s: float
    cooldown_s: float
    min_parallelism: int
    slo_latency_s: float
    slo_throughput_ratio: float
    slo_latency_statistic: str = "mean"  # mean | p95: what slo_latency_s is a target for
    slo_qos: str = "both"  # throughput | latency | both: MPC's per-step QoS test
    operators: tuple[OperatorProfile, ...] = ()
    topic_shares: dict[str, float] | None = None  # share of the input rate per topic (backend fact)
    stages: tuple[Stage, ...] = ()
    yaml_faults: int = 0
    pattern_records: float | None = None  # records the pattern asks for over the run (None: not recorded)
    config_hash: str = ""  # the cell's configuration identity (harness.identity); "" when unknown
    status_reason: str = ""  # the rest of the status line ("failed: <why>")
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def run_status(self) -> RunStatus:
        return RunStatus(self.status)

    @property
    def completed(self) -> bool:
        return self.status == RunStatus.COMPLETED

    @property
    def interrupted(self) -> bool:
        return self.status == RunStatus.INTERRUPTED

    @property
    def params_json(self) -> str:
        return json.dumps(self.params, sort_keys=True, default=str)

    @property
    def coefficients(self) -> dict[str, float]:
        return demand_coefficients(list(self.operators), self.topic_shares) if self.operators else {}

    @property
    def settle_s(self) -> float:
        """How long an autoscaler must stay put after an action before we call it converged."""
        return self.cooldown_s + self.period_s

    def identity(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id, "matrix": self.matrix, "cell_id": self.cell_id, "config_hash": self.config_hash,
            "repetition": self.repetition, "experiment": self.experiment, "backend": self.backend,
            "query": self.query, "pattern": self.pattern, "autoscaler": self.autoscaler,
            "params": self.params_json, "seed": self.seed, "status": self.status,
        }


def _get(d: Any, *path: str, default: Any = None) -> Any:
    cur = d
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return default
        cur = cur[part]
    return cur


def _operators(raw: dict[str, Any], config: dict[str, Any], query: str) -> tuple[OperatorProfile, ...]:
    """Topology from run.yaml, else from queries/topologies; capacities at the run's scale.

    A backend that calibrated capacities records them as `backend.capacity`
    ({operator: records/s per subtask}); otherwise the topology's capacity is
    multiplied by `backend.capacity_scale` (default 1: the simulator runs the
    profile's capacities as they are, whatever the pattern's rate `scale`).
    """
    ops_raw = _get(raw, "topology", "operators")
    if not ops_raw and query:
        try:
            from harness.topology import load_topology

            topo = load_topology(query)
            ops_raw = [
                {"name": o.name, "upstream": list(o.upstream), "topic": o.topic, "capacity": o.capacity,
                 "selectivity": o.selectivity}
                for o in topo.operators
            ]
        except ValueError:
            ops_raw = []
    calibrated = _get(raw, "backend", "capacity") or {}
    scale = _get(raw, "backend", "capacity_scale")
    if scale is None:
        scale = 1.0
    out = []
    for o in ops_raw or []:
        cap = calibrated.get(o["name"]) if isinstance(calibrated, dict) else None
        cap = float(cap) if cap is not None else float(o.get("capacity", 1.0e5)) * float(scale)
        out.append(OperatorProfile(o["name"], tuple(o.get("upstream") or ()), o.get("topic"), cap,
                                   float(o.get("selectivity", 1.0))))
    return tuple(out)


def _topic_shares(raw: dict[str, Any]) -> dict[str, float] | None:
    shares = _get(raw, "backend", "topic_shares")
    if not isinstance(shares, dict) or not shares:
        return None
    return {str(k): float(v) for k, v in shares.items()}


def _stages(raw: dict[str, Any], config: dict[str, Any]) -> tuple[Stage, ...]:
    stages = _get(raw, "pattern", "stages")
    if stages:
        return tuple(Stage(str(s["name"]), float(s["start_s"]), float(s["end_s"])) for s in stages)
    pattern = config.get("pattern")
    if isinstance(pattern, dict) and pattern.get("name") == "convergence":
        try:
            from workloads.patterns import PatternConfig, build_pattern

            built = build_pattern(PatternConfig(**pattern), int(config.get("seed", 1)), config.get("query"))
            return tuple(Stage(s.name, s.start_s, s.end_s) for s in built.stages)
        except Exception as exc:  # noqa: BLE001 - a pattern this code cannot rebuild: stages come from phase events
            log.info("convergence stages of %s not rebuilt from its pattern (%s: %s); using its phase events",
                     config.get("name", "a run"), type(exc).__name__, exc)
            return ()
    return ()


def parse_meta(raw: dict[str, Any], run_dir: Path, results_dir: Path | None, status: str) -> RunMeta:
    config = raw.get("config") or raw.get("experiment_config") or {}
    if not isinstance(config, dict):
        config = {}
    run_dir = Path(run_dir)
    try:
        run_id = str(run_dir.resolve().relative_to(Path(results_dir).resolve())) if results_dir else run_dir.name
    except ValueError:
        run_id = run_dir.name
    m = _REP_SUFFIX.match(run_dir.name)
    cell_id = str(raw.get("cell_id") or (m.group("cell") if m else run_dir.name))
    repetition = raw.get("repetition")
    repetition = int(repetition) if repetition is not None else (int(m.group("rep")) if m else 0)
    matrix = raw.get("matrix")
    if isinstance(matrix, dict):
        matrix = matrix.get("name")
    matrix = str(matrix or (run_dir.parent.name if results_dir and run_dir.parent.resolve()
                            != Path(results_dir).resolve() else raw.get("experiment") or run_dir.name))
    autoscaler = config.get("autoscaler") or {}
    if isinstance(autoscaler, str):
        autoscaler = {"name": autoscaler}
    pattern = config.get("pattern") or {}
    if isinstance(pattern, str):
        pattern = {"name": pattern}
    query = str(config.get("query") or _get(raw, "topology", "query", default=""))
    duration = raw.get("duration_s")
    records = _get(raw, "pattern", "records")
    return RunMeta(
        run_id=run_id,
        path=run_dir,
        matrix=matrix,
        cell_id=cell_id,
        repetition=repetition,
        experiment=str(raw.get("experiment") or config.get("name") or run_dir.name),
        backend=str(config.get("backend", "")),
        query=query,
        pattern=str(pattern.get("name", "")),
        autoscaler=str(autoscaler.get("name", "")),
        params=dict(autoscaler.get("params") or {}),
        seed=int(raw.get("seed", config.get("seed", 0)) or 0),
        status=RunStatus.parse(status).value,
        status_reason=status.split(":", 1)[1].strip() if ":" in status else "",
        config_hash=recorded_hash(raw) or "",
        duration_s=float(duration) if duration is not None else None,
        time_scale=float(pattern.get("time_scale", 1.0) or 1.0),
        period_s=float(_get(config, "loop", "period_s", default=15.0)),
        cooldown_s=float(_get(config, "loop", "cooldown_s", default=300.0)),
        min_parallelism=int(_get(config, "scale_manager", "min_parallelism", default=1)),
        slo_latency_s=float(_get(config, "slo", "latency_s", default=5.0)),
        slo_throughput_ratio=float(_get(config, "slo", "throughput_ratio", default=0.95)),
        slo_latency_statistic=str(_get(config, "slo", "latency_statistic", default="mean")),
        slo_qos=str(_get(config, "slo", "qos", default="both")),
        operators=_operators(raw, config, query),
        topic_shares=_topic_shares(raw),
        stages=_stages(raw, config),
        yaml_faults=int(raw.get("faults", 0) or 0),
        pattern_records=float(records) if records is not None else None,
    )


def read_status(run_dir: Path) -> str:
    status = Path(run_dir) / "status"
    return status.read_text().strip() if status.exists() else "missing"


def load_meta(run_dir: Path, results_dir: Path | None = None) -> RunMeta:
    with (Path(run_dir) / "run.yaml").open() as fh:
        raw = yamlio.load(fh) or {}  # libyaml: read once per run, thousands per analysis
    if not isinstance(raw, dict):
        raise ValueError(f"run.yaml holds a {type(raw).__name__}, not a mapping")
    return parse_meta(raw, Path(run_dir), results_dir, read_status(run_dir))
