"""Which columns of the per-run summary are keys and which are measures, without importing pandas.

`aggregate` (pandas) and `bench compare` (pyarrow and numpy only, to start quickly) both pick the
summary's metric columns by these names: a numeric or boolean column that is not a key is a metric.
"""

from __future__ import annotations

CELL_KEYS = ["matrix", "query", "pattern", "autoscaler", "params", "cell_id", "config_hash"]
# summary columns that identify or describe a run rather than measure it
NOT_METRICS = frozenset(CELL_KEYS) | {"run_id", "repetition", "seed", "experiment", "backend", "status",
                                      "status_reason"}
