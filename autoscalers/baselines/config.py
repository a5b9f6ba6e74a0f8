"""The baselines' parameters, each with its paper's defaults; light, for validating experiments."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from autoscalers.config import AutoscalerConfig
from autoscalers.gesscale.config import GesscaleConfig
from autoscalers.mead.config import CpuLevels, MEADConfig

Signal = Literal["cpu", "utilisation"]


class ThresholdConfig(AutoscalerConfig):
    """A two-threshold rule: one unit more above `scale_up_above`, one less below `scale_down_below`."""

    period_s: float = Field(60.0, ge=0.0, description="act at most this often")
    signal: Signal = Field("cpu", description="cpu: CPU time / quota; utilisation: busy fraction (rho)")
    scale_up_above: float = Field(0.9, gt=0.0, description="signal above this: one unit more")
    scale_down_below: float = Field(0.5, ge=0.0, description="signal below this: one unit less")
    n_min: int = Field(1, ge=1, description="fewest replicas per operator")
    n_max: int | None = Field(None, ge=1, description="most replicas; None = key groups (sources: partitions)")

    @model_validator(mode="after")
    def _ordered(self) -> ThresholdConfig:
        if self.scale_down_below >= self.scale_up_above:
            raise ValueError(f"scale_down_below ({self.scale_down_below}) must be below scale_up_above "
                             f"({self.scale_up_above})")
        return self


class THRConfig(ThresholdConfig):
    """Gesscale sec. V-A c: CPU > 90 % -> +1, < 50 % -> -1; period: Gesscale's 1 min (sec. IV-B)."""


class RuleBasedConfig(ThresholdConfig):
    """De Matteis & Mencagli sec. 5.4, Tab. 7 "*": utilisation factor > 0.9 -> +1, < 0.8 -> -1."""

    period_s: float = Field(0.0, ge=0.0, description="act at most this often (0: every control step)")
    signal: Signal = "utilisation"
    scale_up_above: float = Field(0.9, gt=0.0, description="theta_max")
    scale_down_below: float = Field(0.8, ge=0.0, description="theta_min")


class MEADThresholdConfig(ThresholdConfig):
    """Russo Russo et al. sec. VII: CPU utilisation > U_H 0.7 -> one share level up, < U_L 0.5 -> one down."""

    period_s: float = Field(10.0, ge=0.0, description="T_A (the paper: 10 s for this policy)")
    scale_up_above: float = Field(0.7, gt=0.0, description="U_H")
    scale_down_below: float = Field(0.5, ge=0.0, description="U_L")
    levels: CpuLevels = Field((0.4, 0.55, 0.7, 0.85, 1.0), description="CPU shares, cheapest first")



class MDLNLUnawareConfig(GesscaleConfig):
    """Gesscale's parameters (sec. IV); the model is eq. 2 only (sec. V-A c)."""


class MG1Config(MEADConfig):
    """MEAD's parameters (sec. VII); the arrival model is Poisson whatever the input is."""


class KingmanConfig(MEADConfig):
    """MEAD's parameters (sec. VII); mean targets only (sec. VII-B)."""

    @model_validator(mode="after")
    def _mean_only(self) -> KingmanConfig:
        if self.target != "mean":
            raise ValueError("Kingman's formula gives no response-time distribution: target must be 'mean' "
                             "(Russo Russo et al. 2021, sec. VII-B)")
        return self


class SPLConfig(AutoscalerConfig):
    """De Matteis & Mencagli sec. 5.4: the SPL strategy of Gedik et al. with Tab. 7's best parameters."""

    congestion_threshold: float = Field(0.1, ge=0.0, le=1.0,
                                        description="congestion index (blocking fraction) above this: congested")
    sensitivity: float = Field(0.9, gt=0.0, le=1.0,
                               description="two throughputs differ significantly when min/max is below this")
    n_min: int = Field(1, ge=1, description="fewest replicas per operator")
    n_max: int | None = Field(None, ge=1, description="most replicas; None = key groups (sources: partitions)")
