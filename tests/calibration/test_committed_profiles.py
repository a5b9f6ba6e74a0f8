"""The calibrated profiles committed in queries/topologies/calibrated/: physically sensible, and the ones the sim uses.

A profile measured on a contended host can fit a line that contradicts its own data, or a capacity that
falls with more CPU; these checks stop such a profile from moving every sim run of its query unnoticed.
They read the committed files only (no measurement), so they take milliseconds.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from harness.backends.sim.config import SimConfig
from harness.backends.sim.costs import run_costs
from harness.calibrated_profile import (
    CALIBRATED_DIR,
    SaturationPool,
    SharePoint,
    load_profile,
    profile_quotas,
    read_profile,
)
from harness.calibration import fit
from harness.topology import load_topology

FILES = sorted(Path(CALIBRATED_DIR).glob("*.yaml"))
COMMITTED = sorted({p.name.split(".cpu-")[0] for p in FILES})  # the calibrated queries
FIT_TOLERANCE = 0.15  # of the capacity at share 1.0: how far the fitted line may pass from a saturated point


def test_q1_has_a_committed_profile() -> None:
    assert "q1" in COMMITTED


def test_every_committed_profile_is_named_by_its_query_and_quota() -> None:
    for path in FILES:
        prof = read_profile(path)
        assert path.name == f"{prof.query}.cpu-{prof.cpu_quota:g}.yaml", path.name
        assert profile_quotas(prof.query)[prof.cpu_quota] == path


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_committed_profile_was_measured_with_the_local_default_jit(path: Path) -> None:
    """A sim run of a local experiment is the same experiment only if the profile describes the JVMs the local
    run starts: with C2 a 0.1-0.25 CPU task manager compiles for minutes, with C1 it settles in seconds."""
    from harness.backends.local.config import LocalConfig

    prof = read_profile(path)
    assert prof.provenance.taskmanager_jit == LocalConfig().taskmanager_jit


def pooled(shares: list[SharePoint], pool: SaturationPool, quota: float) -> dict[float, float]:
    """Share -> the saturation the fit was made from, by the rule the profile records: the median pool (session 28
    on, `fit.envelope`), or, before it, the fastest saturation lifted to the fastest rate seen at its share (a
    subtask seen processing more than a saturation measured at the same share showed it held back by the host)."""
    if pool is SaturationPool.MEDIAN:
        return {p.share: p.capacity for p in fit.envelope(shares, quota)}
    fastest: dict[float, float] = {}
    for sp in shares:
        if sp.saturated:
            fastest[sp.share] = max(fastest.get(sp.share, 0.0), sp.capacity)
    return {share: max([cap] + [sp.capacity for sp in shares if sp.share == share]) for share, cap in fastest.items()}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_committed_profile_is_physically_sensible(path: Path) -> None:
    prof = read_profile(path)
    query = prof.query
    pv = prof.provenance
    assert pv.command.startswith("bench calibrate") and pv.cpu_model and pv.host_cpus >= 1
    assert math.isfinite(pv.host_load.before_1m), "the host's load must be recorded with the measurement"
    topo = load_topology(query)
    assert set(prof.operators) == set(topo.names)
    quota = prof.cpu_quota
    for name, op in prof.operators.items():
        sat_f = op.cpu.saturated_fraction
        assert 0.0 < sat_f <= 1.0, name
        cores = np.linspace(0.0, 2.0 * quota, 41)
        caps = np.array([op.capacity_fit.capacity(c * sat_f) for c in cores])
        assert np.all(np.diff(caps) >= 0.0), f"{name}: capacity falls with more CPU"
        full = op.capacity_fit.capacity(quota * sat_f)
        assert full > 0.0, f"{name}: no capacity at the full quota"
        assert 0.0 <= op.selectivity < 10.0, name
        for share, measured in pooled(op.shares, op.capacity_fit.pool, quota).items():
            fitted = op.capacity_fit.capacity(share * quota * sat_f)
            assert abs(fitted - measured) <= FIT_TOLERANCE * full, (
                f"{name} at share {share}: fitted {fitted:.0f} rec/s, measured {measured:.0f}")
    assert prof.taskmanager_startup_s.mean > 0.0
    for method, m in prof.rescale_downtime.items():  # the line passes through the query's own measurements
        known = [(st, d) for st, d in m.points if math.isfinite(st)]
        if known:
            mean_state = float(np.mean([st for st, _ in known]))
            assert m.downtime(mean_state) == pytest.approx(float(np.mean([d for _, d in known])), abs=0.05), method
        assert all(m.downtime(st) >= 0.0 for st in (0.0, 1e8, 1e9)), method


@pytest.mark.parametrize("query", COMMITTED)
def test_the_sim_runs_on_the_profile_of_the_nearest_quota_unless_told_otherwise(query: str) -> None:
    topo = load_topology(query)
    quotas = profile_quotas(query)
    for cores in (0.05, 0.1, 0.2, 0.25, 1.0, 4.0):
        nearest = min(quotas, key=lambda q: (abs(math.log(cores / q)), -q))
        prof = read_profile(quotas[nearest])
        assert load_profile(query, cores=cores) == prof
        costs = run_costs(topo, SimConfig(), tm_cores=cores)
        assert costs.calibrated and prof.provenance.date in costs.source and f"at {nearest:g} CPU" in costs.source
        src = prof.operators[topo.names[0]]
        assert costs.ops[0].capacity(cores) == pytest.approx(  # (the sim floors a capacity of 0 at 1e-9)
            src.capacity_fit.capacity(cores * src.cpu.saturated_fraction), abs=1e-6)
    first = run_costs(topo, SimConfig(profile="first_guess"), tm_cores=0.1)
    assert not first.calibrated


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_committed_profile_has_a_measured_warm_up_the_sim_uses(path: Path) -> None:
    """Fresh task managers are slow at first (their JVM loads and compiles the query's code); a profile without
    the curve would start every sim run warm, which the fidelity cells showed the local stack never is."""
    prof = read_profile(path)
    query = prof.query
    assert prof.warmup is not None, "re-run bench calibrate: no cold-start phase recorded"
    w = prof.warmup
    # every query has a curve measured overloaded at some quota (a profile's own may not be: see below)
    assert any(read_profile(f).warmup.saturated for f in profile_quotas(query).values())  # type: ignore[union-attr]
    assert 0.0 <= w.initial_fraction <= 1.0 and w.tau_cpu_s > 0 and w.warm_rate > 0
    assert len(w.points) >= 4 and all(math.isfinite(f) and f >= 0 for _, f in w.points)
    assert w.cores == pytest.approx(prof.cpu_quota)
    costs = run_costs(load_topology(query), SimConfig(), tm_cores=prof.cpu_quota)
    if w.saturated:
        assert costs.warmup == w and "measured warm-up" in costs.source
    else:  # not overloaded: the rates are the load it got, not a speed; only the first record's delay is used
        assert costs.warmup is not None and costs.warmup.initial_fraction == 1.0
        assert costs.warmup.dead_s == w.dead_s and "dead time only" in costs.source
    assert run_costs(load_topology(query), SimConfig(taskmanager_warmup=False), tm_cores=prof.cpu_quota).warmup is None


# Measured before the fit kept a capacity at every share read (session 25), and their samples went with the
# machine that took them: re-measure q3 and q5 at 0.25 CPU to clear these. A new profile may add none.
KNOWN_INVENTED_ZEROS = {("q3", "person_source", 0.25), ("q3", "join", 0.25), ("q5", "sliding_window", 0.25)}


def test_no_committed_profile_gives_a_share_it_was_seen_running_at_no_capacity() -> None:
    """Unknown is not zero: an operator seen taking records at a CPU share has at least some capacity there."""
    zeros = set()
    for path in FILES:
        prof = read_profile(path)
        for name, op in prof.operators.items():
            sat_f = op.cpu.saturated_fraction
            for share in {sp.share for sp in op.shares if math.isfinite(sp.capacity) and sp.capacity > 0}:
                if op.capacity_fit.capacity(share * prof.cpu_quota * sat_f) <= 0.0:
                    zeros.add((prof.query, name, share))
    assert zeros == KNOWN_INVENTED_ZEROS
