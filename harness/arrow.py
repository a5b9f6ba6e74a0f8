"""Arrow columns to and from numpy without importing pandas.

pyarrow imports pandas, when it is installed, the first time most conversions meet a Python object
or a numpy array (`pa.array`, `pa.table`, `to_numpy`, `pq.read_table`, Python scalars in compute
calls): its pandas shim looks for pandas types. That import costs about as much as a whole 140-minute
`sim` run. The run record is written and summarised through these buffer-level helpers instead,
so `bench run` never pays for pandas; analysis and figures, which want DataFrames, still call
`to_pandas()`. `tests/core/test_startup.py` checks that a sim run stays free of pandas.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def floats(values: Any) -> pa.Array:
    """float64 column."""
    arr = np.ascontiguousarray(values, dtype=np.float64)
    return pa.Array.from_buffers(pa.float64(), len(arr), [None, pa.py_buffer(arr)])


def int32s(values: Any) -> pa.Array:
    """int32 column."""
    arr = np.ascontiguousarray(values, dtype=np.int32)
    return pa.Array.from_buffers(pa.int32(), len(arr), [None, pa.py_buffer(arr)])


def _plain_strings(values: Sequence[str]) -> pa.Array:
    encoded = [str(v).encode() for v in values]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int32)
    if encoded:
        np.cumsum(np.fromiter((len(b) for b in encoded), dtype=np.int32, count=len(encoded)), out=offsets[1:])
    data = b"".join(encoded)
    return pa.Array.from_buffers(pa.string(), len(encoded), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def strings_from_codes(codes: Any, categories: Sequence[str]) -> pa.Array:
    """String column whose row i is `categories[codes[i]]` (cheap for the few names of a long column)."""
    dictionary = _plain_strings(categories)
    indices = int32s(codes)
    return pa.DictionaryArray.from_arrays(indices, dictionary).cast(pa.string())


def strings(values: Iterable[str]) -> pa.Array:
    """String column from any iterable of str."""
    categories: dict[str, int] = {}
    items = [str(v) for v in values]
    codes = np.fromiter((categories.setdefault(v, len(categories)) for v in items), dtype=np.int32, count=len(items))
    return strings_from_codes(codes, list(categories))


def read_parquet(path: Path) -> pa.Table:
    """A whole parquet file (`pq.read_table` goes through pyarrow.dataset, which imports pandas)."""
    return pq.ParquetFile(path).read()


def numbers(column: pa.Array | pa.ChunkedArray, dtype: Any = np.float64) -> np.ndarray:
    """A numeric column as a numpy array (nulls become NaN for float columns)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    np_dtype = _numpy_dtype(arr.type)
    n, offset = len(arr), arr.offset
    data = arr.buffers()[1]
    out = (np.frombuffer(data, dtype=np_dtype)[offset:offset + n] if data is not None and n
           else np.empty(0, dtype=np_dtype))
    out = out.astype(dtype, copy=True)
    if arr.null_count:
        validity = np.unpackbits(np.frombuffer(arr.buffers()[0], dtype=np.uint8), bitorder="little")
        missing = validity[offset:offset + n] == 0
        if not np.issubdtype(out.dtype, np.floating):
            raise ValueError(f"{arr.type} column has {arr.null_count} null(s); no NaN to stand for them")
        out[missing] = np.nan
    return out


_NUMPY_TYPES = {pa.float64(): np.float64, pa.float32(): np.float32, pa.int64(): np.int64, pa.int32(): np.int32,
                pa.int16(): np.int16, pa.int8(): np.int8}


def _numpy_dtype(arrow_type: pa.DataType) -> Any:
    try:
        return _NUMPY_TYPES[arrow_type]
    except KeyError:
        raise TypeError(f"not a numeric column: {arrow_type}") from None


def codes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list[str]]:
    """A string column as (codes, categories): row i is `categories[codes[i]]` (null as "")."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    encoded = arr.dictionary_encode(null_encoding="encode")
    categories = ["" if v is None else str(v) for v in encoded.dictionary.to_pylist()]
    return numbers(encoded.indices, np.int64), categories
