"""The Flink Kubernetes Operator's autoscaler, cut along the operator's own seams.

`config` is light (validating an experiment imports only it); the rest loads on use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "FlinkOperatorConfig": "autoscalers.flink_operator.config",
    "LEGACY_DEFAULTS": "autoscalers.flink_operator.config",
    "LEGACY_BEHAVIOUR": "autoscalers.flink_operator.config",
    "RELEASES": "autoscalers.flink_operator.config",
    "parse_duration": "autoscalers.flink_operator.config",
    "FlinkOperator": "autoscalers.flink_operator.scaler",
    "align_parallelism": "autoscalers.flink_operator.vertex_scaler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
