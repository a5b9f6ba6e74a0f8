"""Typed knobs of the Kubernetes backend."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class K8sConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    namespace: str = "bench"
    kubeconfig: str | None = None
    context: str | None = None
