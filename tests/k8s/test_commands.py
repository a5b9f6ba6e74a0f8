"""`bench k8s-manifests`: render without a cluster."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from harness.cli import app


def write(tmp_path, k8s: dict) -> str:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "backend": "k8s", "query": "q11", "pattern": "constant",
                                    "autoscaler": "static", "initial_parallelism": 2, "k8s": k8s}))
    return str(path)


def test_renders_the_stack_in_apply_order(tmp_path):
    res = CliRunner().invoke(app, ["k8s-manifests", write(tmp_path, {"namespace": "q11run"})])
    assert res.exit_code == 0, res.output
    docs = list(yaml.safe_load_all(res.output))
    assert docs[0] == {"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": "q11run", "labels": docs[0]["metadata"]["labels"]}}
    tm = next(d for d in docs if d["metadata"]["name"] == "flink-taskmanager")
    assert tm["spec"]["replicas"] == 6  # q11: three operators at parallelism 2
    assert docs[-1]["kind"] == "Job" and docs[-1]["metadata"]["name"] == "generator"


def test_operator_path_and_errors(tmp_path):
    out = tmp_path / "m.yaml"
    res = CliRunner().invoke(app, ["k8s-manifests", write(tmp_path, {"use_operator": True}), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "FlinkDeployment" in {d["kind"] for d in yaml.safe_load_all(out.read_text())}
    res = CliRunner().invoke(app, ["k8s-manifests", write(tmp_path, {"observe_only": True})])
    assert res.exit_code == 2 and "use_operator" in res.output
    res = CliRunner().invoke(app, ["k8s-manifests", write(tmp_path, {"max_taskmanagers": 3})])
    assert res.exit_code == 2 and "max_taskmanagers" in res.output
