"""Options of the Flink operator autoscaler (AutoScalerOptions), its presets and durations.

Light: validating an experiment imports only this module.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from autoscalers.config import AutoscalerConfig

AlignmentMode = Literal["BALANCED", "EVENLY_SPREAD", "OFF", "DIVISORS_UP_TO_HALF"]
LegacyAdjustMode = Literal["EVENLY_SPREAD", "MAXIMIZE_UTILISATION"]

KEY_PREFIX = "job.autoscaler."

# Which operator release each preset follows (read in apache/flink-kubernetes-operator:
# flink-autoscaler/.../config/AutoScalerOptions.java, JobVertexScaler.java and alignment/* at the
# 1.16-SNAPSHOT snapshot, and flink-kubernetes-operator-autoscaler/.../AutoScalerOptions.java and
# JobVertexScaler.java at tag release-1.6.1).
RELEASES = {"current": "1.16-SNAPSHOT", "legacy": "1.6.1"}

# release-1.6.1 defaults where they differ from the current release (1.5.0 and 1.6.x shipped the
# same four values; 1.7.0 moved to today's window/boundary/catch-up/restart).
LEGACY_DEFAULTS: dict[str, float] = {
    "metrics_window": 600.0,
    "target_utilization_boundary": 0.4,
    "catch_up_duration": 300.0,
    "restart_time": 180.0,
}
# How release 1.6.1 behaved where the current release behaves differently (options that did not
# exist then are off): no lazy scale-down but a one-hour grace period after a scale-up, no observed
# true processing rate, its own alignment rule (every vertex, divisors of the key groups up to half
# of them).
LEGACY_BEHAVIOUR: dict[str, object] = {
    "scale_down_interval": 0.0,
    "scale_up_grace_period": 3600.0,
    "observed_true_processing_rate": False,
    "parallelism_alignment_mode": "DIVISORS_UP_TO_HALF",
}

_UNITS = {
    "ms": 0.001, "milli": 0.001, "millis": 0.001,
    "s": 1.0, "sec": 1.0, "secs": 1.0, "second": 1.0, "seconds": 1.0,
    "m": 60.0, "min": 60.0, "mins": 60.0, "minute": 60.0, "minutes": 60.0,
    "h": 3600.0, "hour": 3600.0, "hours": 3600.0,
    "d": 86400.0, "day": 86400.0, "days": 86400.0,
}  # fmt: skip


def parse_duration(value: Any) -> float:
    """Seconds from a number or a Flink-style duration string ("15 min", "30s", "1 h")."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        if m:
            unit = m.group(2).lower() or "s"
            if unit in _UNITS:
                return float(m.group(1)) * _UNITS[unit]
    raise ValueError(f"not a duration: {value!r} (use seconds or e.g. '15 min', '30s', '1 h')")


def _dur(default: float, key: str, doc: str) -> Any:
    return Field(default, alias=key, ge=0, description=f"{doc} (seconds; key {KEY_PREFIX}{key})")


