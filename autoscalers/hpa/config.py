"""Parameters of the HPA baselines: the thesis' settings and Kubernetes' `autoscaling/v2` knobs.

Light: validating an experiment imports only this module. Keys of `behavior` accept the
Kubernetes spelling (`scaleUp`, `stabilizationWindowSeconds`, `selectPolicy`, `periodSeconds`)
as well as snake_case, so a `behavior:` block can be pasted from an HPA manifest.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from autoscalers.config import AutoscalerConfig

# Kubernetes' defaults for a behavior section (pkg/apis/autoscaling/v2/defaults.go): scale up by
# at most max(4 pods, 100 %) per 15 s with no stabilisation, scale down by up to 100 % per 15 s.
DEFAULT_SCALE_UP_POLICIES = ({"type": "Pods", "value": 4, "periodSeconds": 15},
                             {"type": "Percent", "value": 100, "periodSeconds": 15})  # fmt: skip
DEFAULT_SCALE_DOWN_POLICIES = ({"type": "Percent", "value": 100, "periodSeconds": 15},)


class _K8sModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)


class HPAScalingPolicy(_K8sModel):
    """One rate limit: at most `value` pods (or percent of the size at the period's start) per period."""

    type: Literal["Pods", "Percent"]
    value: int = Field(gt=0)
    period_seconds: int = Field(alias="periodSeconds", gt=0, le=1800)


class HPAScalingRules(_K8sModel):
    """One direction of `behavior` (HPAScalingRules).

    `stabilization_window_seconds` None = Kubernetes' default for the direction (0 up, the
    controller's window down); `policies` None = Kubernetes' default policies; `tolerance`
    None = the HPA's `tolerance` (per-direction tolerance is Kubernetes 1.33+).
    """

    stabilization_window_seconds: float | None = Field(None, alias="stabilizationWindowSeconds", ge=0, le=3600)
    select_policy: Literal["Max", "Min", "Disabled"] = Field("Max", alias="selectPolicy")
    policies: tuple[HPAScalingPolicy, ...] | None = None
    tolerance: float | None = Field(None, ge=0)


class HPABehavior(_K8sModel):
    """`spec.behavior` of an `autoscaling/v2` HorizontalPodAutoscaler."""

    scale_up: HPAScalingRules = Field(default_factory=HPAScalingRules, alias="scaleUp")
    scale_down: HPAScalingRules = Field(default_factory=HPAScalingRules, alias="scaleDown")

    def up_policies(self) -> tuple[HPAScalingPolicy, ...]:
        if self.scale_up.policies is not None:
            return self.scale_up.policies
        return tuple(HPAScalingPolicy.model_validate(p) for p in DEFAULT_SCALE_UP_POLICIES)

    def down_policies(self) -> tuple[HPAScalingPolicy, ...]:
        if self.scale_down.policies is not None:
            return self.scale_down.policies
        return tuple(HPAScalingPolicy.model_validate(p) for p in DEFAULT_SCALE_DOWN_POLICIES)


class HPAConfig(AutoscalerConfig):
    """HPA core (Kanis 2023, ch. 4.4, tables 6.3/6.4) plus what `autoscaling/v2` users configure.

    Defaults are the thesis': a 300 s window over the desired values (the max wins), no
    tolerance, no rate limits. `tolerance` 0 because the thesis' HPA applies eq. 4.3 as written
    (ch. 4.4 and 6.7.3/6.7.4 name no tolerance, tables 6.3/6.4 list none, and its code,
    delftdata/espa-autoscaling, computes ceil(p * value / target) directly); Kubernetes' own
    default is 0.1 (`--horizontal-pod-autoscaler-tolerance`), set `tolerance: 0.1` to get it.
    `behavior` None keeps the thesis' window; a `behavior` section switches to Kubernetes'
    per-direction stabilisation and rate policies (`behavior: {}` = Kubernetes' defaults).
    """

    scale_down_window_s: float = Field(
        300.0, ge=0.0, description="stabilisation window (s): the highest recommendation within it is applied "
                                   "(the controller's --horizontal-pod-autoscaler-downscale-stabilization)")
    tolerance: float = Field(0.0, ge=0.0, description="keep the size while 1 - tol <= value/target <= 1 + tol")
    min_replicas: int = Field(1, ge=1, alias="minReplicas")
    max_replicas: int | None = Field(None, ge=1, alias="maxReplicas")
    behavior: HPABehavior | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, validate_by_name=True, validate_by_alias=True)

    def tolerances(self) -> tuple[float, float]:
        """(scale-down, scale-up) tolerance."""
        b = self.behavior
        down = b.scale_down.tolerance if b is not None and b.scale_down.tolerance is not None else self.tolerance
        up = b.scale_up.tolerance if b is not None and b.scale_up.tolerance is not None else self.tolerance
        return down, up


# What each `cpu_signal` of HPA-CPU reads (the option's help and the run summary say the same).
CPU_SIGNALS = {"jvm": "Status.JVM.CPU.Load (the JVM's, the thesis' signal)",
               "quota": "CPU time / task-manager CPU quota"}


class HPACPUConfig(HPAConfig):
    """HPA-CPU (Kanis 2023, ch. 6.7.3, table 6.3): CPU-utilisation target 0.7, window 300 s.

    `cpu_signal` picks the CPU reading: `jvm` is Flink's `Status.JVM.CPU.Load`, the gauge the
    thesis' HPA-CPU read from Prometheus (ch. 6.7.3). The JVM computes it against the CPUs it
    may use - inside a CPU-limited container or cgroup that is the limit, so it reads like a
    utilisation of the task manager's allotment and tops out near 0.9 under load. `quota` is
    CPU time used divided by the task manager's CPU quota, computed by the harness.
    """

    cpu_target: float = Field(0.7, gt=0.0, description="target mean CPU load of an operator's TMs")
    cpu_signal: Literal["jvm", "quota"] = Field(
        "jvm", description="; ".join(f"{k}: {v}" for k, v in CPU_SIGNALS.items()))


class HPAVargaConfig(HPAConfig):
    """HPA-Varga (Kanis 2023, ch. 4.5, 6.7.4, table 6.4; Varga et al. 2021).

    Utilisation target 0.7, relative-lag-change target 1.0, lag counts as
    growing (backpressure) above 1000 rec/s, window 300 s.
    """

    utilisation_target: float = Field(0.7, gt=0.0)
    relative_lag_change_target: float = Field(1.0, gt=0.0)
    lag_rate_backpressure_threshold: float = Field(1000.0, ge=0.0, description="records/s")
