"""One colour per autoscaler, the same in every figure of every report and notebook.

The colour follows the autoscaler's place in the registry (`autoscalers.available()`), not its
place in one figure, so ds2 is the same blue wherever it appears. Configurations of one autoscaler
(different parameters) share its colour and differ in line style / hatch.
"""

from __future__ import annotations

from functools import cache

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf", "#393b79", "#637939"]
LINESTYLES = ["-", "--", ":", "-."]
HATCHES = ["", "//", "..", "xx", "\\\\"]


@cache
def _registry() -> tuple[str, ...]:
    try:
        import autoscalers

        return tuple(autoscalers.available())
    except Exception:  # noqa: BLE001 - colours must never stop a report
        return ()


def colour_of(autoscaler: str) -> str:
    names = _registry()
    if autoscaler in names:
        return PALETTE[names.index(autoscaler) % len(PALETTE)]
    return PALETTE[(sum(map(ord, autoscaler)) + len(names)) % len(PALETTE)]


def variant_styles(autoscalers: list[str]) -> list[tuple[str, str, str]]:
    """(colour, line style, hatch) per entry: the autoscaler's colour; the k-th configuration of it the k-th style."""
    seen: dict[str, int] = {}
    out = []
    for name in autoscalers:
        k = seen.get(name, 0)
        seen[name] = k + 1
        out.append((colour_of(name), LINESTYLES[k % len(LINESTYLES)], HATCHES[k % len(HATCHES)]))
    return out
