"""Arrow columns to and from numpy without importing pandas or pyarrow.compute.

pyarrow imports pandas, when it is installed, the first time most conversions meet a Python object
or a numpy array (`pa.array`, `pa.table`, `to_numpy`, `pq.read_table`, Python scalars in compute
calls): its pandas shim looks for pandas types. That import costs about as much as a whole 140-minute
`sim` run; `pyarrow.compute` (any `cast`, `take`, `sort_by`, `dictionary_encode`) costs a third of one.
The run record is therefore written and summarised through these buffer-level helpers, with numpy
doing the sorting and the string handling, so `bench run` pays for neither; analysis and figures,
which want DataFrames, still call `to_pandas()`. `tests/core/test_startup.py` keeps a sim run free of
pandas, and `tests/core/test_arrow.py` pins these helpers against pyarrow's own conversions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

_NUMPY_TYPES = {pa.float64(): np.float64, pa.float32(): np.float32, pa.int64(): np.int64, pa.int32(): np.int32,
                pa.int16(): np.int16, pa.int8(): np.int8}


def floats(values: Any) -> pa.Array:
    """float64 column."""
    arr = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(arr), [None, pa.py_buffer(arr)])


def int32s(values: Any) -> pa.Array:
    """int32 column."""
    arr = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(arr), [None, pa.py_buffer(arr)])


def strings_from_codes(codes: Any, categories: Sequence[str]) -> pa.Array:
    """String column whose row i is `categories[codes[i]]` (vectorised: cheap for a long column of few names).

    The names are laid out as a (names, longest) byte matrix; each row takes its name's line and a mask keeps
    its bytes: a few bytes per row, where gathering through per-byte int64 indices took 24."""
    codes = np.asarray(codes, dtype=np.int64)
    encoded = [str(c).encode() for c in categories]
    cat_len = np.array([len(b) for b in encoded], dtype=np.int64)
    longest = int(cat_len.max()) if len(encoded) else 0
    matrix = np.zeros((max(1, len(encoded)), max(1, longest)), dtype=np.uint8)
    for row, name in zip(matrix, encoded, strict=False):
        row[: len(name)] = np.frombuffer(name, dtype=np.uint8)
    lengths = cat_len[codes] if len(codes) else np.zeros(0, dtype=np.int64)
    offsets = np.zeros(len(codes) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise ValueError("string column over 2 GB")
    keep = np.arange(matrix.shape[1]) < lengths[:, None] if len(codes) else np.zeros((0, matrix.shape[1]), bool)
    data = np.ascontiguousarray(matrix[codes][keep]) if len(codes) else np.zeros(0, dtype=np.uint8)
    return pa.Array.from_buffers(pa.string(), len(codes),
                                 [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)])


def encode(values: Iterable[str]) -> tuple[np.ndarray, list[str]]:
    """(codes, categories) of a sequence of str, categories in first-seen order."""
    categories: dict[str, int] = {}
    items = [str(v) for v in values]
    codes = np.fromiter((categories.setdefault(v, len(categories)) for v in items), dtype=np.int64, count=len(items))
    return codes, list(categories)


def strings(values: Iterable[str]) -> pa.Array:
    """String column from any iterable of str."""
    return strings_from_codes(*encode(values))


def read_parquet(path: Path, dictionary: Sequence[str] = ()) -> pa.Table:
    """A whole parquet file (`pq.read_table` goes through pyarrow.dataset, which imports pandas).

    Columns named in `dictionary` come back dictionary-encoded, straight from the file's dictionary pages:
    for a long column of a few names (the record's metric and operator) that skips building every string,
    and `codes` reads such a column without looking at a single string row."""
    return pq.ParquetFile(path, read_dictionary=list(dictionary) or None).read()


def plain_strings(table: pa.Table) -> pa.Table:
    """`table` with its dictionary-encoded string columns decoded (a cast: imports pyarrow.compute)."""
    if not any(pa.types.is_dictionary(f.type) for f in table.schema):
        return table
    schema = pa.schema([f.with_type(f.type.value_type) if pa.types.is_dictionary(f.type) else f
                        for f in table.schema], metadata=table.schema.metadata)
    return table.cast(schema)


def _one_array(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of a non-empty column."""
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks)
    return column


