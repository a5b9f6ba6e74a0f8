"""`bench k8s ...`: build, start, inspect and stop the one-node test cluster.

    bench k8s build     Go module proxy -> kube-*, kubectl, etcd, coredns (cached; minutes, once)
    bench k8s images    Debian root + Flink/Kafka/Prometheus/generator/CoreDNS images (cached)
    bench k8s up        build what is missing, start the cluster, load the images
    bench k8s status    processes, node, what `bench run --backend k8s` will use
    bench k8s down      stop everything, restore the host
"""

import json
import time
from typing import Annotated

import typer

k8s_app = typer.Typer(help="A one-node Kubernetes test cluster on this machine (root; see docs/k8s.md).",
                      no_args_is_help=True)


def _say(msg: str) -> None:
    typer.echo(f"[k8s] {msg}", err=True)


def register(app: typer.Typer) -> None:
    app.add_typer(k8s_app, name="k8s")


@k8s_app.command()
def build() -> None:
    """Build (or find cached) the Kubernetes, etcd and CoreDNS binaries at the pinned versions."""
    from harness.backends.k8s.testcluster.binaries import BinaryBuilder, BuildError

    t0 = time.monotonic()
    try:
        bins = BinaryBuilder(progress=_say).ensure()
    except BuildError as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(1) from None
    typer.echo(f"binaries in {bins.bin_dir} ({time.monotonic() - t0:.0f} s)")


@k8s_app.command()
def prepare() -> None:
    """The slow, venv-independent part: binaries and the Debian base image (run in the background by
    `make test` so it overlaps with the other tests). Exits 0 doing nothing where the cluster cannot run."""
    import os
    import shutil

    from harness.backends.k8s.testcluster.binaries import BinaryBuilder
    from harness.backends.k8s.testcluster.hostprep import ensure_packages
    from harness.backends.k8s.testcluster.images import ImageBuilder

    if os.geteuid() != 0 or shutil.which("go") is None:
        typer.echo("k8s prepare: skipped (needs root and Go)")
        return
    t0 = time.monotonic()
    ensure_packages()
    BinaryBuilder(progress=_say).ensure()
    typer.echo(f"binaries ready after {time.monotonic() - t0:.0f} s")
    ImageBuilder(progress=_say).base_rootfs()
    typer.echo(f"base image ready after {time.monotonic() - t0:.0f} s")


@k8s_app.command()
def images() -> None:
    """Build the stack's container images (OCI archive under the cache dir)."""
    from harness.backends.k8s.testcluster.profile import ensure_images

    built = ensure_images(_say)
    for name, ref in built.refs.items():
        typer.echo(f"{name}: {ref}")
    typer.echo(f"archive: {built.archive}")


@k8s_app.command()
def up(
    no_images: Annotated[bool, typer.Option(help="start the cluster without building/loading the stack images")]
    = False,
) -> None:
    """Start the test cluster (building binaries and images first if needed) and load the images."""
    from harness.backends.k8s.testcluster.profile import bring_up

    info = bring_up(_say, with_images=not no_images)
    typer.echo(json.dumps({k: info[k] for k in ("server", "kubeconfig", "harness_kubeconfig", "timings")
                           if k in info}, indent=1))


@k8s_app.command()
def down() -> None:
    """Stop the test cluster and give the host back (processes, mounts, cgroups, iptables, sysctls)."""
    from harness.backends.k8s.testcluster.cluster import TestCluster

    actions = TestCluster(progress=_say).down()
    for a in actions:
        typer.echo(f"  {a}")


@k8s_app.command()
def status() -> None:
    """Is the test cluster up, and what will `bench run --backend k8s` use?"""
    from harness.backends.k8s.testcluster.cluster import TestCluster
    from harness.backends.k8s.testcluster.profile import test_cluster_settings

    c = TestCluster()
    alive = c.alive()
    if not alive:
        typer.echo("test cluster: down")
        raise typer.Exit(1)
    for name, ok in alive.items():
        typer.echo(f"  {name}: {'running' if ok else 'DEAD'}")
    typer.echo(f"apiserver ready: {c.is_up()}")
    typer.echo(json.dumps(test_cluster_settings(), indent=1))
