"""`bench k8s-manifests`: print every manifest the k8s backend would apply, without a cluster.

For review, for `kubectl apply --dry-run=server -f -` against a real cluster, or to deploy by hand.
"""

from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("k8s-manifests")
    def k8s_manifests(
        file: Annotated[Path, typer.Argument(help="experiment YAML (its k8s: block is used)")],
        out: Annotated[Path | None, typer.Option("--out", "-o", help="write here instead of stdout")] = None,
    ) -> None:
        """Render the k8s backend's manifests for an experiment (in apply order, multi-document YAML)."""
        import yaml

        from harness.backends.k8s import manifests as mf
        from harness.config import ConfigError, load_experiment
        from harness.topology import load_topology
        from workloads.patterns import build_pattern

        try:
            exp = load_experiment(file)
        except ConfigError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from None
        topo = load_topology(exp.query)
        job = mf.JobSpec(exp.query, exp.initial_parallelism_map(), list(topo.topics), seed=exp.seed)
        rates = [float(r) for r in build_pattern(exp.pattern, exp.seed, exp.query).per_second()]
        try:
            docs = [*mf.infrastructure(exp.k8s, job), *mf.flink(exp.k8s, job), *mf.load(exp.k8s, job, rates)]
        except ValueError as exc:
            typer.echo(f"{file}: {exc}", err=True)
            raise typer.Exit(2) from None
        text = yaml.safe_dump_all(docs, sort_keys=False)
        if out is None:
            typer.echo(text, nl=False)
        else:
            out.write_text(text)
            typer.echo(f"{len(docs)} manifests written to {out}")
