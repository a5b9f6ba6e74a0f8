"""The `pattern.arrivals:` block (how records arrive around the pattern's rate), without numpy: validating an
experiment needs the model, not the arrival processes of `workloads.arrivals`, which use it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

ArrivalKind = Literal["poisson", "map", "deterministic"]


class ArrivalConfig(BaseModel):
    """The `pattern.arrivals:` block: how records arrive around the pattern's rate."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: ArrivalKind = "poisson"
    burst_factor: float = Field(4.0, ge=1.0, description="map: burst-state rate / quiet-state rate")
    mean_burst_s: PositiveFloat = Field(10.0, description="map: mean sojourn in the burst state (s)")
    mean_quiet_s: PositiveFloat = Field(50.0, description="map: mean sojourn in the quiet state (s)")

    @property
    def burst_probability(self) -> float:
        """Stationary probability of the burst state."""
        return self.mean_burst_s / (self.mean_burst_s + self.mean_quiet_s)

    def multipliers(self) -> tuple[float, float]:
        """(quiet, burst) rate multipliers whose time average is 1."""
        pb = self.burst_probability
        quiet = 1.0 / (1.0 - pb + self.burst_factor * pb)
        return quiet, self.burst_factor * quiet
