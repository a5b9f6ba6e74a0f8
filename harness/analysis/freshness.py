"""Is an analysis still about the run records it sits next to?

`bench analyze` writes `manifest.json` beside its tables: every run record it read (or skipped),
with the modification time and size of its `status` and `run.yaml`. `bench report` and the
notebooks' loader compare that with the records on disk now; any run added, removed, rewritten
(a resumed or replaced run) or an analysis without a manifest makes the analysis stale.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.record import find_run_dirs

MANIFEST = "manifest.json"


def default_out(results_dir: Path) -> Path:
    """Where `bench analyze` writes unless told otherwise (and where `bench compare` looks): RESULTS/analysis."""
    return Path(results_dir) / "analysis"


def _stamp(path: Path) -> list[int]:
    try:
        st = path.stat()
    except OSError:
        return [0, 0]
    return [st.st_mtime_ns, st.st_size]


def fingerprint(results_dir: Path) -> dict[str, list[int]]:
    """run dir (relative to the results dir) -> mtime and size of its status and run.yaml."""
    root = Path(results_dir)
    out = {}
    for d in find_run_dirs(root):
        try:
            key = str(d.relative_to(root))
        except ValueError:
            key = str(d)
        out[key] = _stamp(d / "status") + _stamp(d / "run.yaml")
    return out


def write_manifest(out_dir: Path, results_dir: Path, extra: dict[str, Any] | None = None) -> Path:
    path = Path(out_dir) / MANIFEST
    path.write_text(json.dumps({"results_dir": str(Path(results_dir).resolve()), "runs": fingerprint(results_dir),
                                **(extra or {})}, indent=1, sort_keys=True))
    return path


@dataclass(frozen=True)
class Freshness:
    fresh: bool
    why: str = ""


def check(results_dir: Path, out_dir: Path) -> Freshness:
    """Whether `out_dir` holds an analysis of exactly the run records now under `results_dir`."""
    path = Path(out_dir) / MANIFEST
    if not (Path(out_dir) / "cells.csv").exists():
        return Freshness(False, "no analysis yet")
    try:
        manifest = json.loads(path.read_text())
        before: dict[str, list[int]] = manifest["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        return Freshness(False, f"the analysis in {out_dir} has no readable {MANIFEST} (made by an older bench)")
    now = fingerprint(results_dir)
    added = sorted(set(now) - set(before))
    removed = sorted(set(before) - set(now))
    changed = sorted(k for k in set(now) & set(before) if list(now[k]) != list(before[k]))
    if not (added or removed or changed):
        return Freshness(True)
    parts = [f"{len(x)} {word}" for x, word in ((added, "new"), (removed, "removed"), (changed, "rewritten")) if x]
    example = (added or changed or removed)[0]
    return Freshness(False, f"run records changed since the analysis ({', '.join(parts)}; e.g. {example})")
