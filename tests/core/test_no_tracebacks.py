"""User errors never end in a traceback: paths are checked before work, bad input exits 2 with one
line naming the file/field/flag, corrupt records are skipped and counted, and a bug prints one line
plus the log file holding its traceback."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml

from harness import cli
from harness.analysis.pipeline import analyze
from harness.record import find_run_dirs


def bench(*args: str) -> tuple[int, str]:
    """`bench ARGS` in-process through the real entry point (main), output captured."""
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(out):
        try:
            cli.main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


SIM = ["run", "--backend", "sim", "--query", "q1", "--pattern", "cosine", "--duration", "300"]


def files_under(p: Path) -> set[Path]:
    return set(p.rglob("*")) if p.exists() else set()


@pytest.mark.parametrize("flag, make, needle", [
    ("--results", lambda d: (d / "a-file").write_text("x") and d / "a-file", "is a file"),
    ("--results", lambda d: (d / "f").write_text("x") and d / "f" / "sub", "cannot be created"),
    ("--plot", lambda d: d / "nodir" / "x.png", "does not exist"),
    ("--plot", lambda d: d / "x.txt", "unknown image type"),
    ("--plot", lambda d: d, "is a directory"),
])
def test_run_checks_output_paths_before_running(tmp_path: Path, flag: str, make, needle: str) -> None:
    target = make(tmp_path)
    before = files_under(tmp_path)
    args = [*SIM, flag, str(target)] + ([] if flag == "--results" else ["--results", str(tmp_path / "r")])
    code, out = bench(*args)
    assert code == 2 and needle in out and flag in out, out
    assert "Traceback" not in out and len(out.strip().splitlines()) == 1
    assert files_under(tmp_path) == before  # nothing ran, nothing written


def test_pattern_plot_path_checked(tmp_path: Path) -> None:
    code, out = bench("pattern", "cosine", "--plot", str(tmp_path / "nodir" / "x.png"))
    assert code == 2 and "--plot" in out and "Traceback" not in out


@pytest.mark.parametrize("args, needle", [
    (["matrix", "M", "--workers", "-1"], "--workers"),
    (["matrix", "M", "--results", "FILE"], "--results FILE: is a file"),
    (["matrix", "M", "--results", "FILE/sub", "--dry-run"], "cannot be created as a directory"),  # a plan under a file
    (["matrix", "M", "--workers", "0"], "--workers"),
    (["run", "--backend", "sim", "--set", "loop.cooldown_s=[unclosed"], "--set"),
    (["run", "--backend", "sim", "--set", "noequals"], "--set"),
    (["run", "--backend", "sim", "--fault", "kill-everything@3"], "--fault"),
    (["run", "--backend", "sim", "--duration", "abc"], "--duration"),
    (["pattern", "cosine", "--param", "min_rate=oops"], "min_rate"),
    (["up", "--port-offset", "-5"], "--port-offset"),
    (["status", "--workdir", "FILE"], "--workdir"),
    (["down", "--workdir", "FILE"], "--workdir"),
    (["up", "--query", "q99"], "--query"),
    (["analyze", "NOPE"], "no such directory"),
    (["report", "NOPE"], "no such directory"),
    (["analyze", "EMPTY"], "no run records"),
    (["analyze", "EMPTY", "--engine", "dask"], "--engine"),
    (["analyze", "EMPTY", "--out", "FILE"], "--out FILE: is a file"),  # output dirs checked first
    (["report", "EMPTY", "--out", "FILE"], "--out FILE: is a file"),
    (["report", "EMPTY", "--analysis", "FILE"], "--analysis FILE: is a file"),
])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    m = tmp_path / "m.yaml"
    m.write_text("name: m\nbase: {backend: sim, query: q1, pattern: cosine, autoscaler: ds2}\n")
    (tmp_path / "FILE").write_text("x")
    (tmp_path / "EMPTY").mkdir()
    subst = {"M": str(m), "FILE": str(tmp_path / "FILE"), "FILE/sub": str(tmp_path / "FILE" / "sub"),
             "NOPE": str(tmp_path / "nope"), "EMPTY": str(tmp_path / "EMPTY")}
    needle = needle.replace("FILE", str(tmp_path / "FILE"))
    code, out = bench(*[subst.get(a, a) for a in args], *(["--results", str(tmp_path / "r")]
                                                          if args[0] in ("run", "matrix") and "--results" not in args
                                                          else []))
    assert code == 2, out
    assert needle in out and "Traceback" not in out, out
    assert not (tmp_path / "r").exists()


def test_internal_error_is_one_line_and_a_log_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.runner

    def boom(*_a: object, **_k: object) -> None:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(harness.runner, "run_experiment", boom)
    monkeypatch.setenv("BENCH_LOG_DIR", str(tmp_path / "logs"))
    code, out = bench(*SIM, "--results", str(tmp_path / "r"))
    assert code == 1 and "Traceback" not in out
    line = [x for x in out.splitlines() if "internal error" in x][0]
    assert "ZeroDivisionError: a bug" in line and "full traceback in" in line
    (log,) = (tmp_path / "logs").iterdir()
    assert "Traceback" in log.read_text() and "boom" in log.read_text()


@pytest.fixture
def two_runs(tmp_path: Path) -> Path:
    m = tmp_path / "m.yaml"
    m.write_text(yaml.safe_dump({"name": "m", "base": {"backend": "sim", "query": "q1", "pattern": "cosine",
                                                      "autoscaler": "ds2", "duration_s": 600},
                                 "repetitions": 3}))
    code, out = bench("matrix", str(m), "--results", str(tmp_path / "r"), "--workers", "1")
    assert code == 0, out
    return tmp_path / "r"


def test_corrupt_records_are_skipped_with_a_warning_and_counted(two_runs: Path) -> None:
    runs = find_run_dirs(two_runs)
    ts = runs[0] / "timeseries.parquet"
    ts.write_bytes(ts.read_bytes()[:100])  # truncated
    (runs[1] / "run.yaml").write_text("config: [unclosed\n  - x: {")  # garbled
    code, out = bench("analyze", str(two_runs), "--engine", "pandas")
    assert code == 0, out
    warnings = [x for x in out.splitlines() if x.startswith("warning: skipped corrupt run record")]
    assert len(warnings) == 2 and str(runs[0]) in out and str(runs[1]) in out
    assert "2 corrupt run record(s) skipped" in out and "Traceback" not in out
    assert "1 runs, 1 cells" in out
    code, out = bench("report", str(two_runs))
    assert code == 0, out
    assert "2 corrupt run record(s) skipped" in (two_runs / "report" / "report.md").read_text()


def test_report_reanalyses_when_runs_were_added(two_runs: Path, tmp_path: Path) -> None:
    out = analyze(two_runs, engine="pandas")
    assert len(out.result.summary) == 3
    m = tmp_path / "m.yaml"
    raw = yaml.safe_load(m.read_text())
    raw["repetitions"] = 4
    m.write_text(yaml.safe_dump(raw))
    code, text = bench("matrix", str(m), "--results", str(two_runs), "--workers", "1")
    assert code == 0 and "1 ran, 3 already complete" in text, text
    code, text = bench("report", str(two_runs))
    assert code == 0 and "is stale" in text and "1 new" in text, text
    assert (two_runs / "report" / "report.md").read_text().startswith("# Autoscaler benchmark report\n\n4 runs")
    code, text = bench("report", str(two_runs))
    assert code == 0 and "stale" not in text  # fresh now: not analysed again


def test_notebook_loader_reanalyses_and_refuses_unknown_matrices(two_runs: Path, tmp_path: Path) -> None:
    from harness.report import notebook as nb

    runs, cells, _, _ = nb.load_analysis(two_runs)
    assert len(runs) == 3
    (find_run_dirs(two_runs)[0] / "status").write_text("interrupted: SIGINT\n")  # a rewritten record
    runs, cells, _, _ = nb.load_analysis(two_runs)
    assert (runs["status"] == "interrupted").sum() == 1 and int(cells["interrupted"].iloc[0]) == 1
    assert len(nb.select_matrix(cells, "m")) == 1
    with pytest.raises(nb.NotebookInputError, match="no such matrix.*known: m"):
        nb.select_matrix(cells, "thesis-2-workloads")
    with pytest.raises(nb.NotebookInputError, match="no such directory"):
        nb.load_analysis(tmp_path / "nope")
