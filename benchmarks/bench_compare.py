"""`bench compare` over two cells of 5 repetitions each: whole-process time (target: under 2 s).

Makes a sim matrix (ds2 vs dhalion, q1 cosine at time scale 20, 5 repetitions each) in a
temporary directory, then times the whole process
    bench compare five/ds2 five/dhalion --results DIR --json
in two states: `cold` (no `bench analyze` yet: the 10 runs are summarised by the pandas engine
in the process) and `warm` (after `bench analyze --engine pandas`: the summary rows come from
runs.parquet). One warm-up run each, then `--repeat` counted runs; prints min / median / max of
wall time and of user+sys CPU time (the kernel's accounting of the child). The machine is shared:
quote the median, and the CPU time when the wall time is inflated by other load.

`floor`: a process that only imports the libraries a warm compare cannot do without (typer, rich,
pydantic, yaml, pyarrow.parquet and scipy.stats for Welch's t and the Mann-Whitney U test), timed the
same way in the same run: what is left above it is the harness' own cost.

    .venv/bin/python benchmarks/bench_compare.py [--repeat 7] [--plot]
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
TARGET_S = 2.0
MATRIX = """
name: five
base:
  backend: sim
  query: q1
  pattern: {name: cosine, time_scale: 20, scale: 0.1}
  autoscaler: ds2
  initial_parallelism: 2
  loop: {period_s: 5, metrics_window_s: 5, cooldown_s: 15}
axes:
  autoscaler: [ds2, dhalion]
repetitions: 5
"""


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(wall s, user+sys CPU s, stdout) of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), proc.stdout


def figures(values: list[float]) -> str:
    return f"min {min(values):.2f}  median {statistics.median(values):.2f}  max {max(values):.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plot", action="store_true", help="also time --plot (a PNG of the comparison)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    try:
        (root / "m.yaml").write_text(MATRIX)
        results = root / "r"
        timed([str(BIN / "bench"), "matrix", str(root / "m.yaml"), "--results", str(results), "--quiet"])
        cmd = [str(BIN / "bench"), "compare", "five/ds2", "five/dhalion", "--results", str(results), "--json"]
        if args.plot:
            cmd += ["--plot", str(root / "cmp.png")]
        for state in ("cold", "warm"):
            if state == "warm":
                timed([str(BIN / "bench"), "analyze", str(results), "--engine", "pandas", "--quiet"])
            timed(cmd)  # warm-up (file cache, bytecode)
            walls, cpus = [], []
            for _ in range(args.repeat):
                wall, cpu, out = timed(cmd)
                doc = json.loads(out)
                assert [s["runs"] for s in doc["sides"]] == [5, 5], doc["sides"]
                walls.append(wall)
                cpus.append(cpu)
            source = doc["source"]
            print(f"bench compare, 2 cells x 5 repetitions, {state} ({source}), {args.repeat} runs:")
            print(f"  wall s     {figures(walls)}   target < {TARGET_S} s: "
                  f"{'met' if statistics.median(walls) < TARGET_S else 'NOT met'} (median)")
            print(f"  user+sys s {figures(cpus)}")
        floor = [sys.executable, "-c", "import typer, rich.console, pydantic, yaml, pyarrow.parquet, scipy.stats"]
        timed(floor)
        walls, cpus = [], []
        for _ in range(args.repeat):
            wall, cpu, _out = timed(floor)
            walls.append(wall)
            cpus.append(cpu)
        print(f"floor (only the libraries' imports), {args.repeat} runs:")
        print(f"  wall s     {figures(walls)}")
        print(f"  user+sys s {figures(cpus)}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
