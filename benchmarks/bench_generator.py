"""Load generator alone into a real Kafka broker: sustained records/s (issue 3 target: >= 50,000/s).

Starts a Kafka broker of its own with the local stack's Kafka service (work directory
/tmp/bench-generator-kafka, ports offset by 1000 so it does not collide with `bench up`), unless
`--bootstrap` points at a running broker; creates the topic (24 partitions); runs the Java generator
(`bench.nexmark.Generator`) at a constant target well above 50 k/s for `--duration` seconds; reads
its Prometheus endpoint once a second; prints the sustained rate after a warm-up, the per-second
spread, and the records it had to skip. Everything it started is stopped at the end (and the
broker's data deleted).

    .venv/bin/python benchmarks/bench_generator.py                       # 30 s at 150 k/s target
    .venv/bin/python benchmarks/bench_generator.py --rate 80000 --producers 3 --duration 20
    .venv/bin/python benchmarks/bench_generator.py --topics persons,auctions
    .venv/bin/python benchmarks/bench_generator.py --no-kafka            # generation cost only

On a shared 2-core machine the broker and the generator compete for the same cores: the figure
is what this machine sustains end to end, not the generator's ceiling (see --no-kafka for that).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from harness.backends.local.jobjar import ensure_jar
from workloads.generator import Generator

WORKDIR = Path("/tmp/bench-generator-kafka")
PORT_OFFSET = 1000


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a process so far (Linux /proc), or None."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_kafka() -> tuple[object, str]:
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack

    stack = LocalStack(LocalConfig.model_validate({"workdir": WORKDIR, "port_offset": PORT_OFFSET}))
    inst = stack.ensure_installed(lambda m: print(f"  [install] {m}"))
    stack.kafka.start(inst)
    deadline = time.monotonic() + 90
    while not stack.kafka.healthy():
        if time.monotonic() > deadline:
            stack.kafka.stop()
            raise SystemExit(f"kafka not healthy after 90 s; see {stack.kafka.log_file()}")
        time.sleep(0.5)
    return stack, stack.kafka_bootstrap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=150_000, help="target records/s (constant)")
    ap.add_argument("--duration", type=int, default=30, help="seconds of load")
    ap.add_argument("--warmup", type=int, default=5, help="seconds ignored at the start")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--topics", default="bids")
    ap.add_argument("--bootstrap", default=None, help="use this broker instead of starting one")
    ap.add_argument("--partitions", type=int, default=24)
    ap.add_argument("--metrics-port", type=int, default=9405 + PORT_OFFSET)
    ap.add_argument("--no-kafka", action="store_true", help="generate without sending (generator cost)")
    ap.add_argument("--compression", default=None, help="producer compression (default: the generator's, lz4)")
    ap.add_argument("--linger-ms", type=int, default=None, help="producer linger.ms (default: the generator's, 5)")
    a = ap.parse_args()

    jar = ensure_jar(lambda m: print(f"  [build] {m}"))
    stack = None
    bootstrap = a.bootstrap or "127.0.0.1:1"
    topics = [t.strip() for t in a.topics.split(",")]
    if not a.no_kafka and a.bootstrap is None:
        print("starting kafka ...")
        stack, bootstrap = start_kafka()
    try:
        if stack is not None:
            stack.ensure_topics(topics, a.partitions)  # type: ignore[attr-defined]
        extra = ["--log-every-s", "0"] + (["--no-kafka"] if a.no_kafka else [])
        if a.compression:
            extra += ["--compression", a.compression]
        if a.linger_ms is not None:
            extra += ["--linger-ms", str(a.linger_ms)]
        with tempfile.TemporaryDirectory(prefix="bench-gen-") as tmp:
            gen = Generator(jar=jar, bootstrap=bootstrap, topics=topics, workdir=Path(tmp),
                            producers=a.producers, metrics_port=a.metrics_port, extra_args=extra)
            gen.start(rates=[a.rate] * (a.duration + 2))
            broker_pid = stack.sup.get("kafka").pid if stack is not None else None  # type: ignore[attr-defined]
            t0 = time.monotonic()
            samples: list[tuple[float, int, int]] = []  # (t, produced, skipped)
            cpu: list[tuple[float | None, float | None]] = []  # (generator, broker) CPU s per sample
            while time.monotonic() - t0 < a.duration:
                m = gen.metrics()
                samples.append((time.monotonic() - t0, m.total, m.skipped))
                cpu.append((cpu_seconds(gen.pid), cpu_seconds(broker_pid)))
                time.sleep(1.0 - (time.monotonic() - t0) % 1.0)
            final = gen.stop()
    finally:
        if stack is not None:
            # the produced data is only ballast (hundreds of MB per run): the stack directory goes
            stack.down(purge=True)  # type: ignore[attr-defined]

    first = next((i for i, s in enumerate(samples) if s[0] >= a.warmup), len(samples))
    steady = samples[first:]
    if len(steady) < 2:
        raise SystemExit("run too short for a measurement")
    (t_a, n_a, k_a), (t_b, n_b, k_b) = steady[0], steady[-1]
    (g_a, b_a), (g_b, b_b) = cpu[first], cpu[-1]
    sustained = (n_b - n_a) / (t_b - t_a)
    per_s = [(b[1] - p[1]) / (b[0] - p[0]) for p, b in zip(steady, steady[1:], strict=False)]
    print()
    print(f"generator -> {'(no kafka)' if a.no_kafka else 'kafka ' + bootstrap}: topics={','.join(topics)} "
          f"producers={a.producers} target={a.rate:,.0f}/s cores={os.cpu_count()}")
    print(f"sustained rate over {t_b - t_a:.0f} s after {a.warmup} s warm-up: {sustained:,.0f} records/s")
    print(f"per-second rate: min {min(per_s):,.0f}  median {statistics.median(per_s):,.0f}  "
          f"max {max(per_s):,.0f}")
    print(f"skipped (generator behind target) in that window: {k_b - k_a:,}")
    if n_b > n_a and g_a is not None and g_b is not None:
        us_gen = (g_b - g_a) / (n_b - n_a) * 1e6
        line = f"CPU per record: generator {us_gen:.2f} us"
        if b_a is not None and b_b is not None:
            us_broker = (b_b - b_a) / (n_b - n_a) * 1e6
            line += (f", broker {us_broker:.2f} us -> both on {os.cpu_count()} idle cores: "
                     f"~{(os.cpu_count() or 1) / (us_gen + us_broker) * 1e6:,.0f} records/s")
        print(line)
    if final is not None:
        print(f"total acknowledged: {final.produced}  send errors: {final.errors}")
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
