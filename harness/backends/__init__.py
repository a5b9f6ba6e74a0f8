"""Backends run the system under test: `sim` (model), `local` (real processes), `k8s`."""
