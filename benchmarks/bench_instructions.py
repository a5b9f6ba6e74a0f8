"""Instructions (valgrind callgrind's `I refs`) of `bench --help`, `bench list` and of a DS2 sim run: a count
that the host's load does not change, so two checkouts compare on a shared machine where wall times swing by 2x.

    .venv/bin/python benchmarks/bench_instructions.py [--baseline DIR] [--only help|list|sim|sim-imports]

- `help`: `python -m harness.cli --help`, the whole process: what every command pays before its own work.
- `list`: `python -m harness.cli list`, the whole process (interpreter, imports, the command).
- `sim`: one 140-minute q11 cosine run driven by DS2 through the MAPE loop, in one process
  (benchmarks/bench_sim.py's `scaler_run`, no record written), imports included.
- `sim-imports`: the same process up to the run (its imports): `sim` less this is the run itself.

Each runs once uninstrumented first (bytecode cached in a temporary PYTHONPYCACHEPREFIX, as an
installed `bench` reads it), then under callgrind. `--baseline DIR` counts DIR's code (e.g. a clone
of main) the same way and prints the ratio. Needs valgrind; a count takes 1-5 minutes (callgrind
runs code about 50x slower): run it under `nice`.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SIM = """
import os, sys
sys.path[:0] = [os.getcwd(), os.path.join(os.getcwd(), "benchmarks")]
import bench_sim
import autoscalers, autoscalers.ds2
from harness.config import Experiment
from harness.mape import MapeLoop
from harness.record import EventLog
from harness.scaling import ScaleManager
import harness.backends.sim.readout
if {run}:
    r = bench_sim.scaler_run("q11", "poisson", "ds2")
    print(r["actions"], r["steps"])
"""
CASES = {
    "help": ["-m", "harness.cli", "--help"],
    "list": ["-m", "harness.cli", "list"],
    "sim": ["-c", SIM.format(run=True)],
    "sim-imports": ["-c", SIM.format(run=False)],
}
REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def count(args: list[str], cwd: Path, env: dict[str, str], out_dir: Path) -> int:
    """Instructions of `python ARGS` run in `cwd` (its `harness` is the one imported)."""
    subprocess.run([sys.executable, *args], cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)  # warm .pyc
    proc = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_dir / 'cg.out'}",
                           sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    m = REFS.search(proc.stderr)
    if not m:
        raise SystemExit(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    return int(m.group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, help="another checkout (e.g. a clone of main) counted the same way")
    ap.add_argument("--only", choices=sorted(CASES), action="append")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed (apt-get install valgrind)")
    here = Path(__file__).resolve().parent.parent
    sides = [("this", here)] + ([("baseline", a.baseline.resolve())] if a.baseline else [])
    tmp = Path(tempfile.mkdtemp(prefix="bench-instr-"))
    try:
        env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp / "pycache"), "COLUMNS": "100"}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        for name, args in CASES.items():
            if a.only and name not in a.only:
                continue
            counts = {label: count(args, cwd, env, tmp) for label, cwd in sides}
            line = "  ".join(f"{label} {n / 1e6:,.1f} M" for label, n in counts.items())
            if "baseline" in counts:
                line += f"  ratio this / baseline {counts['this'] / counts['baseline']:.3f}"
            print(f"{name:<12} instructions: {line}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
