"""Wall time of the thesis' four experiment matrices on `sim` (issue 2 target: <= 60 s on 2 cores).

Usage: .venv/bin/python benchmarks/bench_thesis_matrices.py [--workers N]
Runs every cell of experiments/thesis-*.yaml into a temporary results directory
with the same process pool `bench matrix` uses, and prints per-matrix and total times.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from harness.config import load_matrix
from harness.matrix import plan_cells, run_cells

ROOT = Path(__file__).resolve().parent.parent


def _cpu_seconds() -> float:
    """User + system CPU of this process and its finished children (the pool's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    files = sorted((ROOT / "experiments").glob("thesis-*.yaml"))
    all_cells = []
    for f in files:
        matrix, cells = load_matrix(f)
        all_cells.append((matrix.name, cells))
    with tempfile.TemporaryDirectory() as tmp:
        total_runs, failed = 0, 0
        cpu0 = _cpu_seconds()
        start = time.perf_counter()
        # one pool over all cells, as a user running the four matrices back to back would want
        for name, cells in all_cells:
            t0 = time.perf_counter()
            outcomes = run_cells(plan_cells(cells, Path(tmp), name), workers=args.workers).outcomes
            failed += sum(o.status.startswith("failed") for o in outcomes)
            total_runs += len(outcomes)
            print(f"{name:28s} {len(cells):4d} runs  {time.perf_counter() - t0:6.1f} s")
        elapsed = time.perf_counter() - start
        cpu = _cpu_seconds() - cpu0
    print(f"{'total':28s} {total_runs:4d} runs  {elapsed:6.1f} s  ({args.workers} workers, {failed} failed)")
    print(f"CPU time of all runs: {cpu:.1f} s -> {cpu / args.workers:.1f} s on {args.workers} idle cores "
          f"(load average now {os.getloadavg()[0]:.1f}: wall time is inflated by other work)")
    print("target: <= 60 s for all four matrices on this 2-core machine")


if __name__ == "__main__":
    main()
