"""Typed, validated experiment and matrix files (YAML in, clear errors out).

An experiment is one run's recipe; a matrix is a cartesian product over any
of its fields (dotted paths), with per-cell overrides and repetitions. Every
error names the file, the field path and, where there is a closed set, the
valid choices; `ConfigError` carries that message and the CLI exits with 2.
"""

from __future__ import annotations

import copy
import importlib
import itertools
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    NonNegativeFloat,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

import autoscalers
from harness import yamlio
from harness.errors import nested_errors
from harness.faults import FaultSpec
from harness.kafka_settings import KafkaSettings
from harness.topology import available_queries, load_topology
from workloads.pattern_config import PatternConfig


class ConfigError(ValueError):
    """A configuration file is wrong; the message says where and how."""


# Each backend registers the model of its settings block (`sim:`, `local:`, `k8s:`) here by name, as
# module:class, imported when an experiment is validated: this module imports no backend module, so
# the arrows run from the backends to the config, never back. A backend reads its block typed
# (`cfg: LocalConfig = experiment.local`); to the rest of the harness the block is opaque.
BACKEND_SETTINGS: dict[str, str] = {
    "local": "harness.backends.local.config:LocalConfig",
    "sim": "harness.backends.sim.config:SimConfig",
    "k8s": "harness.backends.k8s.config:K8sConfig",
}


def backend_settings_model(backend: str) -> type[BaseModel]:
    """The registered settings model of `backend` (KeyError for an unknown one)."""
    module, cls = BACKEND_SETTINGS[backend].split(":")
    model: type[BaseModel] = getattr(importlib.import_module(module), cls)
    return model


def _validated_by(backend: str) -> Any:
    """Validation through `backend`'s registered settings model (a dict in, the model's instance out)."""

    def validate(value: Any) -> Any:
        model = backend_settings_model(backend)
        return value if isinstance(value, model) else model.model_validate(value)

    return BeforeValidator(validate)


def _defaults_of(backend: str) -> Any:
    return lambda: backend_settings_model(backend).model_validate({})


SimSettings = Annotated[Any, _validated_by("sim")]
LocalSettings = Annotated[Any, _validated_by("local")]
K8sSettings = Annotated[Any, _validated_by("k8s")]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LoopConfig(_Strict):
    """The MAPE loop, the same for every autoscaler (thesis ch. 6.6: fairness)."""

    period_s: PositiveFloat = Field(15.0, description="seconds between decisions")
    metrics_window_s: PositiveFloat = Field(15.0, description="metrics averaged over this window (3 x scrape)")
    cooldown_s: NonNegativeFloat = Field(300.0, description="no decision for this long after an action")
    warmup_s: NonNegativeFloat = Field(0.0, description="no decision before this time")


class ScaleManagerConfig(_Strict):
    """Limits on what an autoscaler may ask for (thesis ch. 6.6.4)."""

    max_taskmanagers: PositiveInt = 80
    max_increase_per_action: PositiveInt = 15
    min_parallelism: PositiveInt = 1
    overprovisioning: PositiveFloat = Field(1.0, description="extra factor on every scale-up target")


class AutoscalerSpec(_Strict):
    name: str
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _known(cls, name: str) -> str:
        known = autoscalers.available()
        if name not in known:
            raise ValueError(f"unknown autoscaler {name!r}; valid choices: {', '.join(known)}")
        return name

    @model_validator(mode="after")
    def _params(self) -> AutoscalerSpec:
        cfg_cls = autoscalers.config_class(self.name)
        try:
            cfg_cls(**self.params)
        except ValidationError as exc:
            raise ValueError(f"autoscaler {self.name!r}: {nested_errors(exc, 'params', cfg_cls)}") from None
        return self

    def typed_params(self) -> autoscalers.AutoscalerConfig:
        return autoscalers.config_class(self.name)(**self.params)


