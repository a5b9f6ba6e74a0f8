"""Property tests (hypothesis): any mutation of a valid experiment or matrix file, and any value of the
CLI's flags, either validates or exits 2 naming the file and field (or the flag) - never a traceback,
never a file written."""

from __future__ import annotations

import copy
import io
import re
import string
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import cli

EXPERIMENT: dict[str, Any] = {
    "name": "prop", "backend": "sim", "query": "q1",
    "pattern": {"name": "cosine", "scale": 0.5, "time_scale": 10, "params": {"min_rate": 100}},
    "autoscaler": {"name": "ds2", "params": {"overprovisioning_factor": 1.2}},
    "loop": {"period_s": 15, "metrics_window_s": 15, "cooldown_s": 60},
    "scale_manager": {"max_taskmanagers": 20, "max_increase_per_action": 4},
    "initial_parallelism": 2, "duration_s": 600, "seed": 3,
    "faults": [{"kind": "stop-prometheus", "at_s": 100, "for_s": 30}],
}
MATRIX: dict[str, Any] = {
    "name": "propm", "base": copy.deepcopy({k: v for k, v in EXPERIMENT.items() if k != "name"}),
    "axes": {"autoscaler": ["ds2", "dhalion"], "loop.cooldown_s": [30, 60]},
    "overrides": [{"match": {"autoscaler": "dhalion"}, "set": {"initial_parallelism": 3}}],
    "repetitions": 2,
}

pytestmark = pytest.mark.slow

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**6),
    st.floats(allow_nan=True, allow_infinity=True), st.text(string.printable, max_size=12),
    st.sampled_from(["ds2", "q1", "cosine", "kill-taskmanager", "sim", "local", "k8s", "-1", "1e309", ""]),
)
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(string.ascii_lowercase, max_size=6),
                                                                      inner, max_size=3)), max_leaves=6)


def paths(d: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(d, dict):
        for k, v in d.items():
            out += paths(v, (*prefix, k))
    elif isinstance(d, list):
        for i, v in enumerate(d):
            out += paths(v, (*prefix, i))
    return out


@st.composite
def mutated(draw: st.DrawFn, doc: dict[str, Any]) -> dict[str, Any] | Any:
    out = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(out) or [()]))
        parent: Any = out
        for part in where[:-1]:
            parent = parent[part]
        op = draw(st.sampled_from(["replace", "delete", "add", "rename"]))
        key = where[-1] if where else None
        if key is None:
            return draw(values)  # the whole document replaced
        if op == "replace":
            parent[key] = draw(values)
        elif op == "delete" and isinstance(parent, dict):
            del parent[key]
        elif op == "add" and isinstance(parent, dict):
            parent[draw(st.text(string.ascii_lowercase + "_.", min_size=1, max_size=8))] = draw(values)
        elif op == "rename" and isinstance(parent, dict):
            parent[draw(st.text(string.ascii_lowercase, min_size=1, max_size=8))] = parent.pop(key)
    return out


