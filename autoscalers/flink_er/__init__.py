"""flink_er: `config` is light (validating an experiment imports only it); the rest loads on use."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "FlinkERConfig": "autoscalers.flink_er.config",
    "FlinkER": "autoscalers.flink_er.scaler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
