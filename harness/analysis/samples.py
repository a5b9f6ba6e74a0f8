"""A batch of runs' samples as flat numpy arrays, read with pyarrow.

`read_samples` reads the timeseries.parquet files of a batch of runs (columns
pruned, dictionary-encoded names) into arrays sorted by (run, metric, operator,
ts) - the order `record.write_run_record` writes, so normally nothing is sorted
here - and marks where each series starts and ends. The reductions work on these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from harness.analysis.loader import RunRef

COLUMNS = ["ts", "metric", "operator", "subtask", "value"]


def read_timeseries(ref: RunRef) -> pd.DataFrame:
    """One run's job- and operator-level samples as a frame (for notebooks and checks)."""
    if ref.timeseries_path is None:
        return pd.DataFrame({"ts": [], "metric": [], "operator": [], "subtask": [], "value": []})
    df = pq.read_table(ref.timeseries_path, columns=COLUMNS).to_pandas()
    return df[df["value"].notna()]


@dataclass(frozen=True)
class Samples:
    """A batch's samples (subtask -1) as flat arrays sorted by (rid, metric, operator, ts).

    A NaN value is a gap marker (`metrics` conventions: the series was not measured from there to its
    next sample); `measured()` is the same batch without them.

    `metric` and `operator` are codes into `metric_names` / `operator_names`
    (sorted, so code order is name order). Series are the runs of equal
    (rid, metric, operator): `starts[g]`..`ends[g]` inclusive.
    """

    rid: np.ndarray
    metric: np.ndarray
    operator: np.ndarray
    ts: np.ndarray
    value: np.ndarray
    metric_names: list[str]
    operator_names: list[str]
    starts: np.ndarray
    ends: np.ndarray

    def measured(self) -> Samples:
        """The measured samples only (gap markers dropped), regrouped."""
        keep = ~np.isnan(self.value)
        if keep.all():
            return self
        rid, metric, op = self.rid[keep], self.metric[keep], self.operator[keep]
        starts = boundaries(rid, metric, op)
        ends = np.append(starts[1:], int(keep.sum())) - 1
        return Samples(rid, metric, op, self.ts[keep], self.value[keep], self.metric_names, self.operator_names,
                       starts, ends)

    def code(self, names: list[str], name: str) -> int:
        """A name's code, or -1 when no sample of this batch has it."""
        try:
            return names.index(name)
        except ValueError:
            return -1


def _dictionary_codes(column: pa.ChunkedArray) -> list[tuple[list[str], np.ndarray]]:
    """(dictionary, indices) per chunk of a string column read as a dictionary (nulls -> "")."""
    out = []
    for chunk in column.chunks:
        if not pa.types.is_dictionary(chunk.type):
            chunk = chunk.dictionary_encode()
        names = [str(s) for s in chunk.dictionary.to_pylist()]
        indices = chunk.indices
        if indices.null_count:
            names.append("")
            indices = indices.fill_null(len(names) - 1)
        out.append((names, indices.to_numpy(zero_copy_only=False)))
    return out


def read_samples(paths: Sequence[tuple[int, Path]]) -> Samples:
    """Read a batch of timeseries files into `Samples` (one pass per file, columns pruned)."""
    parts: list[tuple[int, np.ndarray, list[tuple[list[str], np.ndarray]],
                      list[tuple[list[str], np.ndarray]], np.ndarray, np.ndarray]] = []
    metric_names: set[str] = set()
    op_names: set[str] = set()
    for rid, path in paths:
        # ParquetFile rather than read_table: half the fixed cost per file, which dominates for small runs
        table = pq.ParquetFile(path, read_dictionary=["metric", "operator"], pre_buffer=False).read(
            columns=COLUMNS, use_threads=False)
        if table.num_rows == 0:
            continue
        subtask = table.column("subtask").to_numpy()
        value = table.column("value").to_numpy()
        keep = subtask == -1  # NaN values stay: they mark gaps
        metrics, ops = _dictionary_codes(table.column("metric")), _dictionary_codes(table.column("operator"))
        for names, _ in metrics:
            metric_names.update(names)
        for names, _ in ops:
            op_names.update(names)
        parts.append((rid, keep, metrics, ops, table.column("ts").to_numpy(), value))
    m_sorted, o_sorted = sorted(metric_names), sorted(op_names)
    m_code = {n: i for i, n in enumerate(m_sorted)}
    o_code = {n: i for i, n in enumerate(o_sorted)}

    def recode(chunks: list[tuple[list[str], np.ndarray]], codes: dict[str, int]) -> np.ndarray:
        return np.concatenate([np.array([codes[n] for n in names], dtype=np.int32)[idx] for names, idx in chunks])

    rid_a, m_a, o_a, ts_a, v_a = [], [], [], [], []
    for rid, keep, metrics, ops, ts, value in parts:
        rid_a.append(np.full(int(keep.sum()), rid, dtype=np.int64))
        m_a.append(recode(metrics, m_code)[keep])
        o_a.append(recode(ops, o_code)[keep])
        ts_a.append(ts[keep])
        v_a.append(value[keep])
    if not parts:
        empty_i, empty_f = np.array([], dtype=np.int64), np.array([], dtype=float)
        return Samples(empty_i, empty_i, empty_i, empty_f, empty_f, [], [], empty_i, empty_i)
    rid_c, m_c, o_c = np.concatenate(rid_a), np.concatenate(m_a), np.concatenate(o_a)
    ts_c, v_c = np.concatenate(ts_a).astype(float), np.concatenate(v_a).astype(float)
    if not _is_sorted(rid_c, m_c, o_c, ts_c):
        order = np.lexsort((ts_c, o_c, m_c, rid_c))
        rid_c, m_c, o_c, ts_c, v_c = rid_c[order], m_c[order], o_c[order], ts_c[order], v_c[order]
    starts = boundaries(rid_c, m_c, o_c)
    ends = np.append(starts[1:], len(ts_c)) - 1
    return Samples(rid_c, m_c, o_c, ts_c, v_c, m_sorted, o_sorted, starts, ends)


def _is_sorted(rid: np.ndarray, m: np.ndarray, o: np.ndarray, ts: np.ndarray) -> bool:
    if len(ts) < 2:
        return True
    d_r, d_m, d_o, d_t = np.diff(rid), np.diff(m), np.diff(o), np.diff(ts)
    ok = (d_r > 0) | ((d_r == 0) & ((d_m > 0) | ((d_m == 0) & ((d_o > 0) | ((d_o == 0) & (d_t >= 0))))))
    return bool(ok.all())


def boundaries(*keys: np.ndarray) -> np.ndarray:
    """Indices where any of the (sorted) keys changes: the starts of the groups."""
    n = len(keys[0])
    if n == 0:
        return np.array([], dtype=np.int64)
    new = np.zeros(n, dtype=bool)
    new[0] = True
    for k in keys:
        new[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(new)