def _validity(arr: pa.Array) -> np.ndarray:
    """True where a value is present."""
    if not arr.null_count:
        return np.ones(len(arr), dtype=bool)
    bits = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
    return bits[arr.offset:arr.offset + len(arr)].astype(bool)


def numbers(column: pa.Array | pa.ChunkedArray, dtype: Any = np.float64) -> np.ndarray:
    """A numeric column as a numpy array (nulls become NaN for float columns)."""
    if len(column) == 0:
        return np.empty(0, dtype=dtype)
    arr = _one_array(column)
    try:
        np_dtype = _NUMPY_TYPES[arr.type]
    except KeyError:
        raise TypeError(f"not a numeric column: {arr.type}") from None
    n, offset = len(arr), arr.offset
    data = arr.buffers()[1]
    out = (np.frombuffer(data, dtype=np_dtype)[offset:offset + n] if data is not None and n
           else np.empty(0, dtype=np_dtype)).astype(dtype, copy=True)
    if arr.null_count:
        if not np.issubdtype(out.dtype, np.floating):
            raise ValueError(f"{arr.type} column has {arr.null_count} null(s); no NaN to stand for them")
        out[~_validity(arr)] = np.nan
    return out


def codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """A string column as (codes, categories): row i is `categories[codes[i]]`, categories sorted, null as ""."""
    if pa.types.is_dictionary(column.type) and column.type.value_type in (pa.string(), pa.large_string()):
        return _dictionary_codes(column)
    if column.type not in (pa.string(), pa.large_string()):
        raise TypeError(f"not a string column: {column.type}")
    if len(column) == 0:
        return np.zeros(0, dtype=np.int64), []
    arr = _one_array(column)
    n, offset = len(arr), arr.offset
    off_type = np.int64 if arr.type == pa.large_string() else np.int32
    offs = np.frombuffer(arr.buffers()[1], dtype=off_type)[offset:offset + n + 1].astype(np.int64)
    raw = arr.buffers()[2]
    data = np.frombuffer(raw, dtype=np.uint8) if raw is not None else np.zeros(0, dtype=np.uint8)
    lengths = np.diff(offs)
    lengths[~_validity(arr)] = 0
    width = int(lengths.max()) if n else 0
    fixed = np.zeros((n, max(1, width)), dtype=np.uint8)
    rows = np.repeat(np.arange(n), lengths)
    cols = np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    fixed[rows, cols] = data[np.repeat(offs[:-1], lengths) + cols]
    as_bytes = fixed.view(f"S{max(1, width)}").ravel()  # trailing NULs drop, as for any numpy bytes
    categories, inverse = np.unique(as_bytes, return_inverse=True)
    return inverse.astype(np.int64).ravel(), [c.decode() for c in categories]


def _dictionary_codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """`codes` of a dictionary-encoded string column: its indices remapped onto the sorted strings that occur
    (only the dictionaries' few strings are looked at, never a row's)."""
    if len(column) == 0:
        return np.zeros(0, dtype=np.int64), []
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts: list[tuple[np.ndarray, list[str]]] = []
    for chunk in chunks:
        values = ["" if v is None else v for v in chunk.dictionary.to_pylist()]
        ind = chunk.indices
        index = np.frombuffer(ind.buffers()[1], dtype=_NUMPY_TYPES[ind.type])[ind.offset:ind.offset + len(ind)]
        index = index.astype(np.int64)
        if chunk.null_count:  # a null row reads as "" (like `codes` of a plain column)
            index[~_validity(chunk)] = len(values)
            values.append("")
        parts.append((index, values))
    categories = sorted({v for _, values in parts for v in values})
    rank = {c: i for i, c in enumerate(categories)}
    out = np.concatenate([np.array([rank[v] for v in values], dtype=np.int64)[index] for index, values in parts])
    present = np.bincount(out, minlength=len(categories)) > 0  # categories no row uses are left out
    if not present.all():
        out = (np.cumsum(present) - 1)[out]
        categories = [c for c, p in zip(categories, present, strict=True) if p]
    return out, categories
