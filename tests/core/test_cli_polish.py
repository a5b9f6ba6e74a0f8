"""CLI polish (issue 12, point 8): --version, -h, visible defaults, KEY=VALUE, completion, list --details,
README examples that exist, docs/METRICS.md covering the vocabulary and the analysis columns."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import autoscalers
from harness import __version__
from harness.cli import app
from harness.listing import describe_autoscaler, describe_pattern, unit_of
from harness.vocabulary import EventKind, Metric

ROOT = Path(__file__).resolve().parents[2]
BENCH = Path(sys.executable).parent / "bench"
runner = CliRunner()


def test_version() -> None:
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0
    assert res.output.strip() == f"bench (autoscaler-bench) {__version__}"


@pytest.mark.parametrize("args", [["-h"], ["run", "-h"], ["matrix", "-h"], ["list", "-h"], ["analyze", "-h"]])
def test_short_help_is_help(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert res.output.startswith("Usage: ")
    assert "-h, --help" in res.output


def test_help_shows_defaults_and_key_value_metavars() -> None:
    run_help = runner.invoke(app, ["run", "--help"], terminal_width=200).output
    assert "[default: results]" in run_help
    assert "--set KEY=VALUE" in run_help
    matrix_help = runner.invoke(app, ["matrix", "--help"], terminal_width=200).output
    assert "--set KEY=VALUE" in matrix_help
    assert "--param KEY=VALUE" in runner.invoke(app, ["pattern", "--help"], terminal_width=200).output
    # help text that spells its own default in brackets keeps it (Rich markup used to swallow it)
    analyze_help = runner.invoke(app, ["analyze", "--help"], terminal_width=200).output
    assert "[default: RESULTS_DIR/analysis]" in analyze_help
    assert "[default: auto]" in analyze_help


def complete(words: str) -> list[str]:
    """What the installed `bench` completes for the last word of `words` (bash protocol)."""
    env = {**os.environ, "_BENCH_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1))}
    proc = subprocess.run([str(BENCH)], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


@pytest.mark.skipif(not BENCH.exists(), reason="the `bench` script is not installed next to this interpreter")
def test_shell_completion_of_names() -> None:
    assert complete("bench run --scaler d") == [n for n in autoscalers.available() if n.startswith("d")]
    assert set(complete("bench run --query q1")) == {"q1", "q11"}
    assert complete("bench run --pattern co") == ["cosine", "convergence", "constant"]
    assert complete("bench pattern ra") == ["random"]
    assert complete("bench run --backend ") == ["local", "sim", "k8s"]
    assert complete("bench matrix x.yaml --backend s") == ["sim"]
    assert complete("bench analyze results --engine p") == ["pandas"]


def test_list_details_shows_parameters_defaults_units_and_papers() -> None:
    res = runner.invoke(app, ["list", "--details"], terminal_width=300)
    assert res.exit_code == 0, res.output
    out = res.output
    for name in autoscalers.available():
        assert f"autoscaler {name}" in out
    assert "autoscaler ds2: DS2 (Kalavri et al. 2018)" in out
    assert re.search(r"overprovisioning_factor\s+float = 1\.2\b", out)
    assert re.search(r"scale_down_window_s\s+float = 300\.0 s\s+stabilisation window", out)
    assert re.search(r"cpu_signal\s+'jvm' \| 'quota' = 'jvm'", out)
    assert re.search(r"period_min\s+float = 60 min", out)  # patterns: minutes and records/s
    assert re.search(r"max_rate\s+float = 2200000 records/s", out)


def test_described_parameters_match_the_typed_configs() -> None:
    for name in autoscalers.available():
        cfg = autoscalers.autoscaler_class(name).Config
        described = describe_autoscaler(name)
        assert [p.name for p in described.parameters] == list(cfg.model_fields)
        assert described.reference, f"{name}: its module docstring names no source"
        for p in described.parameters:
            field = cfg.model_fields[p.name]
            if not field.is_required() and field.default_factory is None:
                assert p.default == repr(field.default)
    assert [p.name for p in describe_pattern("convergence").parameters] == [
        "startup_min", "high_rate", "high_min", "low_rate", "low_min"]


def test_units_from_declaration_name_or_description() -> None:
    from pydantic import Field
    from pydantic.fields import FieldInfo

    declared: FieldInfo = Field(1.0, json_schema_extra={"unit": "cores"})
    assert unit_of("cpu", declared) == "cores"
    assert unit_of("window_s", Field(1.0)) == "s"
    assert unit_of("delay_ms", Field(1.0)) == "ms"
    assert unit_of("n_min", Field(1)) == ""  # a minimum, not minutes
    assert unit_of("threshold", Field(1.0, description="records/s")) == "records/s"
    assert unit_of("factor", Field(1.0, description="a plain factor")) == ""


def test_readme_examples_name_files_that_exist_and_validate() -> None:
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"experiments/[\w*.-]+\.yaml", readme))
    assert "experiments/example.yaml" in named
    for pattern in named:
        matches = glob.glob(str(ROOT / pattern))
        assert matches, f"README names {pattern}, which does not exist"
    res = runner.invoke(app, ["validate", str(ROOT / "experiments/example.yaml")])
    assert res.exit_code == 0, res.output


def test_experiment_files_cite_docs_that_exist() -> None:
    for f in sorted((ROOT / "experiments").glob("*.yaml")):
        for cited in re.findall(r"[\w/-]+\.md", f.read_text()):
            assert (ROOT / cited).exists(), f"{f.name} cites {cited}, which is not in the repository"


def test_metrics_doc_covers_the_vocabulary_and_the_analysis_columns() -> None:
    from harness.analysis.summary import METRIC_COLUMNS

    doc = (ROOT / "docs" / "METRICS.md").read_text()
    missing = [str(name) for name in [*Metric, *EventKind, *METRIC_COLUMNS] if f"`{name}`" not in doc]
    assert not missing, f"docs/METRICS.md does not describe {missing}"


def test_list_options_name_what_they_take_not_a_python_type() -> None:
    compare_help = runner.invoke(app, ["compare", "--help"], terminal_width=200).output
    assert "--metric NAME" in compare_help
    matrix_help = runner.invoke(app, ["matrix", "--help"], terminal_width=200).output
    assert "--only FIELD=VALUE" in matrix_help
    for args in (["compare", "--help"], ["matrix", "--help"], ["run", "--help"], ["calibrate", "--help"]):
        options = runner.invoke(app, args, terminal_width=200).output.split("Options:")[1]
        assert "<list[" not in options, f"bench {args[0]}: an option shows a Python type as its value"


def test_list_details_says_a_unit_once_and_describes_the_hpa_window_whole() -> None:
    out = runner.invoke(app, ["list", "--details"], terminal_width=300).output
    repeated = [line for line in out.splitlines() if re.search(r" (\S+)  \1$", line)]
    assert not repeated, f"unit printed twice: {repeated}"
    assert re.search(r"lag_rate_backpressure_threshold\s+float = 1000\.0 records/s$", out, re.MULTILINE)
    assert re.search(r"scale_down_window_s\s+float = 300\.0 s\s+stabilisation window \(s\): .*"
                     r"--horizontal-pod-autoscaler-downscale-stabilization\)$", out, re.MULTILINE)


def test_readme_shows_the_workflow_commands_with_cells_that_exist() -> None:
    """README and docs/workflow.md name `bench runs`/`bench compare`; every MATRIX/CELL side they show is a
    cell of the experiment file of that name."""
    readme = (ROOT / "README.md").read_text()
    assert "bench runs " in readme and "bench compare " in readme and "--json" in readme
    assert "(docs/workflow.md)" in readme and (ROOT / "docs" / "workflow.md").exists()
    shown = readme + (ROOT / "docs" / "workflow.md").read_text()
    sides = set(re.findall(r"bench compare ([\w-]+)/(\w+) ([\w-]+)/(\w+)", shown))
    assert sides, "no MATRIX/CELL example"
    for example in sides:
        for matrix, cell in (example[:2], example[2:]):
            res = runner.invoke(app, ["matrix", str(ROOT / "experiments" / f"{matrix}.yaml"), "--backend", "sim",
                                      "--dry-run", "--json", "--results", "/nonexistent-results"])
            assert res.exit_code == 0, res.output
            cells = {r["run_id"].rsplit("-r", 1)[0] for r in json.loads(res.stdout)["runs"]}
            assert cell in cells, f"{matrix}/{cell}: no such cell (cells: {sorted(cells)[:8]} ...)"


@pytest.mark.parametrize(("args", "says"), [
    (["--taskmanager-memory", "lots"], "--taskmanager-memory 'lots': expected a size like 1536m"),
    (["--query", "q99"], "--query: unknown ['q99']"),
    (["--quota", "0"], "--quota must be in (0, 8] cores"),
])
def test_calibrate_rejects_bad_input_before_anything_starts(tmp_path: Path, args: list[str], says: str) -> None:
    """Named option, what was wrong, what would be valid; no stack started and no state or profile written."""
    r = CliRunner().invoke(app, ["calibrate", *args, "--state-dir", str(tmp_path / "state"),
                                 "--out", str(tmp_path / "out"), "--workdir", str(tmp_path / "stack")])
    assert r.exit_code == 2
    assert says in " ".join(r.output.split())
    assert not any(tmp_path.iterdir())
