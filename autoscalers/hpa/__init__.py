"""Kubernetes' Horizontal Pod Autoscaler made operator-based: HPA-CPU and HPA-Varga."""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "HPAConfig": "autoscalers.hpa.config",
    "HPACPUConfig": "autoscalers.hpa.config",
    "HPAVargaConfig": "autoscalers.hpa.config",
    "HPABehavior": "autoscalers.hpa.config",
    "HPA": "autoscalers.hpa.scaler",
    "HPACPU": "autoscalers.hpa.scaler",
    "HPAVarga": "autoscalers.hpa.scaler",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
