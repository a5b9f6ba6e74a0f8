"""Start-up cost of the `bench` CLI: whole-process wall times and where the imports go.

Targets (issue 13): `bench --help` <= 0.25 s, `bench list` <= 0.4 s, and a whole
`bench run --backend sim --scaler ds2 --query q11 --pattern cosine` process (the 140-minute
q11 cosine experiment) <= 0.6 s. Each command runs once to warm the file cache, then `--repeat`
times; the figures are min / median / max of the whole process (wall, and user+sys CPU from the
kernel's accounting of the child). Then `python -X importtime` of each command names the heaviest
top-level packages it imported (cumulative microseconds, as Python reports them) and whether one
of the packages a start-up must not pay for (pandas, scipy, pyspark, ...) was among them.

    .venv/bin/python benchmarks/bench_startup.py [--repeat 7] [--only help|list|sim-run|list-details]
    .venv/bin/python benchmarks/bench_startup.py --checkout DIR   # another checkout's code, e.g. an older commit
    .venv/bin/python benchmarks/bench_startup.py --baseline DIR   # this code vs DIR's, runs alternating

With `--checkout` the commands run as `python -m harness.cli ...` from that directory (so its
`harness` package is the one imported); without it, as the installed `bench` script.

Bytecode: an installed `bench` compiles each module once and reads the cached bytecode afterwards. A shell
with PYTHONDONTWRITEBYTECODE set (some sandboxes and CI images) never caches the checkout's modules, so
every start compiles the harness from source (about 0.1-0.2 s more). By default the commands run with
bytecode caching on, cached in a temporary directory (PYTHONPYCACHEPREFIX: nothing is written into the
checkout) that the warm-up run fills; `--bytecode source` measures the compile-every-time condition, and
`--bytecode env` takes whatever this shell says. The figures name the condition.

`--floor` also times what no change to the harness can remove: the interpreter (`python -c pass`) and
the imports every command or a sim run needs (typer, rich's console, pydantic - which typer uses to
convert a command's options -, numpy, pyarrow.parquet), and a one-command typer app with one option.

The sim runs write their records into a temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

BIN = Path(sys.executable).parent
HEAVY = ("pandas", "pyarrow", "scipy", "statsmodels", "matplotlib", "pyspark", "kubernetes", "confluent_kafka",
         "networkx", "requests", "prometheus_api_client")
TARGETS = {"help": 0.25, "list": 0.4, "sim-run": 0.6}
ON_REQUEST = {"list-details"}  # no target; timed only when named with --only


def commands(results: Path) -> dict[str, list[str]]:
    return {
        "help": ["--help"],
        "list": ["list"],
        "list-details": ["list", "--details"],
        "sim-run": ["run", "--backend", "sim", "--scaler", "ds2", "--query", "q11", "--pattern", "cosine",
                    "--results", str(results)],
    }


FLOOR_APP = """
import typer
app = typer.Typer()
@app.command()
def hello(name: str = "x") -> None:
    pass
@app.command()
def other() -> None:
    pass
app(["hello", "--name", "y"], standalone_mode=False)
"""
FLOOR = {
    "python -c pass": "pass",
    "import typer": "import typer",
    "import typer, rich.console": "import typer, rich.console",
    "import pydantic": "import pydantic",
    "import typer, rich.console, pydantic, yaml": "import typer, rich.console, pydantic, yaml",
    "import numpy": "import numpy",
    "import pyarrow.parquet": "import pyarrow.parquet",
    "import numpy, pyarrow.parquet, typer, yaml": "import numpy, pyarrow.parquet, typer, yaml",
    "typer app, 1 command + 1 option": FLOOR_APP,
    "the sim run's libraries (typer app + rich + yaml + numpy + pyarrow.parquet)":
        FLOOR_APP + "\nimport rich.console, rich.progress, yaml, numpy, pyarrow.parquet",
}
ENV: dict[str, str] = {}  # the children's environment, set in main()


def bytecode_env(mode: str, cache_dir: Path) -> tuple[dict[str, str], str]:
    """The children's environment for a bytecode condition, and how to name it."""
    env = {**os.environ, "COLUMNS": "100"}
    if mode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(cache_dir)
        return env, f"bytecode cached (in {cache_dir}, filled by the warm-up run)"
    if mode == "source":
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
        return env, "PYTHONDONTWRITEBYTECODE=1: the checkout's modules compiled from source at every start"
    flag = os.environ.get("PYTHONDONTWRITEBYTECODE")
    return env, f"this shell's environment (PYTHONDONTWRITEBYTECODE={flag!r})"


