"""The Flink Kubernetes Operator's own FlinkDeployment CRD, from its API jar on Maven Central.

The operator cannot run on the test cluster: neither its image nor its runtime jar
(`org.apache.flink:flink-kubernetes-operator`) is in a registry this project reaches. Its API jar
(`flink-kubernetes-operator-api`) is on Maven Central, and fabric8's CRD generator writes the CRDs
into it (`META-INF/fabric8/<plural>.<group>-v1.yml`, apiextensions.k8s.io/v1). Installing that CRD
lets the real API server validate the operator path's FlinkDeployment (structural schema, strict
field validation, the `flinkVersion` enum) without the operator.
"""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import yamlio
from harness.backends.k8s.testcluster.pins import Pins

GROUP = "flink.apache.org"
FLINK_DEPLOYMENTS = "flinkdeployments"
CRD_NAME = f"{FLINK_DEPLOYMENTS}.{GROUP}"


def operator_api_jar(pins: Pins | None = None, progress: Callable[[str], None] | None = None) -> Path:
    """The pinned API jar, resolved once with Maven (the same installer the local backend uses)."""
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.install import Installer

    version = (pins or Pins()).flink_operator_api
    out = Installer(LocalConfig(), progress).ensure_maven(
        f"flink-kubernetes-operator-api-{version}",
        [("org.apache.flink", "flink-kubernetes-operator-api", version)], "flink operator api", transitive=False)
    return out / f"flink-kubernetes-operator-api-{version}.jar"


def flinkdeployment_crd(jar: Path) -> dict[str, Any]:
    """The FlinkDeployment CustomResourceDefinition shipped in the API jar."""
    entry = f"META-INF/fabric8/{CRD_NAME}-v1.yml"
    with zipfile.ZipFile(jar) as zf:
        if entry not in zf.namelist():
            raise FileNotFoundError(f"{jar} has no {entry} (not a flink-kubernetes-operator-api jar?)")
        # 0.5 MB of YAML: libyaml's loader is ~10x faster than the pure-Python one
        crd: dict[str, Any] = yamlio.load(zf.read(entry))
    if crd.get("kind") != "CustomResourceDefinition" or crd["metadata"]["name"] != CRD_NAME:
        raise ValueError(f"{jar}!{entry} is not the {CRD_NAME} CRD")
    return crd


def flink_versions(crd: dict[str, Any], version: str) -> list[str]:
    """The `spec.flinkVersion` values the CRD accepts at API `version` (e.g. v1beta1), oldest first."""
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            spec = v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            return list(spec["flinkVersion"].get("enum", []))
    raise KeyError(f"{CRD_NAME} serves no version {version!r}: {[v['name'] for v in crd['spec']['versions']]}")
