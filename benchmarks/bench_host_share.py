"""Who gets the host's CPU while the local stack scales up: host busy/idle, CPU per process group, and
each task manager's CPU, quota throttling and run-queue wait, sampled every second beside a run.

The question it answers: after a big scale-up (e.g. 3 -> 8 task managers of 0.1 CPU), does a fresh task
manager get its full quota, or less because the 2-core host is saturated by everything else (the load
generator, the broker, the job manager, Prometheus, the other task managers)?

- host: /proc/stat (busy = user + nice + system + irq + softirq + steal; `nice` shown apart: other
  users' nice-19 work fills idle time without taking much from nice-0 processes), load average;
- per process group (task managers one by one, generator, kafka, jobmanager, prometheus, harness, other
  processes at nice 0 and niced): CPU from /proc/<pid>/stat, run-queue wait (time runnable but not on a
  CPU) summed over threads from /proc/<pid>/task/<tid>/schedstat;
- per task manager CPU cgroup (v1 cpu.stat or v2): periods, throttled periods, throttled time, the quota.

A task manager that waits on the run queue more than its cgroup was throttled wanted CPU that the host did
not give it: the host's share, not its quota, limited it.

    # beside a run (stops on SIGINT/SIGTERM or after --duration), then the table
    .venv/bin/python benchmarks/bench_host_share.py sample --workdir .bench --out results/s8/host.jsonl &
    .venv/bin/python benchmarks/bench_host_share.py report results/s8/host.jsonl \\
        --run results/s8/<matrix>/local/<cell>-r0 --bin-s 10
    .venv/bin/python benchmarks/bench_host_share.py probe   # this machine's speed per CPU-second
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import math
import os
import signal
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from harness.host_speed import sha256_mb_per_cpu_s

CLK_TCK = os.sysconf("SC_CLK_TCK")
CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
CGROUP_ROOT = Path("/sys/fs/cgroup")
GROUP_MARKERS = (
    ("TaskManagerRunner", "tm"),
    ("StandaloneSessionClusterEntrypoint", "jobmanager"),
    ("kafka.Kafka", "kafka"),
    ("bench.nexmark.Generator", "generator"),
)


def cpu_speed(chunks: int = 7) -> dict[str, float]:
    """This machine's speed per CPU-second: SHA-256 MB (harness.host_speed's probe, the one runs and profiles
    record) and thousands of interpreter loop iterations with a dict per CPU-second of this thread (branchy,
    memory-bound work, closer to a JVM's; median of `chunks`)."""
    loop = []
    for _ in range(chunks):
        d: dict[int, int] = {}
        c0 = time.thread_time()
        for i in range(200_000):
            k = (i * 7919) & 4095
            d[k] = d.get(k, 0) + i
        loop.append(200.0 / max(time.thread_time() - c0, 1e-9))
    return {"sha256_mb": sha256_mb_per_cpu_s(), "loop_k": float(np.median(loop))}


def boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def host_counters() -> dict[str, float]:
    """Cumulative seconds per CPU state over all CPUs (first line of /proc/stat)."""
    first = Path("/proc/stat").read_text().splitlines()[0].split()
    names = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
    return {n: int(v) / CLK_TCK for n, v in zip(names, first[1:9], strict=True)}


def cgroup_prefix(workdir: Path) -> str:
    """The stack's cgroup name prefix (as harness.backends.local.cgroups names them)."""
    return "bench-" + hashlib.sha1(str(workdir.expanduser().resolve()).encode()).hexdigest()[:8]


def tm_cgroups(prefix: str) -> dict[str, Path]:
    base = CGROUP_V1_CPU if (CGROUP_V1_CPU / "cpu.cfs_quota_us").exists() else CGROUP_ROOT
    return {p.name.removeprefix(prefix + "-"): p for p in base.glob(prefix + "-*") if p.is_dir()}


def cgroup_counters(path: Path) -> dict[str, float]:
    """periods, throttled periods, throttled seconds, quota (CPUs; NaN = unbounded) of one CPU cgroup."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in (path / "cpu.stat").read_text().splitlines():
            k, v = line.split()
            out[k] = float(v)
    quota = math.nan
    with contextlib.suppress(OSError, ValueError):
        if (path / "cpu.cfs_quota_us").exists():
            q, p = int((path / "cpu.cfs_quota_us").read_text()), int((path / "cpu.cfs_period_us").read_text())
            quota = q / p if q > 0 else math.nan
        else:
            qs, ps = (path / "cpu.max").read_text().split()
            quota = int(qs) / int(ps) if qs != "max" else math.nan
    throttled_s = out.get("throttled_time", math.nan) / 1e9 if "throttled_time" in out else \
        out.get("throttled_usec", math.nan) / 1e6
    return {"periods": out.get("nr_periods", math.nan), "throttled": out.get("nr_throttled", math.nan),
            "throttled_s": throttled_s, "quota": quota}


def classify(pid: int, cmdline: str, cgroup_text: str, prefix: str, me: int, harness_root: str,
             stack_root: str) -> str:
    """The process's group: its task manager's name, a service of this stack (its command line names the
    stack's work directory: another stack's services are someone else's), the harness (a Python process
    working in this worktree), or "" (someone else's)."""
    for line in cgroup_text.splitlines():
        if prefix in line:
            return line.rsplit("/", 1)[-1].removeprefix(prefix + "-")  # tm-N
    ours = stack_root in cmdline
    for marker, group in GROUP_MARKERS:
        if marker in cmdline:
            return group if ours else ""
    if pid == me:
        return "sampler"
    exe = cmdline.split("\0", 1)[0]
    if exe.endswith("prometheus"):
        return "prometheus" if ours else ""
    if "python" in exe:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{pid}/cwd") == harness_root:
                return "harness"
    return ""


def process_table(prefix: str, me: int, harness_root: str, stack_root: str) -> dict[int, dict[str, Any]]:
    """Every process: group, nice, CPU seconds, start (s since boot), per-thread run-queue wait."""
    out: dict[int, dict[str, Any]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        pid = int(d.name)
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().decode(errors="replace")
            cg = (d / "cgroup").read_text()
        except OSError:
            continue
        if not cmd:  # kernel threads
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        utime, stime, nice, start = int(fields[11]), int(fields[12]), int(fields[16]), int(fields[19])
        group = classify(pid, cmd, cg, prefix, me, harness_root, stack_root)
        if not group:
            group = "other-nice0" if nice <= 0 else "other-niced"
        waits: dict[int, float] = {}
        if group not in ("other-nice0", "other-niced"):
            with contextlib.suppress(OSError):
                for t in (d / "task").iterdir():
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        waits[int(t.name)] = int((t / "schedstat").read_text().split()[1]) / 1e9
        out[pid] = {"group": group, "nice": nice, "cpu_s": (utime + stime) / CLK_TCK, "start": start / CLK_TCK,
                    "waits": waits}
    return out


def sample(args: argparse.Namespace) -> None:
    prefix = cgroup_prefix(args.workdir)
    stack_root = str(args.workdir.expanduser().resolve())
    me = os.getpid()
    harness_root = str(Path.cwd())
    stop = {"now": False}

    def _stop(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    btime = boot_time()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    t_end = time.monotonic() + args.duration if args.duration else math.inf
    with args.out.open("a") as fh:
        fh.write(json.dumps({"kind": "start", "wall": time.time(), "btime": btime, "cpus": os.cpu_count(),
                             "loadavg": Path("/proc/loadavg").read_text().split()[:3], "prefix": prefix,
                             "cpu_speed_per_cpu_s": cpu_speed()}) + "\n")
        nxt = time.monotonic()
        while not stop["now"] and time.monotonic() < t_end:
            wall = time.time()
            procs = process_table(prefix, me, harness_root, stack_root)
            row = {"kind": "sample", "wall": wall, "host": host_counters(),
                   "loadavg": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]],
                   "procs": {str(p): {"g": v["group"], "cpu": v["cpu_s"], "start": v["start"],
                                      "wait": v["waits"]} for p, v in procs.items()},
                   "cgroups": {name: cgroup_counters(path) for name, path in tm_cgroups(prefix).items()}}
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            nxt += args.interval
            time.sleep(max(0.0, nxt - time.monotonic()))


# ---------------------------------------------------------------------------------------------- report

def deltas(rows: list[dict[str, Any]], btime: float) -> pd.DataFrame:
    """Per interval between consecutive samples and group: cores used, run-queue wait (threads' mean
    waiting, in cores' worth), and for task managers the cgroup's throttling; long format."""
    out: list[dict[str, Any]] = []
    for a, b in zip(rows[:-1], rows[1:], strict=True):
        dt = b["wall"] - a["wall"]
        if dt <= 0:
            continue
        t = b["wall"]
        ha, hb = a["host"], b["host"]
        tot = sum(hb.values()) - sum(ha.values())
        if tot > 0:
            for k in ("idle", "nice", "iowait"):
                out.append({"wall": t, "group": "host", "what": k, "value": (hb[k] - ha[k]) / tot})
        out.append({"wall": t, "group": "host", "what": "load1", "value": b["loadavg"][0]})
        cpu: dict[str, float] = defaultdict(float)
        wait: dict[str, float] = defaultdict(float)
        for pid, pb in b["procs"].items():
            pa = a["procs"].get(pid)
            started_between = pb["start"] + btime > a["wall"]
            if pa is None and not started_between:
                continue  # alive before but not seen (a read failed): no delta
            cpu[pb["g"]] += pb["cpu"] - (pa["cpu"] if pa else 0.0)
            for tid, w in pb["wait"].items():
                wa = pa["wait"].get(tid) if pa else None
                if wa is not None or started_between:
                    wait[pb["g"]] += w - (wa or 0.0)
        for g, c in cpu.items():
            out.append({"wall": t, "group": g, "what": "cores", "value": c / dt})
            out.append({"wall": t, "group": g, "what": "cpu_s", "value": c})
        for g, w in wait.items():
            out.append({"wall": t, "group": g, "what": "wait", "value": w / dt})
        for name, cb in b["cgroups"].items():
            ca = a["cgroups"].get(name)
            out.append({"wall": t, "group": name, "what": "quota", "value": cb["quota"]})
            if ca is None:
                continue
            periods = cb["periods"] - ca["periods"]
            out.append({"wall": t, "group": name, "what": "throttled_frac",
                        "value": (cb["throttled"] - ca["throttled"]) / periods if periods > 0 else 0.0})
            out.append({"wall": t, "group": name, "what": "throttled_s",
                        "value": (cb["throttled_s"] - ca["throttled_s"]) / dt})
    return pd.DataFrame(out)


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    head: dict[str, Any] = {}
    rows = []
    for line in path.read_text().splitlines():
        rec = json.loads(line)
        if rec["kind"] == "start" and not head:
            head = rec
        elif rec["kind"] == "sample":
            rows.append(rec)
    return head, rows


def run_start_wall(rows: list[dict[str, Any]], btime: float) -> float | None:
    """The run's t = 0 on the wall clock: the load generator's start (the backend starts it as the job runs)."""
    starts = [p["start"] for r in rows for p in r["procs"].values() if p["g"] == "generator"]
    return min(starts) + btime if starts else None


def startups(df: pd.DataFrame, rows: list[dict[str, Any]], btime: float) -> pd.DataFrame:
    """Task managers seen starting: JVM start, registration (their quota dropped from the start-up boost to the
    configured one), wall seconds and CPU-seconds in between."""
    starts: dict[str, float] = {}
    for r in rows:
        for p in r["procs"].values():
            if p["g"].startswith("tm-"):
                starts[p["g"]] = min(starts.get(p["g"], math.inf), p["start"] + btime)
    out = []
    for tm, t_start in starts.items():
        q = df[(df["group"] == tm) & (df["what"] == "quota")].sort_values("wall")
        if q.empty or t_start < rows[0]["wall"]:
            continue  # started before the sampler: its start-up was not seen
        low = float(q["value"].min())
        boosted = q[q["value"] > low + 1e-9]
        if boosted.empty:
            continue
        after = q[(q["wall"] > float(boosted["wall"].max())) & (q["value"] <= low + 1e-9)]
        if after.empty:
            continue
        # the quota is read at the end of each interval: the drop happened within the first interval
        # ending with the low quota; count that interval's CPU (the registration falls inside it)
        t_reg = float(after["wall"].iloc[0])
        c = df[(df["group"] == tm) & (df["what"] == "cpu_s") & (df["wall"] <= t_reg)]
        out.append({"tm": tm, "start": t_start, "registered": t_reg, "wall_s": t_reg - t_start,
                    "cpu_s": float(c["value"].sum()), "boost": float(boosted["value"].max()), "quota": low})
    return pd.DataFrame(out)


def host_share(df: pd.DataFrame, ups: pd.DataFrame, run: Path, t0: float, cpus: int, command: str) -> Any:
    """The measured HostShare: fixed CPU (job manager, Prometheus, harness, and the generator and broker's
    intercept), the generator and broker's CPU per record (least squares over 10-s bins of the run against the
    input rate), and the start-up CPU of the task managers a scale-up started (not the stack's first ones)."""
    from scipy import stats

    from harness.calibrated_profile import HostShare
    from harness.record import read_run_record
    from harness.vocabulary import Metric

    rec = read_run_record(run)
    inp = rec.series(Metric.INPUT_RATE.value)
    end = float(rec.meta["duration_s"])
    xs, ys, fixed = [], [], []
    for a in np.arange(0.0, end - 9.999, 10.0):
        part = df[(df["t"] > a) & (df["t"] <= a + 10.0) & (df["what"] == "cores")]
        per = part.groupby("group")["value"].mean()
        rate = inp[(inp.index >= a) & (inp.index < a + 10.0)].mean()
        if not math.isfinite(rate):
            continue
        xs.append(rate)
        ys.append(float(per.get("generator", 0.0) + per.get("kafka", 0.0)))
        fixed.append(float(per.get("jobmanager", 0.0) + per.get("prometheus", 0.0) + per.get("harness", 0.0)))
    ups = ups[ups["start"] > t0]  # a scale-up's: the stack's first ones start beside the job manager and wait for it
    if ups.empty:
        raise SystemExit("no task manager started during the run: no scale-up start-up to measure")
    lr = stats.linregress(xs, ys)
    print(f"\ngenerator + broker cores = {lr.intercept:.3f} + {lr.slope * 1e6:.2f} us x input rec/s "
          f"(r = {lr.rvalue:.2f}, {len(xs)} 10-s bins, input {min(xs):,.0f}-{max(xs):,.0f} rec/s); "
          f"job manager + Prometheus + harness {np.mean(fixed):.3f} cores")
    return HostShare(cpus=float(cpus), fixed_cores=float(np.mean(fixed) + max(0.0, lr.intercept)),
                     cores_per_record=float(lr.slope), startup_cpu_s=float(ups["cpu_s"].mean()),
                     startup_cores=float(ups["boost"].max()), samples=[round(x, 3) for x in ups["cpu_s"]],
                     measured=command)


def report(args: argparse.Namespace) -> None:
    head, rows = load(args.samples)
    btime = float(head.get("btime", boot_time()))
    df = deltas(rows, btime)
    t0 = run_start_wall(rows, btime) if args.t0 is None else args.t0
    if t0 is None:
        t0 = rows[0]["wall"]
        print("# no generator seen: t = 0 is the first sample")
    df["t"] = df["wall"] - t0
    print(f"# samples {len(rows)} from {time.strftime('%H:%M:%S', time.gmtime(rows[0]['wall']))} UTC; "
          f"load before {head.get('loadavg')}; run t = 0 at {time.strftime('%H:%M:%S', time.gmtime(t0))} UTC; "
          f"CPU speed per CPU-s {head.get('cpu_speed_per_cpu_s')}")
    thr = None
    if args.run is not None:
        from harness.record import read_run_record
        from harness.vocabulary import Metric

        rec = read_run_record(args.run)
        thr = rec.series(Metric.THROUGHPUT.value)
        inp = rec.series(Metric.INPUT_RATE.value)
        tms = rec.series(Metric.TASKMANAGERS.value)
        ev = rec.events_table.to_pandas()
        print("# run events:")
        for _, e in ev.iterrows():
            if str(e["kind"]) in ("decision", "action"):
                print(f"#   t={float(e['ts']):6.1f} {e['kind']}: {str(e['reason'])[:110]}")
    lo, hi = args.from_s, args.to_s if args.to_s is not None else float(df["t"].max())
    edges = np.arange(lo, hi + 1e-9, args.bin_s)
    tm_names = sorted({g for g in df["group"].unique() if g.startswith("tm-")}, key=lambda s: int(s[3:]))
    groups = ["generator", "kafka", "jobmanager", "prometheus", "harness", "sampler", "other-nice0", "other-niced"]

    def mean(g: str, what: str, a: float, b: float) -> float:
        part = df[(df["group"] == g) & (df["what"] == what) & (df["t"] > a) & (df["t"] <= b)]
        return float(part["value"].mean()) if len(part) else math.nan

    def sum_tms(what: str, a: float, b: float) -> float:
        part = df[df["group"].str.startswith("tm-") & (df["what"] == what) & (df["t"] > a) & (df["t"] <= b)]
        return float(part.groupby("wall")["value"].sum().mean()) if len(part) else math.nan

    print(f"\nper {args.bin_s:g}-s bin (t from the run's start): host idle / nice fraction, cores per group, "
          "task managers' total and count; thr = records/s the sources took, input = produced, reg = registered "
          "task managers (run record)")
    hdr = f"{'t':>9} {'idle':>5} {'nice':>5} {'load':>5} " + " ".join(f"{g[:9]:>9}" for g in groups) + \
        f" {'TMs':>6} {'nTM':>4} {'thr':>7} {'input':>7} {'reg':>4}"
    print(hdr)
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        n_tm = df[df["group"].str.startswith("tm-") & (df["what"] == "cores") & (df["t"] > a) & (df["t"] <= b)]
        ntm = n_tm.groupby("wall")["group"].nunique().mean() if len(n_tm) else math.nan
        line = f"{a:>4.0f}-{b:<4.0f} {mean('host', 'idle', a, b):>5.2f} {mean('host', 'nice', a, b):>5.2f} " \
               f"{mean('host', 'load1', a, b):>5.1f} " + " ".join(f"{mean(g, 'cores', a, b):>9.3f}" for g in groups)
        line += f" {sum_tms('cores', a, b):>6.3f} {ntm:>4.1f}"
        if thr is not None:
            pt = thr[(thr.index >= a) & (thr.index < b)]
            pi = inp[(inp.index >= a) & (inp.index < b)]
            pn = tms[(tms.index >= a) & (tms.index < b)]
            line += f" {pt.mean() if len(pt) else math.nan:>7,.0f} {pi.mean() if len(pi) else math.nan:>7,.0f}" \
                    f" {pn.mean() if len(pn) else math.nan:>4.1f}"
        print(line)
    print(f"\nper task manager and {args.bin_s:g}-s bin: cores used / quota / fraction of periods throttled / "
          "run-queue wait (threads' seconds waiting per second)")
    for tm in tm_names:
        cells = []
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            c, q = mean(tm, "cores", a, b), mean(tm, "quota", a, b)
            th, w = mean(tm, "throttled_frac", a, b), mean(tm, "wait", a, b)
            cells.append("    -    " if math.isnan(c) else f"{c:.3f}/{q:.2g}/{th:.2f}/{w:.2f}")
        print(f"{tm:>6} " + " ".join(f"{x:>20}" for x in cells))
    print(f"\nrun-queue wait of the unbounded groups per {args.bin_s:g}-s bin (threads' s waiting per s)")
    for g in ("generator", "kafka", "jobmanager", "prometheus", "harness"):
        print(f"{g:>10} " + " ".join(f"{mean(g, 'wait', a, b):>6.2f}" for a, b in zip(edges[:-1], edges[1:],
                                                                                         strict=True)))
    ups = startups(df, rows, btime)
    if len(ups):
        print("\ntask managers started while sampling: JVM start -> registered (quota back from the start-up boost)")
        for _, u in ups.iterrows():
            print(f"{u['tm']:>6}  t {u['start'] - t0:6.1f} -> {u['registered'] - t0:6.1f} s  wall {u['wall_s']:5.1f} s"
                  f"  CPU {u['cpu_s']:5.2f} s  (boost {u['boost']:g}, quota {u['quota']:g})")
    if args.csv is not None:
        df.to_csv(args.csv, index=False)
    if args.profile is not None:
        from harness.calibrated_profile import read_profile

        if args.run is None or not len(ups):
            raise SystemExit("--profile needs --run and task managers started while sampling")
        cmd = args.command or "benchmarks/bench_host_share.py report " + str(args.samples.name)
        host = host_share(df, ups, args.run, t0, int(head.get("cpus", os.cpu_count() or 1)), cmd)
        prof = read_profile(args.profile)
        prof = prof.model_copy(update={"host": host})
        print(f"host share for {args.profile}: {host.model_dump()}")
        prof.save(args.profile.parent)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("sample", help="sample until SIGINT/SIGTERM or --duration")
    s.add_argument("--workdir", type=Path, default=Path(".bench"), help="the local stack's work directory")
    s.add_argument("--out", type=Path, required=True, help="JSON lines, appended")
    s.add_argument("--interval", type=float, default=1.0)
    s.add_argument("--duration", type=float, default=0.0, help="seconds (0: until stopped)")
    r = sub.add_parser("report", help="the tables from a sample file")
    r.add_argument("samples", type=Path)
    r.add_argument("--run", type=Path, default=None, help="the local run's record (throughput, input rate)")
    r.add_argument("--bin-s", type=float, default=10.0)
    r.add_argument("--from-s", type=float, default=-30.0)
    r.add_argument("--to-s", type=float, default=None)
    r.add_argument("--t0", type=float, default=None, help="wall-clock t = 0 (default: the generator's start)")
    r.add_argument("--csv", type=Path, default=None, help="also write the per-interval values")
    r.add_argument("--profile", type=Path, default=None,
                   help="write the measured host share into this calibrated profile (needs --run)")
    r.add_argument("--command", default=None, help="how the samples were taken (recorded with the host share)")
    sub.add_parser("probe", help="print this machine's speed per CPU-second (compare sessions' machines)")
    a = ap.parse_args()
    if a.cmd == "probe":
        speed = cpu_speed()
        print(f"per CPU-second: {speed['sha256_mb']:.0f} MB of SHA-256, {speed['loop_k']:.0f}k dict-loop iterations"
              " (medians)")
    else:
        sample(a) if a.cmd == "sample" else report(a)


if __name__ == "__main__":
    main()
