"""How a mean and its interval are printed: `mean ± half-width`, rounded to what the interval allows.

The half-width gets two significant figures (one when the second is a zero) and the mean is rounded
to the same decimal place
(the usual rule for reporting a measurement with its uncertainty), so `12.3456 ± 0.0123` prints as
`12.346 ± 0.012` and `25,432 ± 1,234` as `25,400 ± 1,200`. An interval that is only floating-point
noise (a spread of 1e-15 around 1: every repetition gave the same value) is no interval: `1`.
"""

from __future__ import annotations

import math

PM_LEGEND = ("`±` is the half-width of the 95 % confidence interval of the mean over a cell's repetitions "
             "(Student t, n - 1 degrees of freedom); n = runs that count (interrupted runs are left out). "
             "No `±`: one run, or every repetition gave the same value.")

NOISE = 1e-9  # an interval narrower than this fraction of the value is rounding noise


def _missing(v: float | None) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def plain(value: float) -> str:
    """Three significant figures; whole numbers as they are; thousands grouped."""
    v = float(value)
    if math.isinf(v):
        return "∞" if v > 0 else "-∞"
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == int(v):
        return f"{int(v)}"
    return f"{v:.3g}"


def _decimals(ci: float) -> int:
    """Decimal places that keep two significant figures of `ci` (negative: round to tens, hundreds ...);
    one figure when the second would be a zero (`10 ± 1`, not `10.0 ± 1.0`)."""
    d = 1 - int(math.floor(math.log10(abs(ci))))
    return d - 1 if round(ci, d) == round(ci, d - 1) else d


def _at(value: float, decimals: int) -> str:
    rounded = round(value, decimals)
    if decimals <= 0:
        return f"{rounded:,.0f}"
    return f"{rounded:,.{decimals}f}"


def with_ci(value: float | None, ci: float | None = None) -> str:
    """`mean ± half-width` rounded to the interval's precision; `-` when the mean was not measured."""
    if _missing(value):
        return "-"
    v = float(value)  # type: ignore[arg-type]
    if _missing(ci) or not math.isfinite(float(ci)) or float(ci) <= 0:  # type: ignore[arg-type]
        return plain(v)
    c = float(ci)  # type: ignore[arg-type]
    if c <= NOISE * abs(v):
        return plain(v)
    d = _decimals(c)
    return f"{_at(v, d)} ± {_at(c, d)}"
