"""Backends run the system under test: `sim` (model), `local` (real processes), `k8s`.

Each backend registers its typed settings here by name (module:class, imported on first use), so
`harness.config` validates an experiment's `sim:`, `local:` and `k8s:` blocks without importing
any backend module, and a backend's implementation is imported only by a run that uses it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import BaseModel

BACKENDS = ("local", "sim", "k8s")

CONFIG_MODELS: dict[str, str] = {
    "local": "harness.backends.local.config:LocalConfig",
    "sim": "harness.backends.sim.config:SimConfig",
    "k8s": "harness.backends.k8s.config:K8sConfig",
}


def config_model(backend: str) -> type[BaseModel]:
    """The pydantic model of `backend`'s settings block (KeyError for an unknown backend)."""
    module, cls = CONFIG_MODELS[backend].split(":")
    model: type[BaseModel] = getattr(import_module(module), cls)
    return model