def bench(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        try:
            cli.main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def snapshot(d: Path) -> dict[str, float]:
    return {str(p): p.stat().st_mtime for p in d.rglob("*")}


class Ran(SystemExit):
    """A valid experiment reached the runner: stop there (nothing runs, nothing is written)."""


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    import harness.matrix
    import harness.runner

    def stop(*_a: object, **_k: object) -> None:
        raise Ran(0)

    monkeypatch.setattr(harness.runner, "run_experiment", stop)
    monkeypatch.setattr(harness.matrix, "run_cells", stop)
    monkeypatch.setenv("BENCH_LOG_DIR", str(tmp_path / "crash-logs"))  # an internal error would land here
    return tmp_path


def check(code: int, out: str, file: Path, doc: Any, workdir: Path, before: dict[str, float]) -> None:
    assert code in (0, 2), out
    assert "Traceback" not in out and "internal error" not in out, out
    assert snapshot(workdir) == before, "a file was written"
    if code == 2:
        assert str(file) in out, out
        if isinstance(doc, dict):  # a mapping: the message names a field (`file: [cell 'x': ]field: why`)
            assert re.search(rf"{re.escape(str(file))}: [^\n]+?: ", out), out


def write(tmp: Path, name: str, doc: Any) -> Path:
    f = tmp / name
    f.write_text(yaml.safe_dump(doc, allow_unicode=True) if not isinstance(doc, str) else doc)
    return f


@SETTINGS
@given(doc=mutated(EXPERIMENT))
def test_experiment_mutations_validate_or_exit_2(no_runs: Path, doc: Any) -> None:
    f = write(no_runs, "e.yaml", doc)
    before = snapshot(no_runs)
    for args in (["validate", str(f)], ["run", str(f), "--results", str(no_runs / "r")],
                 ["matrix", str(f), "--results", str(no_runs / "r"), "--dry-run"]):
        code, out = bench(*args)
        check(code, out, f, doc, no_runs, before)


@SETTINGS
@given(doc=mutated(MATRIX))
def test_matrix_mutations_validate_or_exit_2(no_runs: Path, doc: Any) -> None:
    f = write(no_runs, "m.yaml", doc)
    before = snapshot(no_runs)
    for args in (["validate", str(f)], ["matrix", str(f), "--results", str(no_runs / "r"), "--dry-run"],
                 ["matrix", str(f), "--results", str(no_runs / "r")]):
        code, out = bench(*args)
        if code == 0 and args[-1] != "--dry-run":
            continue  # reached the (stubbed) runner: valid
        check(code, out, f, doc, no_runs, before)


@SETTINGS
@given(text=st.text(string.printable, max_size=80), cut=st.integers(0, 400))
def test_garbled_yaml_text_exits_2(no_runs: Path, text: str, cut: int) -> None:
    good = yaml.safe_dump(EXPERIMENT)
    f = write(no_runs, "g.yaml", good[:cut] + text + good[cut:])
    before = snapshot(no_runs)
    for args in (["validate", str(f)], ["run", str(f), "--results", str(no_runs / "r")]):
        code, out = bench(*args)
        assert code in (0, 2), out
        assert "Traceback" not in out and "internal error" not in out, out
        assert snapshot(no_runs) == before


flag_text = st.one_of(st.text(string.printable, max_size=15),
                      st.sampled_from(["0", "-1", "1", "2", "nan", "inf", "1e400", "", "=", "a=b", "loop.cooldown_s=-3",
                                       "autoscaler=ds2", "seed=x", "kill-taskmanager@10", "stop-prometheus@5+2",
                                       "pause-generator@1e9+1", "faults=[{kind: x}]", "pattern.name=nope"]))
FLAGS = ["--workers", "--set", "--only", "--fault", "--backend"]
RUN_FLAGS = ["--set", "--fault", "--duration", "--seed", "--parallelism", "--scale", "--time-scale", "--query",
             "--pattern", "--scaler", "--backend"]


@SETTINGS
@given(flags=st.lists(st.tuples(st.sampled_from(FLAGS), flag_text), min_size=1, max_size=4))
def test_matrix_flags_never_traceback(no_runs: Path, flags: list[tuple[str, str]]) -> None:
    f = write(no_runs, "m.yaml", MATRIX)
    before = snapshot(no_runs)
    args = [a for pair in flags for a in pair]
    code, out = bench("matrix", str(f), "--results", str(no_runs / "r"), "--dry-run", *args)
    assert code in (0, 2), out
    assert "Traceback" not in out and "internal error" not in out, out
    if code == 2:
        assert any(flag in out for flag, _ in flags) or str(f) in out, out
    assert snapshot(no_runs) == before


@SETTINGS
@given(flags=st.lists(st.tuples(st.sampled_from(RUN_FLAGS), flag_text), min_size=1, max_size=4))
def test_run_flags_never_traceback(no_runs: Path, flags: list[tuple[str, str]]) -> None:
    before = snapshot(no_runs)
    args = [a for pair in flags for a in pair]
    code, out = bench("run", "--backend", "sim", "--results", str(no_runs / "r"), *args)
    assert code in (0, 2), out
    assert "Traceback" not in out and "internal error" not in out, out
    if code == 2:
        named = [flag for flag, _ in flags] + ["command line", "pattern", "autoscaler", "query", "backend"]
        assert any(n in out for n in named), out
    assert snapshot(no_runs) == before
