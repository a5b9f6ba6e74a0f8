"""Which papers' tables a group of cells gets: a table is shown only where its metrics mean something.

- SPEC (Gesscale, sec. V) compares resources with the ideal: only where an ideal could be computed
  (`spec_ideal_avg` measured: the operators' capacities are known).
- SASO (De Matteis & Mencagli, sec. 5) counts control steps against the SLO: only where the runs
  had control steps (`saso_control_steps` > 0).
- MEAD (Russo Russo et al. 2021) is about vertical scaling (CPU shares against a response-time
  target): only where a vertical autoscaler ran or a task manager was given less than a whole CPU.
The thesis table, the convergence table and any other kind always apply.
"""

from __future__ import annotations

import pandas as pd

VERTICAL = {"mead", "mpc"}  # autoscalers that set CPU shares (autoscalers/base.py: cpu_share)


def _measured(cells: pd.DataFrame, column: str) -> pd.Series:
    return cells[column].astype(float).dropna() if column in cells else pd.Series(dtype=float)


def applies(kind: str, cells: pd.DataFrame) -> bool:
    if kind == "spec":
        return not _measured(cells, "spec_ideal_avg").empty
    if kind == "saso":
        return bool((_measured(cells, "saso_control_steps") > 0).any())
    if kind == "mead":
        vertical = "autoscaler" in cells and cells["autoscaler"].astype(str).isin(VERTICAL).any()
        return bool(vertical or (_measured(cells, "mead_cpu_share") < 1.0).any())
    return True


def why_not(kind: str) -> str:
    return {"spec": "no ideal resource level (operator capacities unknown)",
            "saso": "no control steps recorded",
            "mead": "no vertical scaling (every task manager had a whole CPU)"}.get(kind, "")