def time_once(argv: list[str], cwd: Path | None) -> tuple[float, float]:
    """Wall seconds and user+sys CPU seconds of one whole process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd, env=ENV)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def import_profile(args: list[str], cwd: Path | None) -> dict[str, int]:
    """Top-level package -> import microseconds (self time summed over its modules, `python -X importtime`)."""
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness.cli", *args],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=cwd, env=ENV)
    per_top: dict[str, int] = defaultdict(int)
    line = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\|(\s*)(\S+)")
    for text in proc.stderr.splitlines():
        m = line.match(text)
        if not m:
            continue
        self_us, name = int(m.group(1)), m.group(4)
        per_top[name.split(".")[0]] += self_us
    return dict(per_top)


def fmt(values: list[float]) -> str:
    return f"min {min(values):.3f}  median {statistics.median(values):.3f}  max {max(values):.3f}"


def print_floor(repeat: int, cwd: Path | None) -> None:
    """Wall times of the interpreter and of the imports no harness change can remove."""
    print("floor (what any command pays before the harness' own work):")
    for label, code in FLOOR.items():
        argv = [sys.executable, "-c", code]
        time_once(argv, cwd)
        walls = [time_once(argv, cwd)[0] for _ in range(repeat)]
        print(f"  {label:<76} wall s {fmt(walls)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--only", choices=sorted([*TARGETS, *ON_REQUEST]), action="append")
    ap.add_argument("--checkout", type=Path, help="run this checkout's harness (python -m harness.cli)")
    ap.add_argument("--bytecode", choices=("cached", "source", "env"), default="cached",
                    help="cached (default: as an installed bench), source (compile at every start) or env")
    ap.add_argument("--floor", action="store_true", help="also time the interpreter and the unavoidable imports")
    ap.add_argument("--baseline", type=Path,
                    help="another checkout (e.g. main) timed in the same run, its runs alternating with this code's, "
                         "so a change in the host's load biases neither side")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    try:
        env, condition = bytecode_env(a.bytecode, tmp / "pycache")
        ENV.clear()
        ENV.update(env)
        module = [sys.executable, "-m", "harness.cli"]
        if a.baseline and not a.checkout:  # both sides as `python -m harness.cli` from their checkout
            a.checkout = Path(__file__).resolve().parent.parent
        prefix = module if a.checkout else [str(BIN / "bench")]
        cwd = a.checkout.resolve() if a.checkout else None
        base = a.baseline.resolve() if a.baseline else None
        print(f"code: {cwd or 'installed bench'}; command: {' '.join(prefix)} ...; {condition}")
        if base:
            print(f"baseline: {base} (runs alternate with the code's)")
        print(f"host load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        if a.floor:
            print_floor(a.repeat, cwd)
        for name, args in commands(tmp / "results").items():
            if (a.only and name not in a.only) or (not a.only and name in ON_REQUEST):
                continue
            argv = [*prefix, *args]
            sides = [("", argv, cwd)] + ([("baseline ", [*module, *args], base)] if base else [])
            for _, side_argv, side_cwd in sides:
                time_once(side_argv, side_cwd)  # warm-up: file cache, .pyc files
            runs: dict[str, list[tuple[float, float]]] = {label: [] for label, _, _ in sides}
            for _ in range(a.repeat):
                for label, side_argv, side_cwd in sides:
                    runs[label].append(time_once(side_argv, side_cwd))
            print(f"bench {' '.join(args[:9])}")
            for label, _, _ in sides[::-1]:
                walls, cpus = [r[0] for r in runs[label]], [r[1] for r in runs[label]]
                target = TARGETS.get(name)
                meets = target is not None and statistics.median(walls) <= target
                verdict = "no target"
                if target is not None:
                    verdict = f"target <= {target} s: median {'meets' if meets else 'MISSES'}"
                print(f"  {label}wall s  {fmt(walls)}  (n={len(walls)}; {verdict})")
                print(f"  {label}cpu s   {fmt(cpus)}")
            profile = import_profile(args, cwd)
            top = sorted(profile.items(), key=lambda kv: -kv[1])[:8]
            print(f"  imports {sum(profile.values()) / 1e6:.3f} s self-time in total; heaviest packages: "
                  + ", ".join(f"{k} {v / 1e3:.0f} ms" for k, v in top))
            heavy = [h for h in HEAVY if h in profile]
            print(f"  heavy packages imported: {', '.join(heavy) if heavy else 'none'}")
        print(f"host load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
