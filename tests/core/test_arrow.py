"""harness.arrow against pyarrow's own conversions, and the run record written and read through it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from harness import arrow
from harness.record import EventLog, normalise_timeseries, read_run_record, timeseries_table
from harness.vocabulary import EventKind


def test_columns_round_trip_like_pyarrow(tmp_path: Path) -> None:
    names = ["map", "", "bids_source", "map", "sink", "ünïcode", ""]
    table = pa.Table.from_arrays([arrow.strings(names), arrow.floats([1.5, 2, 3, 4, 5, 6, 7]),
                                  arrow.int32s([-1, 0, 1, 2, 3, -1, 7])], names=["s", "f", "i"])
    assert table.column("s").to_pylist() == names
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=3)  # several chunks on the way back
    back = arrow.read_parquet(tmp_path / "t.parquet")
    codes, categories = arrow.codes(back.column("s"))
    assert categories == sorted(set(names))
    assert [categories[c] for c in codes] == names
    np.testing.assert_array_equal(arrow.numbers(back.column("f")), back.column("f").to_numpy())
    np.testing.assert_array_equal(arrow.numbers(back.column("i"), np.int64), [-1, 0, 1, 2, 3, -1, 7])
    sliced = back.column("s").combine_chunks().slice(2, 3)
    c2, cat2 = arrow.codes(sliced)
    assert [cat2[c] for c in c2] == names[2:5]


def test_nulls_become_nan_and_empty_string() -> None:
    floats = pa.array([1.0, None, 3.0])
    np.testing.assert_array_equal(arrow.numbers(floats), [1.0, np.nan, 3.0])
    with pytest.raises(ValueError):
        arrow.numbers(pa.array([1, None], pa.int32()), np.int64)
    codes, cats = arrow.codes(pa.array(["a", None, "b"]))
    assert [cats[c] for c in codes] == ["a", "", "b"]
    assert arrow.codes(pa.chunked_array([], pa.string()))[1] == []
    assert len(arrow.numbers(pa.chunked_array([], pa.float64()))) == 0


def test_timeseries_table_is_sorted_and_equals_the_pandas_path() -> None:
    import pandas as pd

    rng = np.random.default_rng(3)
    n = 500
    metric = rng.choice(["lag", "cpu", "taskmanagers", "busy_ms"], n).tolist()
    operator = rng.choice(["", "map", "sink"], n).tolist()
    subtask, ts, value = rng.integers(-1, 3, n), rng.uniform(0, 100, n), rng.normal(size=n)
    ours = timeseries_table(ts, metric, operator, subtask, value)
    theirs = normalise_timeseries(pd.DataFrame({"ts": ts, "metric": metric, "operator": operator,
                                                "subtask": subtask, "value": value}))
    assert ours.schema == theirs.schema
    assert ours.to_pydict() == theirs.to_pydict()
    assert normalise_timeseries(ours).to_pydict() == ours.to_pydict()  # a table goes through unchanged


def test_a_record_written_and_summarised_without_pandas(tmp_path: Path) -> None:
    probe = f"""
import sys
from pathlib import Path
from harness.record import EventLog, read_run_record, timeseries_table, write_run_record
from harness.vocabulary import EventKind
events = EventLog()
events.add(3.0, EventKind.ACTION, "scale", after={{"map": 2}})
table = timeseries_table([0.0, 5.0], ["taskmanagers"] * 2, ["", ""], [-1, -1], [3.0, 4.0])
run = write_run_record(Path({str(tmp_path / 'run')!r}), {{"duration_s": 10}}, table, events, "completed")
rec = read_run_record(run)
assert rec.arrays("taskmanagers")[1].tolist() == [3.0, 4.0]
assert rec.events_of("action")[0]["after"] == {{"map": 2}}
print(sorted(m for m in ("pandas", "pyarrow.compute") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
    rec = read_run_record(tmp_path / "run")
    assert rec.timeseries.value.tolist() == [3.0, 4.0]  # the pandas view for analysis still works
    assert rec.events.kind.tolist() == ["action"]


def test_events_keep_their_data() -> None:
    log = EventLog()
    log.add(1.0, EventKind.DECISION, "r", target={"a": 1})
    log.add(2.0, EventKind.FAULT, "ünï", error="x")
    assert log.to_table().to_pydict() == {"ts": [1.0, 2.0], "kind": ["decision", "fault"], "reason": ["r", "ünï"],
                                          "data": ['{"target": {"a": 1}}', '{"error": "x"}']}


def test_dictionary_encoded_names_give_the_same_codes_as_plain_strings(tmp_path: Path) -> None:
    """A record's metric/operator columns are read dictionary-encoded (`read_run_record`): `codes` must give
    what the plain column gives, across chunks with different dictionaries, nulls and unused entries."""
    names = ["sink", "", "map", "sink", None, "ünïcode", "map", "bids_source"]
    plain = pa.array(names, pa.string())
    pq.write_table(pa.table({"s": plain}), tmp_path / "d.parquet", row_group_size=3)  # three dictionaries
    encoded = arrow.read_parquet(tmp_path / "d.parquet", dictionary=("s",)).column("s")
    assert pa.types.is_dictionary(encoded.type) and encoded.num_chunks == 3
    got, want = arrow.codes(encoded), arrow.codes(plain)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1] == want[1] == ["", "bids_source", "map", "sink", "ünïcode"]
    # a slice whose dictionary holds names no row uses: they are not categories
    sliced = pa.array(names[:4]).dictionary_encode().slice(1, 2)
    assert arrow.codes(sliced)[1] == ["", "map"]
    assert arrow.plain_strings(pa.table({"s": encoded})).column("s").to_pylist() == names


def test_a_record_read_back_gives_the_plain_frame_and_the_same_series(tmp_path: Path) -> None:
    table = timeseries_table(ts=[1.0, 2.0, 1.0, 2.0], metric=["lag", "lag", "busy", "busy"],
                             operator=["", "", "map", "map"], subtask=[-1, -1, -1, -1], value=[5.0, 6.0, 7.0, 8.0])
    (tmp_path / "status").write_text("completed\n")
    (tmp_path / "run.yaml").write_text("duration_s: 2\n")
    pq.write_table(table, tmp_path / "timeseries.parquet")
    pq.write_table(EventLog().to_table(), tmp_path / "events.parquet")
    record = read_run_record(tmp_path)
    assert pa.types.is_dictionary(record.table.schema.field("metric").type)
    ts, values = record.arrays("busy", "map")
    np.testing.assert_array_equal(ts, [1.0, 2.0])
    np.testing.assert_array_equal(values, [7.0, 8.0])
    frame = record.timeseries  # analysis sees plain strings, as before
    assert frame["metric"].tolist() == table.column("metric").to_pylist()
    assert frame["operator"].dtype == object
