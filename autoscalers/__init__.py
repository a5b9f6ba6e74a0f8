"""Autoscalers behind one interface; `REGISTRY` maps the CLI name to its class.

Classes load lazily so that `bench validate` does not pay for statsmodels or
networkx unless the experiment uses an autoscaler that needs them.
"""

from __future__ import annotations

from importlib import import_module

from autoscalers.base import (
    AppliedAction,
    Autoscaler,
    AutoscalerConfig,
    History,
    ScalingDecision,
)

REGISTRY: dict[str, str] = {
    "hpa-cpu": "autoscalers.hpa:HPACPU",
    "hpa-varga": "autoscalers.hpa:HPAVarga",
    "dhalion": "autoscalers.dhalion:Dhalion",
    "ds2": "autoscalers.ds2:DS2",
    "flink-operator": "autoscalers.flink_operator:FlinkOperator",
    "gesscale": "autoscalers.gesscale:Gesscale",
    "flink-er": "autoscalers.flink_er:FlinkER",
    "mpc": "autoscalers.mpc:MPC",
    "mead": "autoscalers.mead:MEAD",
    "static": "autoscalers.static:Static",
    # the seed papers' baselines (issue 14)
    "thr-nlunaware": "autoscalers.thresholds:THRNLUnaware",
    "thr-nlaware": "autoscalers.thresholds:THRNLAware",
    "mdl-nlunaware": "autoscalers.gesscale_baselines:MDLNLUnaware",
    "rule-based": "autoscalers.thresholds:RuleBased",
    "mead-mg1": "autoscalers.mead_baselines:MEADMG1",
    "mead-gig1": "autoscalers.mead_baselines:MEADKingman",
    "mead-threshold": "autoscalers.thresholds:MEADThreshold",
}


def available() -> list[str]:
    """Names whose module exists (an autoscaler still being written is not offered)."""
    out = []
    for name in REGISTRY:
        try:
            autoscaler_class(name)
        except (ImportError, AttributeError):
            continue
        out.append(name)
    return out


def autoscaler_class(name: str) -> type[Autoscaler]:
    if name not in REGISTRY:
        raise KeyError(name)
    module, cls = REGISTRY[name].split(":")
    return getattr(import_module(module), cls)


def create(name: str, params: dict | None = None) -> Autoscaler:
    cls = autoscaler_class(name)
    return cls(cls.Config(**(params or {})))


__all__ = [
    "REGISTRY",
    "AppliedAction",
    "Autoscaler",
    "AutoscalerConfig",
    "History",
    "ScalingDecision",
    "autoscaler_class",
    "available",
    "create",
]
