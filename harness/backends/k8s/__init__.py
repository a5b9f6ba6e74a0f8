"""The `k8s` backend: the same components on a Kubernetes cluster."""
