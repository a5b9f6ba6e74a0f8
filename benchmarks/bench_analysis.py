"""Analysis benchmark: `bench analyze` on 500 / 2,000 / 5,000 synthetic run records, Spark vs pandas.

Generates synthetic 140-minute runs at 5 s resolution (job-level metrics + per-operator
metrics for 3 operators, long format, ~25 k rows per run; 20 cells round-robin) once
into `--data` (reused when it holds enough), links the first N of them into
`<data>/n<N>/`, and runs the whole analysis - discover, per-run summaries, per-cell
aggregates, tables written - once per engine and repetition, each in a fresh child
process so that

- wall time is what `bench analyze --engine E` costs (Spark start included), and
- peak memory is the resident set of the whole process tree (the Spark JVM included),
  sampled every 50 ms.

Engines alternate within a repetition (the machine is shared and noisy: compare
ratios within one repetition). Both engines' runs.parquet and cells.csv are
compared (rtol 1e-6) for every N. Target (issue 12): Spark at least as fast as
pandas from 2,000 runs up.

    flock /tmp/bench-realstack.lock .venv/bin/python benchmarks/bench_analysis.py \
        [--runs 500 2000 5000] [--repeat 3] [--engines pandas spark] [--data DIR] [--master local[*]]

With `--data DIR --generate-only` it only writes the records (one lock hold), and a later
invocation with the same `--data` measures without generating again.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from harness.analysis.aggregate import CELL_KEYS, compare_frames
from harness.analysis.synthetic import synthetic_run

AUTOSCALERS = {"ds2": 1.0, "dhalion": 0.85, "hpa-cpu": 1.3, "hpa-varga": 1.15, "flink-operator": 1.05}
QUERIES = ("q1", "q11")
PATTERNS = ("cosine", "convergence")
CELLS = [(q, p, a) for q in QUERIES for p in PATTERNS for a in AUTOSCALERS]


def run_name(i: int) -> str:
    query, pattern, name = CELLS[i % len(CELLS)]
    return f"{query}_{pattern}_{name}-r{i // len(CELLS)}"


def generate(root: Path, runs: int, minutes: float, step_s: float, console: Console) -> None:
    """Write run records 0..runs-1 under root/all/bench/ (those already there are kept)."""
    todo = [i for i in range(runs) if not (root / "all" / "bench" / run_name(i) / "status").exists()]
    if not todo:
        return
    t0 = time.perf_counter()
    with Progress(TextColumn("generating run records"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as bar:
        task = bar.add_task("gen", total=len(todo))
        for i in todo:
            query, pattern, name = CELLS[i % len(CELLS)]
            rep = i // len(CELLS)
            synthetic_run(root / "all" / "bench" / run_name(i), autoscaler=name, query=query, pattern=pattern,
                          seed=i + 1, repetition=rep, duration_s=minutes * 60, step_s=step_s,
                          lag_factor=AUTOSCALERS[name] * (1 + 0.02 * (rep % 5)), faults=int(i % 37 == 0),
                          matrix="bench")
            bar.advance(task)
    console.print(f"generated {len(todo)} run records in {time.perf_counter() - t0:.0f} s under {root / 'all'}")


def subset(root: Path, n: int) -> Path:
    """root/n<N>/bench/: hard links to the first n records (cheap, and a plain results directory)."""
    out = root / f"n{n}"
    if (out / ".complete").exists():
        return out
    shutil.rmtree(out, ignore_errors=True)
    for i in range(n):
        src = root / "all" / "bench" / run_name(i)
        dst = out / "bench" / run_name(i)
        dst.mkdir(parents=True)
        for f in src.iterdir():
            os.link(f, dst / f.name)
    (out / ".complete").touch()
    return out


def worker(engine: str, results: Path, out: Path, master: str) -> None:
    """Child process: one `bench analyze`, timings as one JSON line on stdout."""
    from harness.analysis.pipeline import analyze

    t0 = time.perf_counter()
    steps: dict[str, float] = {}
    last = [t0, ""]

    def progress(msg: str) -> None:
        now = time.perf_counter()
        if last[1]:
            steps[str(last[1])] = steps.get(str(last[1]), 0.0) + now - float(last[0])
        last[:] = [now, msg.split(" ")[0] if msg.startswith("run ") else msg]

    outputs = analyze(results, out, engine=engine, master=master, progress=progress)  # type: ignore[arg-type]
    end = time.perf_counter()
    progress("")
    steps.pop("", None)
    print(json.dumps({"engine": getattr(outputs, "engine", engine),
                      "analyze_s": end - t0, "runs": len(outputs.result.summary), "steps": steps}))


def measure(engine: str, results: Path, out: Path, master: str) -> dict[str, float | str | dict]:
    """Run the worker; wall time, and the peak summed RSS and the CPU time of its process tree."""
    cmd = [sys.executable, __file__, "--worker", engine, "--results", str(results), "--out", str(out),
           "--master", master]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ps = psutil.Process(proc.pid)
    peak = 0
    cpu: dict[int, float] = {}  # pid -> CPU seconds last seen (a process's last 50 ms may be missed)
    while proc.poll() is None:
        try:
            tree = [ps, *ps.children(recursive=True)]
        except psutil.Error:
            tree = []
        rss = 0
        for p in tree:
            try:
                with p.oneshot():
                    rss += p.memory_info().rss
                    t = p.cpu_times()
                    cpu[p.pid] = t.user + t.system
            except psutil.Error:
                pass
        peak = max(peak, rss)
        time.sleep(0.05)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"{engine} worker failed ({proc.returncode}):\n{stderr[-4000:]}")
    result = json.loads(stdout.strip().splitlines()[-1])
    result.update({"process_s": wall, "peak_mib": peak / 2**20, "cpu_s": sum(cpu.values()),
                   "console": stderr.strip()})
    return result


def agree(a: Path, b: Path) -> list[str]:
    import pandas as pd

    runs_a, runs_b = pd.read_parquet(a / "runs.parquet"), pd.read_parquet(b / "runs.parquet")
    cells_a, cells_b = pd.read_csv(a / "cells.csv"), pd.read_csv(b / "cells.csv")
    return compare_frames(runs_a, runs_b, ["run_id"]) + compare_frames(cells_a, cells_b, CELL_KEYS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, nargs="+", default=[500, 2000, 5000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", nargs="+", default=["pandas", "spark"])
    ap.add_argument("--minutes", type=float, default=140.0)
    ap.add_argument("--step", type=float, default=5.0)
    ap.add_argument("--data", type=Path, default=None, help="keep/reuse the generated records here")
    ap.add_argument("--master", default="local[*]")
    ap.add_argument("--generate-only", action="store_true",
                    help="write the run records into --data and stop (a separate, shorter lock hold)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--results", type=Path, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.results, args.out, args.master)
        return
    if args.generate_only and args.data is None:
        ap.error("--generate-only needs --data DIR (where the records are kept)")
    console = Console()
    tmp = None
    root = args.data
    if root is None:
        tmp = tempfile.mkdtemp(prefix="bench-analysis-")
        root = Path(tmp)
    try:
        generate(root, max(args.runs), args.minutes, args.step, console)
        if args.generate_only:
            return
        console.print(f"{os.cpu_count()} cores, {psutil.virtual_memory().total / 2**30:.0f} GiB, "
                      f"{args.minutes:.0f}-minute runs at {args.step:g} s (~25 k long-format rows per run)")
        figures: dict[tuple[int, str], list[dict]] = {}
        for n in args.runs:
            results = subset(root, n)
            for rep in range(args.repeat):
                engines = args.engines if rep % 2 == 0 else list(reversed(args.engines))
                for engine in engines:
                    out = root / "_out" / f"n{n}-{engine}"
                    shutil.rmtree(out, ignore_errors=True)
                    got = measure(engine, results, out, args.master)
                    figures.setdefault((n, engine), []).append(got)
                    steps = ", ".join(f"{k} {v:.1f}" for k, v in got["steps"].items())  # type: ignore[union-attr]
                    console.print(f"n={n} rep {rep + 1} {engine}: {got['analyze_s']:.1f} s analyze "
                                  f"({got['process_s']:.1f} s process, CPU {got['cpu_s']:.0f} s), "
                                  f"peak {got['peak_mib']:.0f} MiB, load {os.getloadavg()[0]:.1f} [{steps}]",
                                  markup=False, highlight=False)
                    if got["console"]:
                        console.print(f"  [yellow]stderr of the analysis:[/yellow] {str(got['console'])[:500]}")
            if len(args.engines) == 2:
                problems = agree(*(root / "_out" / f"n{n}-{e}" for e in args.engines))
                if problems:
                    console.print(f"[red]n={n}: the engines DISAGREE:[/red]")
                    for p in problems[:20]:
                        console.print(f"  {p}")
                else:
                    console.print(f"n={n}: both engines give the same runs.parquet and cells.csv (rtol 1e-6)")
        table = Table(title=f"bench analyze, median of {args.repeat} (min-max); peak RSS of the process tree")
        for col in ("runs", "engine", "wall s", "CPU s", "peak MiB", "vs pandas"):
            table.add_column(col, justify="right")
        for (n, engine), got in figures.items():
            times = [float(g["analyze_s"]) for g in got]
            ratio = ""
            if engine != "pandas" and (n, "pandas") in figures:
                base = statistics.median(float(g["analyze_s"]) for g in figures[(n, "pandas")])
                ratio = f"{statistics.median(times) / base:.2f}x"
            cpus = [float(g["cpu_s"]) for g in got]
            table.add_row(str(n), engine, f"{statistics.median(times):.1f} ({min(times):.1f}-{max(times):.1f})",
                          f"{statistics.median(cpus):.0f}", f"{max(float(g['peak_mib']) for g in got):.0f}", ratio)
            console.print(f"RESULT runs={n} engine={engine} median_s={statistics.median(times):.1f} "
                          f"times={','.join(f'{t:.1f}' for t in times)} "
                          f"cpu_s={statistics.median(float(g['cpu_s']) for g in got):.0f} "
                          f"peak_mib={max(float(g['peak_mib']) for g in got):.0f}")
        console.print(table)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
