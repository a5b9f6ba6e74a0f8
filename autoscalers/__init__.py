"""Autoscalers behind one interface, registered by name without importing them.

`REGISTRY` maps the CLI name to where its typed config lives and where its implementation
lives. Validating an experiment (`config_class`, `available`) imports only the config module
(pydantic and `autoscalers.config`); the implementation - numpy queueing models, scipy,
statsmodels, networkx - is imported when an autoscaler is created. An implementation that
fails to import is an `AutoscalerImportError` naming the autoscaler and the import error, not
an "unknown autoscaler".
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from autoscalers.base import Autoscaler
    from autoscalers.config import AutoscalerConfig, RunContext


class Entry(NamedTuple):
    """Where an autoscaler's config model and its implementation live ("module:Class")."""

    config: str
    implementation: str


REGISTRY: dict[str, Entry] = {
    "hpa-cpu": Entry("autoscalers.hpa.config:HPACPUConfig", "autoscalers.hpa.scaler:HPACPU"),
    "hpa-varga": Entry("autoscalers.hpa.config:HPAVargaConfig", "autoscalers.hpa.scaler:HPAVarga"),
    "dhalion": Entry("autoscalers.dhalion:DhalionConfig", "autoscalers.dhalion:Dhalion"),
    "ds2": Entry("autoscalers.ds2:DS2Config", "autoscalers.ds2:DS2"),
    "flink-operator": Entry("autoscalers.flink_operator.config:FlinkOperatorConfig",
                            "autoscalers.flink_operator.scaler:FlinkOperator"),
    "gesscale": Entry("autoscalers.gesscale.config:GesscaleConfig", "autoscalers.gesscale.scaler:Gesscale"),
    "flink-er": Entry("autoscalers.flink_er.config:FlinkERConfig", "autoscalers.flink_er.scaler:FlinkER"),
    "mpc": Entry("autoscalers.mpc.config:MPCConfig", "autoscalers.mpc.scaler:MPC"),
    "mead": Entry("autoscalers.mead.config:MEADConfig", "autoscalers.mead.scaler:MEAD"),
    "static": Entry("autoscalers.static:StaticConfig", "autoscalers.static:Static"),
    # the seed papers' baselines (autoscalers/baselines)
    "thr-nlunaware": Entry("autoscalers.baselines.config:THRConfig", "autoscalers.baselines.thresholds:THRNLUnaware"),
    "thr-nlaware": Entry("autoscalers.baselines.config:THRConfig", "autoscalers.baselines.thresholds:THRNLAware"),
    "mdl-nlunaware": Entry("autoscalers.baselines.config:MDLNLUnawareConfig",
                           "autoscalers.baselines.gesscale_model:MDLNLUnaware"),
    "rule-based": Entry("autoscalers.baselines.config:RuleBasedConfig", "autoscalers.baselines.thresholds:RuleBased"),
    "spl-strategy": Entry("autoscalers.baselines.config:SPLConfig", "autoscalers.baselines.spl:SPLStrategy"),
    "mead-mg1": Entry("autoscalers.baselines.config:MG1Config", "autoscalers.baselines.mead_models:MEADMG1"),
    "mead-gig1": Entry("autoscalers.baselines.config:KingmanConfig", "autoscalers.baselines.mead_models:MEADKingman"),
    "mead-threshold": Entry("autoscalers.baselines.config:MEADThresholdConfig",
                            "autoscalers.baselines.thresholds:MEADThreshold"),
}  # fmt: skip


class UnknownAutoscaler(KeyError):
    """A name that is not in the registry."""

    def __str__(self) -> str:
        return f"unknown autoscaler {self.args[0]!r}; valid choices: {', '.join(available())}"


class AutoscalerImportError(ImportError):
    """A registered autoscaler whose module could not be imported (a missing dependency, a bug)."""


def available() -> list[str]:
    """Every registered name (nothing is imported)."""
    return list(REGISTRY)


def _load(name: str, target: str, what: str) -> Any:
    if name not in REGISTRY:
        raise UnknownAutoscaler(name)
    module, attr = target.split(":")
    try:
        return getattr(import_module(module), attr)
    except ImportError as exc:
        raise AutoscalerImportError(f"autoscaler {name!r}: its {what} {target} could not be imported: {exc}") from exc


def config_class(name: str) -> type[AutoscalerConfig]:
    """The typed parameters of `name`, imported without the implementation."""
    return _load(name, REGISTRY[name].config if name in REGISTRY else "", "config")  # type: ignore[no-any-return]


def autoscaler_class(name: str) -> type[Autoscaler]:
    """The implementation of `name` (imported on first use)."""
    return _load(name, REGISTRY[name].implementation if name in REGISTRY else "", "implementation")  # type: ignore[no-any-return]


def create(name: str, params: dict | None = None, context: RunContext | None = None) -> Autoscaler:
    """An autoscaler with validated parameters and what the run tells it (SLO, loop period, cool-down)."""
    cls = autoscaler_class(name)
    return cls(cls.Config(**(params or {})), context)


_BASE_NAMES = ("AppliedAction", "Autoscaler", "History", "ScalingDecision")
_CONFIG_NAMES = ("AutoscalerConfig", "RunContext")


def __getattr__(name: str) -> Any:
    # The interface types live in autoscalers.base, which imports the metrics snapshot; the config types in
    # autoscalers.config (pydantic models): both loaded on use, so naming the autoscalers (`bench list`) builds
    # no model.
    if name in _BASE_NAMES:
        return getattr(import_module("autoscalers.base"), name)
    if name in _CONFIG_NAMES:
        return getattr(import_module("autoscalers.config"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "REGISTRY",
    "AppliedAction",
    "Autoscaler",
    "AutoscalerConfig",
    "AutoscalerImportError",
    "Entry",
    "History",
    "RunContext",
    "ScalingDecision",
    "UnknownAutoscaler",
    "autoscaler_class",
    "available",
    "config_class",
    "create",
]
