"""Gesscale's model-based baseline MDL-NLUnaware (Arkian et al. 2021, sec. V-A c).

"A simplified version of Gesscale which relies on the latency-unaware performance model
presented in Equation 2. MDL-NLUnaware therefore chooses resources to be added to or removed
from the system out of an unsorted list of available resources." Everything else is
Gesscale's (Alg. 1-4, period, thresholds): the model is MST(n) = alpha n whatever the number
of calibration samples (alpha by least squares through the origin over them), and the node
choice is the backend's (`NodeChoice.ANY`: random among the free nodes). The threshold
baselines THR-NLUnaware / THR-NLAware are in `autoscalers.baselines.thresholds`.
"""

from __future__ import annotations

import numpy as np

from autoscalers.baselines.config import MDLNLUnawareConfig
from autoscalers.gesscale.scaler import Gesscale, MSTModel
from harness.vocabulary import NodeChoice


class MDLNLUnaware(Gesscale):
    name = "mdl-nlunaware"
    Config = MDLNLUnawareConfig
    config: MDLNLUnawareConfig
    placement = NodeChoice.ANY

    def model(self, name: str) -> MSTModel | None:
        """Eq. 2, MST(n) = alpha n: beta = 1 and gamma = 0 however many samples there are."""
        samples = list(self.samples.get(name, {}).values())
        if not samples:
            return None
        n = np.array([s.n for s in samples], dtype=float)
        ct = np.array([s.mst for s in samples], dtype=float)
        return MSTModel(alpha=float(np.sum(n * ct) / np.sum(n * n)), samples=len(samples))
