"""Reading the Flink Kubernetes Operator's FlinkDeployment CRD out of its API jar (no cluster).

The real jar is used by the API-server tier (tests/k8s/test_cluster_api.py); here small jars made
on the spot pin the parsing and the errors on a wrong jar.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.backends.k8s.testcluster import operator_crd as oc


def crd(enum: list[str]) -> dict[str, Any]:
    spec = {"properties": {"flinkVersion": {"type": "string", "enum": enum}, "image": {"type": "string"}}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": oc.CRD_NAME},
        "spec": {"group": oc.GROUP, "versions": [
            {"name": "v1beta1", "served": True, "storage": True,
             "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec}}}}]},
    }


def jar(tmp_path: Path, entries: dict[str, Any]) -> Path:
    path = tmp_path / "api.jar"
    with zipfile.ZipFile(path, "w") as zf:
        for name, doc in entries.items():
            zf.writestr(name, yaml.safe_dump(doc))
    return path


ENTRY = f"META-INF/fabric8/{oc.CRD_NAME}-v1.yml"


def test_the_crd_and_its_flink_versions_are_read_from_the_jar(tmp_path: Path) -> None:
    got = oc.flinkdeployment_crd(jar(tmp_path, {ENTRY: crd(["v1_19", "v1_20"]),
                                                f"META-INF/fabric8/{oc.CRD_NAME}-v1beta1.yml": {"kind": "x"}}))
    assert got["metadata"]["name"] == "flinkdeployments.flink.apache.org"
    assert oc.flink_versions(got, "v1beta1") == ["v1_19", "v1_20"]
    with pytest.raises(KeyError, match="serves no version 'v1'"):
        oc.flink_versions(got, "v1")


def test_a_jar_without_the_crd_or_with_another_object_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not a flink-kubernetes-operator-api jar"):
        oc.flinkdeployment_crd(jar(tmp_path, {"META-INF/other.yml": {}}))
    wrong = crd([])
    wrong["metadata"]["name"] = "flinksessionjobs.flink.apache.org"
    with pytest.raises(ValueError, match="is not the flinkdeployments.flink.apache.org CRD"):
        oc.flinkdeployment_crd(jar(tmp_path, {ENTRY: wrong}))