class SLOConfig(_Strict):
    """Service-level objectives the paper scores read (harness.analysis.papers)."""

    latency_s: PositiveFloat = Field(5.0, description="response-time target: MEAD's R_max, MPC's theta_lat")
    throughput_ratio: PositiveFloat = Field(0.95, description="MPC's theta_th: records processed / received")
    latency_statistic: Literal["mean", "p95"] = Field(
        "mean", description="the statistic latency_s is a target for (MEAD: mean, Tab. I, or p95, Tab. II)")
    qos: Literal["throughput", "latency", "both"] = Field(
        "both", description="MPC's QoS test per control step: throughput- or latency-based strategy (sec. 5.3.3)")


class Experiment(_Strict):
    """One run: what to run, under which load, scaled by which autoscaler."""

    name: str = Field(..., min_length=1)
    backend: Literal["local", "sim", "k8s"] = "local"
    query: str
    pattern: PatternConfig
    autoscaler: AutoscalerSpec
    loop: LoopConfig = Field(default_factory=LoopConfig)
    scale_manager: ScaleManagerConfig = Field(default_factory=ScaleManagerConfig)
    initial_parallelism: PositiveInt | dict[str, PositiveInt] = 1
    duration_s: PositiveFloat | None = Field(None, description="cut the run short (scaled seconds)")
    seed: int = 1
    repetitions: PositiveInt = 1
    rescale_method: Literal["in_place", "savepoint", "reactive"] = "in_place"
    slo: SLOConfig = Field(default_factory=SLOConfig)
    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    sim: SimSettings = Field(default_factory=_defaults_of("sim"))
    local: LocalSettings = Field(default_factory=_defaults_of("local"))
    k8s: K8sSettings = Field(default_factory=_defaults_of("k8s"))
    faults: list[FaultSpec] = Field(default_factory=list, description="faults injected during the run")

    @field_validator("name")
    @classmethod
    def _slug(cls, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.=+-]*", name):
            raise ValueError("use letters, digits and _ . = + - only (it names a directory)")
        return name

    @field_validator("query")
    @classmethod
    def _query(cls, query: str) -> str:
        known = available_queries()
        if query not in known:
            raise ValueError(f"unknown query {query!r}; valid choices: {', '.join(known)}")
        return query

    @model_validator(mode="after")
    def _faults(self) -> Experiment:
        if self.faults and self.backend == "k8s":
            raise ValueError("faults: fault injection runs on the local and sim backends only")
        if self.duration_s is not None:
            late = [f.kind.value for f in self.faults if f.at_s >= self.duration_s]
            if late:
                raise ValueError(f"faults: {', '.join(late)} at or after duration_s ({self.duration_s:g} s)")
        return self

    @model_validator(mode="after")
    def _initial(self) -> Experiment:
        if isinstance(self.initial_parallelism, dict):
            ops = load_topology(self.query).names
            unknown = sorted(set(self.initial_parallelism) - set(ops))
            if unknown:
                raise ValueError(
                    f"initial_parallelism names operators {unknown} not in {self.query}; "
                    f"valid choices: {', '.join(ops)}"
                )
        return self

    @property
    def partitions(self) -> int:
        """Kafka partitions per topic (thesis ch. 6.3.1: the most consumers there can be)."""
        return self.kafka.resolved_partitions(self.scale_manager.max_taskmanagers)

    def initial_parallelism_map(self) -> dict[str, int]:
        ops = load_topology(self.query).names
        if isinstance(self.initial_parallelism, int):
            return {op: self.initial_parallelism for op in ops}
        return {op: self.initial_parallelism.get(op, 1) for op in ops}


# ---------------------------------------------------------------- matrices


class Override(_Strict):
    """Set fields on every cell whose values match (dotted paths on both sides)."""

    match: dict[str, Any] = Field(default_factory=dict)
    set: dict[str, Any]


