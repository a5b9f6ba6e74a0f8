"""Backends run the system under test: `sim` (model), `local` (real processes), `k8s`.

Each registers the model of its settings block in `harness.config.BACKEND_SETTINGS` (by name, imported
on use), so validating an experiment imports no backend implementation; the runner imports a backend's
implementation only for a run that uses it.
"""

BACKENDS = ("local", "sim", "k8s")  # the names `backend:` accepts (shell completion reads them here)
