"""A run's configuration identity: which table cell a run record belongs to, and with which code.

The hash covers the fully resolved experiment (every default filled in) except the seed and the
repetition count: the repetitions of one cell share it, an edited cell gets another one
(DESIGN.md, run record). `bench matrix` compares it to decide whether a record still counts;
analysis groups by it so two configurations never share a table row.
"""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

from harness import __version__

HASH_LENGTH = 12  # hex digits: plenty for the cells of one results directory, short enough to read
HASH_PREFIX = "c"  # a hash is never all digits, so no CSV reader takes it for a number
EXCLUDED = ("seed", "repetitions")  # what differs between the repetitions of one cell
# settings blocks a run of a backend never reads: editing them must not make its records stale
UNREAD_SETTINGS = {"sim": ("local", "k8s"), "local": ("sim",), "k8s": ("sim",)}


def identity_view(config: dict[str, Any]) -> dict[str, Any]:
    """The part of a resolved config (an `Experiment.model_dump(mode="json")`) the hash covers.

    An empty `faults` list is left out: it is what every record written before faults existed meant.
    So are the settings blocks of the backends the run does not use (a sim run never reads `k8s:`)."""
    unread = UNREAD_SETTINGS.get(str(config.get("backend")), ())
    return {k: v for k, v in config.items()
            if k not in EXCLUDED and k not in unread and not (k == "faults" and not v)}


def config_hash(config: dict[str, Any]) -> str:
    """Stable short hash of a resolved config dict (canonical JSON, sorted keys)."""
    text = json.dumps(identity_view(config), sort_keys=True, separators=(",", ":"), default=str)
    return HASH_PREFIX + hashlib.sha256(text.encode()).hexdigest()[:HASH_LENGTH]


def experiment_hash(experiment: Any) -> str:
    """`config_hash` of a validated `Experiment`."""
    return config_hash(experiment.model_dump(mode="json"))


def recorded_hash(meta: dict[str, Any]) -> str | None:
    """The hash a run.yaml carries; older records without one get it recomputed from `config`."""
    ident = meta.get("identity")
    if isinstance(ident, dict) and isinstance(ident.get("config_hash"), str):
        return ident["config_hash"]
    config = meta.get("config")
    return config_hash(config) if isinstance(config, dict) else None


def differing_fields(old: Any, new: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """Dotted paths whose values differ between two config dicts (seed and repetitions ignored)."""
    if prefix == "" and isinstance(old, dict) and isinstance(new, dict):
        old, new = identity_view(old), identity_view(new)
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[tuple[str, Any, Any]] = []
        for key in sorted(set(old) | set(new), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            out += differing_fields(old.get(key, _ABSENT), new.get(key, _ABSENT), path)
        return out
    return [] if old == new else [(prefix or "(config)", old, new)]


class _Absent:
    def __repr__(self) -> str:
        return "(absent)"


_ABSENT = _Absent()


@functools.cache
def code_version() -> dict[str, Any]:
    """The harness version and, in a git checkout, the commit and whether the tree had edits."""
    out: dict[str, Any] = {"harness": __version__}
    root = Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        if commit.returncode == 0:
            out["git_commit"] = commit.stdout.strip()
            dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                   capture_output=True, text=True, timeout=10)
            out["git_dirty"] = bool(dirty.stdout.strip()) if dirty.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):  # not a checkout or no git: the version alone
        pass
    return out


def identity_block(experiment: Any) -> dict[str, Any]:
    """What the runner writes under `identity:` in run.yaml."""
    return {"config_hash": experiment_hash(experiment), "code": code_version()}
