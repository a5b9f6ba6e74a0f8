"""A one-node Kubernetes cluster the project builds and starts itself (tests, `bench k8s up`).

Modules, in the order a bring-up uses them: `pins` (versions and paths), `binaries` (Go module proxy
builds of kube-*, etcd and CoreDNS), `hostprep` (Debian packages, host state recorded and restored),
`pki` (certificates and kubeconfigs), `images` (container images built from Debian packages and the
harness' own artifacts), `cluster` (the processes, readiness, add-ons, teardown).
"""
