"""gesscale: `config` is light (validating an experiment imports only it); the rest loads on use."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "GesscaleConfig": "autoscalers.gesscale.config",
    "Gesscale": "autoscalers.gesscale.scaler",
    "CalibrationSample": "autoscalers.gesscale.scaler",
    "fit_mst": "autoscalers.gesscale.scaler",
    "MSTModel": "autoscalers.gesscale.scaler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
