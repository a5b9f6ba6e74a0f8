"""Pinned versions and the on-disk layout of the test cluster (one place to bump a version).

Binaries and images are cached under the user's cache dir keyed by these pins, so a pin change
rebuilds and nothing else does. Runtime state (etcd data, certificates, kubelet dirs, logs) lives
under `state_dir` and is removed by `bench k8s down`.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

CACHE_ROOT = Path(os.environ.get("XDG_CACHE_HOME", "~/.cache")).expanduser() / "autoscaler-bench"


class Pins(BaseModel):
    """Versions of everything the test cluster builds (Go module proxy) or installs (Debian)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kubernetes: str = Field("v1.34.2", description="k8s.io/kubernetes; staging modules at v0.<minor>.<patch>")
    etcd: str = Field("v3.6.16", description="go.etcd.io/etcd/server/v3")
    coredns: str = Field("v1.14.7", description="github.com/coredns/coredns (only the plugins we use)")
    debian_suite: str = Field("bookworm", description="suite of the image root filesystems (mmdebstrap)")
    flink_operator_api: str = Field(
        "1.10.0", description="org.apache.flink:flink-kubernetes-operator-api (Maven Central): the FlinkDeployment "
        "CRD the manifests are checked against; the newest release there (1.11+ are not published)")

    def staging_version(self) -> str:
        """k8s.io/api etc. are tagged v0.X.Y for Kubernetes v1.X.Y."""
        major, minor, patch = self.kubernetes.lstrip("v").split(".")
        return f"v0.{minor}.{patch}"

    def key(self, *parts: str) -> str:
        """Short digest of the pins that matter for one artifact (cache directory names)."""
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:12]


class Layout(BaseModel):
    """Where the cluster's files live."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cache_dir: Path = CACHE_ROOT / "k8s"
    state_dir: Path = Path("/var/lib/autoscaler-bench-k8s")

    @property
    def bin_root(self) -> Path:
        return self.cache_dir / "bin"

    @property
    def src_root(self) -> Path:
        return self.cache_dir / "src"

    @property
    def image_root(self) -> Path:
        return self.cache_dir / "images"

    @property
    def kubeconfig(self) -> Path:
        """Cluster-admin kubeconfig (written by `up`)."""
        return self.state_dir / "admin.kubeconfig"

    @property
    def harness_kubeconfig(self) -> Path:
        """Kubeconfig of the harness' own service account (what `bench run --backend k8s` uses)."""
        return self.state_dir / "harness.kubeconfig"