class FlinkOperatorConfig(AutoscalerConfig):
    """Options of `flink-autoscaler` (AutoScalerOptions, operator 1.16-SNAPSHOT defaults).

    Field names are the documented keys in snake_case; the keys themselves are aliases.
    `preset: legacy` follows operator release 1.6.1 instead: its defaults (LEGACY_DEFAULTS) and
    its behaviour where it differs (LEGACY_BEHAVIOUR), for every option not given explicitly.

    Alignment (ParallelismAligner): `scaling.parallelism-alignment.mode` when given; else the
    deprecated `scaling.key-group.partitions.adjust.mode` when given (with its blocking
    fallback); else BALANCED, the current release's default.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    preset: Literal["current", "legacy"] = Field(
        "current", description="current = operator 1.16-SNAPSHOT; legacy = operator release 1.6.1 (window 10 min, "
        "boundary 0.4, catch-up 5 min, restart 3 min, grace period instead of lazy scale-down, 1.6 alignment)"
    )
    metrics_window: float = _dur(900.0, "metrics.window", "scaling metrics are evaluated over this window")
    stabilization_interval: float = _dur(
        300.0, "stabilization.interval", "no metrics are collected this long after the job (re)started"
    )
    utilization_target: float = Field(0.7, alias="utilization.target", gt=0, le=1)
    target_utilization_boundary: float = Field(
        0.3, alias="target.utilization.boundary", ge=0, description="band = target +- boundary"
    )
    utilization_max: float | None = Field(None, alias="utilization.max", description="overrides target + boundary")
    utilization_min: float | None = Field(None, alias="utilization.min", description="overrides target - boundary")
    scale_down_interval: float = _dur(
        3600.0, "scale-down.interval", "a scale-down must be wanted this long (0 = immediate)"
    )
    vertex_min_parallelism: int = Field(1, alias="vertex.min-parallelism", ge=1)
    vertex_max_parallelism: int = Field(200, alias="vertex.max-parallelism", ge=1)
    scale_down_max_factor: float = Field(0.6, alias="scale-down.max-factor", ge=0, le=1)
    scale_up_max_factor: float = Field(100000.0, alias="scale-up.max-factor", ge=0)
    catch_up_duration: float = _dur(1800.0, "catch-up.duration", "time to drain the lag after a rescale")
    restart_time: float = _dur(300.0, "restart.time", "expected downtime of a rescale, budgeted as extra input")
    backlog_processing_lag_threshold: float = _dur(
        300.0, "backlog-processing.lag-threshold", "lag (seconds of input) above which no scale-down happens"
    )
    observed_tpr_lag_threshold: float = _dur(
        30.0, "observed-true-processing-rate.lag-threshold", "lag (seconds of input) to measure the observed TPR"
    )
    observed_tpr_switch_threshold: float = Field(0.15, alias="observed-true-processing-rate.switch-threshold", ge=0)
    observed_tpr_min_observations: int = Field(2, alias="observed-true-processing-rate.min-observations", ge=1)
    scaling_effectiveness_detection_enabled: bool = Field(False, alias="scaling.effectiveness.detection.enabled")
    scaling_effectiveness_threshold: float = Field(0.1, alias="scaling.effectiveness.threshold", ge=0)
    busy_time_aggregator: Literal["MAX", "AVG", "MIN"] = Field("MAX", alias="metrics.busy-time.aggregator")
    parallelism_alignment_mode: AlignmentMode | None = Field(
        None,
        alias="scaling.parallelism-alignment.mode",
        description="BALANCED (default), EVENLY_SPREAD, OFF; DIVISORS_UP_TO_HALF = release 1.6's rule",
    )
    key_group_partitions_adjust_mode: LegacyAdjustMode | None = Field(
        None,
        alias="scaling.key-group.partitions.adjust.mode",
        description="deprecated key: used only when the alignment mode is not given; blocks when nothing aligns",
    )
    scale_up_grace_period: float = _dur(
        0.0, "scale-up.grace-period", "no scale-down of a vertex this long after its scale-up (release 1.6)"
    )
    observed_true_processing_rate: bool = Field(
        True, description="measure the observed TPR of sources catching up (not in release 1.6)"
    )

    def alignment(self) -> str:
        """The alignment rule in force (ParallelismAligner.resolve)."""
        if self.parallelism_alignment_mode is not None:
            return self.parallelism_alignment_mode
        if self.key_group_partitions_adjust_mode is not None:
            return f"LEGACY_{self.key_group_partitions_adjust_mode}"
        return "BALANCED"

    @model_validator(mode="before")
    @classmethod
    def _keys_and_preset(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {(k[len(KEY_PREFIX):] if isinstance(k, str) and k.startswith(KEY_PREFIX) else k): v
                for k, v in data.items()}  # fmt: skip
        if data.get("preset", "current") == "legacy":
            for name, value in {**LEGACY_DEFAULTS, **LEGACY_BEHAVIOUR}.items():
                alias = cls.model_fields[name].alias
                if name not in data and (alias is None or alias not in data):
                    data[name] = value
        return data

    @field_validator(
        "metrics_window", "stabilization_interval", "scale_down_interval", "catch_up_duration",
        "restart_time", "backlog_processing_lag_threshold", "observed_tpr_lag_threshold",
        "scale_up_grace_period", mode="before",
    )  # fmt: skip
    @classmethod
    def _duration(cls, value: Any) -> float:
        return parse_duration(value)

    def effective(self) -> dict[str, Any]:
        """The values a run used, under their documented keys (recorded in decisions)."""
        out: dict[str, Any] = {"preset": self.preset, "release": RELEASES[self.preset],
                               "alignment": self.alignment()}
        for name, info in type(self).model_fields.items():
            if name != "preset":
                out[info.alias or name] = getattr(self, name)
        return out
