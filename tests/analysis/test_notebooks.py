"""The notebooks run top to bottom against a tiny real sim matrix, so they cannot rot."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MATRIX = Path(__file__).parent / "data" / "tiny-sim-matrix.yaml"


@pytest.fixture(scope="module")
def sim_results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = tmp_path_factory.mktemp("sim-results")
    bench = Path(sys.executable).with_name("bench")
    proc = subprocess.run([str(bench), "matrix", str(MATRIX), "--results", str(results), "--workers", "1"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(list((results / "tiny").glob("*/status"))) == 12
    return results


def test_the_four_notebooks_exist():
    assert {p.stem for p in NOTEBOOKS} >= {"workload-comparison", "query-comparison", "convergence",
                                           "parameter-sensitivity"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes_and_plots(path: Path, sim_results: Path, monkeypatch: pytest.MonkeyPatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("BENCH_RESULTS", str(sim_results))
    monkeypatch.setenv("BENCH_MATRIX", "tiny")  # an unknown matrix name is an error, no silent fall-back
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    assert "parameters" in nb.cells[1].metadata.get("tags", [])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs), "a notebook without a plot"
    assert (sim_results / "analysis" / "cells.csv").exists()
