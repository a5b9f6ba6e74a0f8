"""The host-speed probe (harness.host_speed) and where a run records it: local and k8s runs in their host
facts, never a sim run (it measures no host and must stay fast)."""

from __future__ import annotations

import time
from pathlib import Path

from harness.host_speed import sha256_mb_per_cpu_s, speed_ratio
from harness.record import host_facts


def test_the_probe_is_positive_repeatable_and_short() -> None:
    c0 = time.process_time()
    a = sha256_mb_per_cpu_s()
    b = sha256_mb_per_cpu_s()
    spent = time.process_time() - c0
    assert a > 0 and b > 0
    assert 1 / 3 < a / b < 3  # CPU time, not wall time: a busy shared host moves it little
    assert spent < 2.0  # two probes; ~0.15 s each on a fast machine, ~0.5 s on one 3.3x slower


def test_speed_ratio_of_an_unknown_speed_is_unknown_not_zero() -> None:
    assert speed_ratio(200.0, 100.0) == 2.0
    assert speed_ratio(None, 100.0) is None and speed_ratio(100.0, None) is None and speed_ratio(0.0, 1.0) is None


def test_host_facts_measure_the_speed_only_when_asked() -> None:
    assert "speed_sha256_mb" not in host_facts()  # a sim run's
    assert host_facts(speed=True)["speed_sha256_mb"] > 0  # a local or k8s run's


def test_a_run_on_a_measured_host_records_its_speed_and_a_sim_run_does_not(tmp_path: Path) -> None:
    """The runner stamps the probe for the backends that run on a host (a local experiment here, played by the
    simulator so no stack is needed) and leaves it out of a sim run."""
    from harness.backends.sim.backend import SimBackend
    from harness.config import Experiment
    from harness.record import read_run_record
    from harness.runner import run_experiment

    base = {"name": "probe", "query": "q1", "autoscaler": {"name": "ds2"}, "initial_parallelism": 1,
            "pattern": {"name": "cosine", "scale": 0.002, "time_scale": 60, "params": {"duration_min": 30}}}
    local = Experiment.model_validate({**base, "backend": "local"})
    sim = Experiment.model_validate({**base, "backend": "sim"})
    on_host = read_run_record(run_experiment(local, tmp_path / "local", backend=SimBackend()))
    assert on_host.meta["host"]["speed_sha256_mb"] > 0
    simulated = read_run_record(run_experiment(sim, tmp_path / "sim"))
    assert "speed_sha256_mb" not in simulated.meta["host"]
