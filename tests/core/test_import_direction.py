"""Imports flow one way (issue 8.8, STYLE.md): read from the source, so a stray import fails here
even where no test happens to import the module.

- `harness/config.py` imports no backend module: backends register their settings models by name;
- the k8s backend shares the Flink REST client and the wall-clock base from `harness/backends/`, and
  imports nothing from the local backend (its test cluster's image builder reuses the local installer);
- autoscalers see the metrics, the vocabulary and the topology, never the loop, the runner or a backend;
- the calibrated profile (data model) sits below both its writer and its reader: `harness.calibration`
  imports the backends (the local stack it measures), the backends never import `harness.calibration`;
- the report (figures, HTML, the commands that show the analysis) sits above the analysis: the analysis
  never imports `harness.report`;
- `--json`/`--quiet` plumbing (`harness.machine_output`) is a leaf every command can use: it imports
  no other harness module (the run's JSON document lives with the run summary).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    """Every module `path` imports, at any depth of its body (lazy imports count too)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def offenders(files: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    found = {}
    for f in files:
        bad = sorted(m for m in imported(f) if any(m == p or m.startswith(p + ".") for p in forbidden))
        if bad:
            found[str(f.relative_to(ROOT))] = bad
    return found


def test_config_imports_no_backend_module() -> None:
    assert offenders([ROOT / "harness" / "config.py"], ("harness.backends",)) == {}


def test_the_k8s_backend_does_not_reach_into_the_local_backend() -> None:
    k8s = ROOT / "harness" / "backends" / "k8s"
    files = [f for f in k8s.glob("*.py")]
    assert files and offenders(files, ("harness.backends.local",)) == {}
    shared = set().union(*(imported(f) for f in files))
    assert {"harness.backends.flink_rest", "harness.backends.wallclock"} <= shared


def test_autoscalers_import_only_metrics_vocabulary_and_topology_from_the_harness() -> None:
    files = list((ROOT / "autoscalers").rglob("*.py"))
    allowed = ("harness.metrics", "harness.vocabulary", "harness.topology")
    found = {}
    for f in files:
        bad = sorted(m for m in imported(f) if (m == "harness" or m.startswith("harness."))
                     and not any(m == a or m.startswith(a + ".") for a in allowed))
        if bad:
            found[str(f.relative_to(ROOT))] = bad
    assert len(files) > 20 and found == {}


def test_backends_never_import_the_calibration_commands() -> None:
    files = list((ROOT / "harness" / "backends").rglob("*.py"))
    assert len(files) > 30 and offenders(files, ("harness.calibration",)) == {}
    sim = set().union(*(imported(f) for f in (ROOT / "harness" / "backends" / "sim").glob("*.py")))
    assert "harness.calibrated_profile" in sim


def test_the_calibrated_profile_sits_below_calibration_and_the_backends() -> None:
    profile = ROOT / "harness" / "calibrated_profile.py"
    assert offenders([profile], ("harness.calibration", "harness.backends")) == {}
    calibration = set().union(*(imported(f) for f in (ROOT / "harness" / "calibration").glob("*.py")))
    assert "harness.calibrated_profile" in calibration


def test_the_analysis_never_imports_the_report() -> None:
    files = list((ROOT / "harness" / "analysis").rglob("*.py"))
    assert len(files) > 20 and offenders(files, ("harness.report",)) == {}
    report = set().union(*(imported(f) for f in (ROOT / "harness" / "report").glob("*.py")))
    assert any(m.startswith("harness.analysis.") for m in report)


def test_machine_output_imports_no_other_harness_module() -> None:
    path = ROOT / "harness" / "machine_output.py"
    assert offenders([path], ("harness",)) == {}