class Matrix(_Strict):
    """A cartesian product of experiments (Theodolite-style), with repetitions."""

    name: str = Field(..., min_length=1)
    description: str = ""
    base: dict[str, Any]
    axes: dict[str, list[Any]] = Field(default_factory=dict)
    overrides: list[Override] = Field(default_factory=list)
    repetitions: PositiveInt = 1
    seeds: list[int] | None = Field(None, description="one per repetition; default seed, seed+1, ...")

    @field_validator("name")
    @classmethod
    def _slug(cls, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.=+-]*", name):
            raise ValueError("use letters, digits and _ . = + - only (it names a directory)")
        return name

    @field_validator("axes")
    @classmethod
    def _non_empty(cls, axes: dict[str, list[Any]]) -> dict[str, list[Any]]:
        for key, values in axes.items():
            if not values:
                raise ValueError(f"axis {key!r} has no values")
        return axes


class Cell(BaseModel):
    """One experiment of a matrix, with its repetition and seed."""

    model_config = ConfigDict(frozen=True)

    cell_id: str
    repetition: int
    experiment: Experiment

    @property
    def run_id(self) -> str:
        return f"{self.cell_id}-r{self.repetition}"


def get_path(d: dict[str, Any], path: str) -> Any:
    cur: Any = d
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def set_path(d: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    cur = d
    for part in parts[:-1]:
        nxt = cur.get(part)
        if not isinstance(nxt, dict):
            nxt = {} if nxt is None else {"name": nxt}  # `autoscaler: ds2` shorthand
            cur[part] = nxt
        cur = nxt
    if isinstance(value, dict) and isinstance(cur.get(parts[-1]), dict):
        cur[parts[-1]] = {**cur[parts[-1]], **copy.deepcopy(value)}
    else:
        cur[parts[-1]] = copy.deepcopy(value)


def _slug_value(value: Any) -> str:
    if isinstance(value, dict):
        return "+".join(_slug_value(v) for v in value.values())
    text = str(value)
    return re.sub(r"[^A-Za-z0-9_.=+-]+", "_", text).strip("_") or "x"


def expand_shorthand(raw: dict[str, Any]) -> dict[str, Any]:
    """`autoscaler: ds2` and `pattern: cosine` are accepted for `{name: ...}`."""
    for key in ("autoscaler", "pattern"):
        if isinstance(raw.get(key), str):
            raw[key] = {"name": raw[key]}
    return raw


def _matches(actual: Any, wanted: Any) -> bool:
    """`match: {autoscaler: ds2}` matches the expanded `{name: ds2, params: ...}` too."""
    if isinstance(actual, dict) and not isinstance(wanted, dict):
        actual = actual.get("name")
    return actual == wanted or _slug_value(actual) == _slug_value(wanted)


def matrix_cells(matrix: Matrix, source: str = "<matrix>") -> list[Cell]:
    """Expand a matrix into validated cells; the first bad cell raises ConfigError."""
    keys = list(matrix.axes)
    cells: list[Cell] = []
    for combo in itertools.product(*(matrix.axes[k] for k in keys)) if keys else [()]:
        raw = expand_shorthand(copy.deepcopy(matrix.base))
        for key, value in zip(keys, combo, strict=True):
            set_path(raw, key, value)
        expand_shorthand(raw)
        for ov in matrix.overrides:
            if all(_matches(get_path(raw, k), v) for k, v in ov.match.items()):
                for k, v in ov.set.items():
                    set_path(raw, k, v)
        cell_id = "_".join(_slug_value(v) for v in combo) or "default"
        if any(c.cell_id == cell_id for c in cells):
            raise ConfigError(f"{source}: two cells are both {cell_id!r}; axis values must differ")
        raw["name"] = f"{matrix.name}_{cell_id}" if keys else matrix.name
        try:
            base_seed = int(raw.get("seed", 1))
        except (TypeError, ValueError):
            raise ConfigError(f"{source}: cell {cell_id!r}: seed: expected an integer, "
                              f"got {raw.get('seed')!r}") from None
        for rep in range(matrix.repetitions):
            seed = matrix.seeds[rep] if matrix.seeds else base_seed + rep
            exp_raw = {**raw, "seed": seed}
            where = f"{source}: cell {cell_id!r}"
            experiment = validate_model(Experiment, exp_raw, where)
            cells.append(Cell(cell_id=cell_id, repetition=rep, experiment=experiment))
    return cells


# ---------------------------------------------------------------- loading


def validate_model(model: type[BaseModel], raw: Any, where: str) -> Any:
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: expected a mapping at the top level, got {type(raw).__name__}")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for err in exc.errors():
            loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                allowed = _allowed_fields(model, err["loc"][:-1])
                msg = f"unknown field; valid fields: {allowed}" if allowed else "unknown field"
            elif err["type"] == "literal_error":
                msg = f"{msg} (got {err.get('input')!r})"
            lines.append(f"{where}: {loc}: {msg}")
        raise ConfigError("\n".join(lines)) from None


def _allowed_fields(model: type[BaseModel], loc: tuple[Any, ...]) -> str:
    cur: Any = model
    for part in loc:
        field = getattr(cur, "model_fields", {}).get(part)
        if field is None:
            return ""
        cur = backend_settings_model(part) if cur is Experiment and part in BACKEND_SETTINGS else field.annotation
    fields = getattr(cur, "model_fields", None)
    return ", ".join(fields) if fields else ""


def read_yaml(path: Path, _seen: tuple[Path, ...] = ()) -> Any:
    """Load a YAML file; a top-level `include:` (a path or a list, relative to the file) is merged in first."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: no such file")
    try:
        with path.open() as fh:
            raw = yamlio.load(fh)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from None
    if isinstance(raw, dict) and "include" in raw:
        raw = apply_include(raw, path, _seen)
    return raw


def deep_merge(base: dict[str, Any], top: dict[str, Any]) -> dict[str, Any]:
    """`top` wins; mappings merge key by key, everything else (lists too) is replaced."""
    out = copy.deepcopy(base)
    for key, value in top.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_include(raw: dict[str, Any], path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Merge the presets named by `include:` under `raw` (experiments/presets/thesis.yaml is one).

    The file's own values win. A preset's `overrides` (matrices) come before the file's own, so a
    matrix can still override what the preset says for some cells.
    """
    raw = dict(raw)
    inc = raw.pop("include")
    names = [inc] if isinstance(inc, str) else inc
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError(f"{path}: include: expected a file name or a list of them, got {inc!r}")
    merged: dict[str, Any] = {}
    overrides: list[Any] = []
    for name in names:
        target = (path.parent / name).resolve()
        if target in seen:
            raise ConfigError(f"{path}: include: {name} includes itself")
        preset = read_yaml(target, (*seen, path.resolve()))
        if not isinstance(preset, dict):
            raise ConfigError(f"{target}: a preset must be a mapping")
        overrides += preset.pop("overrides", []) or []
        merged = deep_merge(merged, preset)
    out = deep_merge(merged, raw)
    if overrides or "overrides" in raw:
        out["overrides"] = overrides + list(raw.get("overrides") or [])
    return out


def is_matrix(raw: Any) -> bool:
    return isinstance(raw, dict) and "base" in raw


def load_experiment(path: Path) -> Experiment:
    raw = read_yaml(path)
    if isinstance(raw, dict):
        raw = expand_shorthand(raw)
    return validate_model(Experiment, raw, str(path))


def load_matrix(path: Path) -> tuple[Matrix, list[Cell]]:
    raw = read_yaml(path)
    matrix = validate_model(Matrix, raw, str(path))
    return matrix, matrix_cells(matrix, str(path))


def load_any(path: Path) -> tuple[Matrix | None, list[Cell]]:
    """An experiment file is a one-cell matrix (with its own repetitions)."""
    raw = read_yaml(path)
    if is_matrix(raw):
        return load_matrix(path)
    exp = load_experiment(path)
    cells = [
        Cell(cell_id=exp.name, repetition=r, experiment=exp.model_copy(update={"seed": exp.seed + r}))
        for r in range(exp.repetitions)
    ]
    return None, cells
