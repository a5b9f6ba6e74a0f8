"""MPC (De Matteis & Mencagli): forecast, queueing models, branch & bound over the horizon.

`config` is light (validating an experiment imports only it); the rest loads on use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "MPCConfig": "autoscalers.mpc.config",
    "MPC": "autoscalers.mpc.scaler",
    "OperatorModel": "autoscalers.mpc.scaler",
    "kingman_wait": "autoscalers.mpc.scaler",
    "holt_winters_forecast": "autoscalers.mpc.forecast",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
