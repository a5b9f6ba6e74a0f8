"""MEAD (Russo Russo et al. 2021): MAP fitting, MAP/PH/1 queues, the greedy planner.

`config` is light (validating an experiment imports only it); the rest loads on use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "MEADConfig": "autoscalers.mead.config",
    "MEAD": "autoscalers.mead.scaler",
    "Model": "autoscalers.mead.network",
    "greedy": "autoscalers.mead.network",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
