"""The Nexmark queries this installation has, apart from their operator graphs.

`bench list` and shell completion name the queries from the files in `queries/topologies/`
without importing `harness.topology` (its dataclasses and the YAML parser), so listing them
costs nothing beyond the CLI (issue 13). `harness.topology` re-exports both names.
"""

from __future__ import annotations

from pathlib import Path

QUERIES_DIR = Path(__file__).resolve().parent.parent / "queries"
TOPOLOGIES_DIR = QUERIES_DIR / "topologies"


def available_queries() -> list[str]:
    """Every query with a topology file, sorted."""
    return sorted(p.stem for p in TOPOLOGIES_DIR.glob("*.yaml"))
