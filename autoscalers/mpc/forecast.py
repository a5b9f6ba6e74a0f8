"""Disturbance forecast of the MPC (De Matteis & Mencagli, sec. 3.1 and 5.3): Holt-Winters."""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np

from autoscalers.mpc.config import MPCConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Smoothing:
    """Holt-Winters smoothing parameters from the last optimised fit (reused between refits)."""

    params: dict[str, float]
    seasonal: int | None


def holt_winters_forecast(
    series: np.ndarray, horizon: int, cfg: MPCConfig, reuse: Smoothing | None = None
) -> tuple[np.ndarray, Smoothing | None]:
    """Forecast `horizon` steps; the last value repeated when the history is short or the fit fails.

    Optimising the smoothing parameters costs ~60-90 ms of CPU in statsmodels,
    filtering with given ones ~2-4 ms; `reuse` skips the optimisation (the MPC
    re-optimises every `refit_every` steps). Returns the forecast and the
    parameters used.
    """
    y = np.asarray(series, dtype=float)[-cfg.history_window :]
    last = float(y[-1]) if len(y) else 0.0
    if len(y) < cfg.min_history or np.allclose(y, y[0]):
        return np.full(horizon, max(0.0, last)), reuse
    from statsmodels.tsa.holtwinters import ExponentialSmoothing  # heavy: import on first use

    seasonal = cfg.seasonal_periods if cfg.seasonal_periods and len(y) >= 2 * cfg.seasonal_periods + 2 else None
    if reuse is not None and reuse.seasonal != seasonal:
        reuse = None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = ExponentialSmoothing(
                y,
                trend="add",
                seasonal="add" if seasonal else None,
                seasonal_periods=seasonal,
                initialization_method="estimated",
            )
            fit = model.fit(**reuse.params, optimized=False) if reuse else model.fit()
            fc = np.asarray(fit.forecast(horizon), dtype=float)
            keys = ("smoothing_level", "smoothing_trend", "smoothing_seasonal")
            values = {k: fit.params.get(k) for k in keys}
            used = Smoothing({k: float(v) for k, v in values.items() if v is not None and np.isfinite(v)}, seasonal)
    except (ValueError, np.linalg.LinAlgError) as exc:
        log.warning("MPC: Holt-Winters fit on %d points failed (%s); forecasting the last value", len(y), exc)
        return np.full(horizon, max(0.0, last)), None
    if not np.all(np.isfinite(fc)):
        log.warning("MPC: Holt-Winters forecast not finite; forecasting the last value")
        return np.full(horizon, max(0.0, last)), None
    return np.maximum(fc, 0.0), used
