"""Task managers started together share the host CPU the rest of the stack leaves (`HostShare`).

On the local stack a task manager's quota is an upper bound: the load generator, the broker and the job
manager run on the same host, and fresh JVMs started together (each at the start-up quota) share what those
leave. Pinned here: on a saturated host a scale-up's new task managers take the measured start-up CPU over
their share of the rest (several times one task manager's start-up alone), on an unsaturated host they take
the time one took alone, and `sim.host_share: false` or a profile without the measurement leaves the run
bit-identical to a run without the model.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.backends.sim.backend import SimBackend
from harness.backends.sim.config import SimConfig
from harness.calibrated_profile import HostShare, QueryProfile, load_profile
from harness.topology import load_topology
from tests.sim.conftest import constant
from workloads.arrivals import ArrivalConfig

CORES = 0.1
RATE = 100_000.0  # well above one source subtask's capacity at 0.1 CPU (asserted in `profile`)
ALONE_S = 6.0  # the profile's start-up of one task manager on its own
# a 2-core host whose stack takes 0.3 + 9 us x 100k rec/s = 1.2 cores beside the task managers
SATURATED = HostShare(cpus=2.0, fixed_cores=0.3, cores_per_record=9e-6, startup_cpu_s=3.0, startup_cores=1.0)
# the same stack on a host with cores to spare
ROOMY = SATURATED.model_copy(update={"cpus": 16.0})


def profile(host: HostShare | None) -> QueryProfile:
    base = load_profile("q1", cores=CORES)
    assert base is not None
    source = base.operators["bids_source"]
    assert RATE > 2 * source.capacity, "the scale-up must matter: one source subtask may not carry RATE"
    stat = base.taskmanager_startup_s.model_copy(update={"mean": ALONE_S})
    return base.model_copy(update={"host": host, "taskmanager_startup_s": stat})


def scaled_up(host: HostShare | None, **cfg: object) -> tuple[SimBackend, dict]:
    """q1 at 100k rec/s on one task manager per operator, scaled up to 3 + 3 + 2 at t = 15 s."""
    b = SimBackend()
    b.start_with(load_topology("q1"), constant(RATE, 200), SimConfig(readings="exact", **cfg),  # type: ignore[arg-type]
                 1, tm_cores=CORES, profile=profile(host), arrivals=ArrivalConfig(kind="deterministic"))
    b.advance_to(15.0)
    b.rescale({"bids_source": 3, "map": 3, "sink": 2}, None)
    b.advance_to(120.0)
    return b, b.facts()["rescales"][0]


def test_start_up_time_is_the_cpu_a_jvm_needs_over_its_share_of_what_the_stack_leaves() -> None:
    # 2 cores - (0.3 + 0.9 + 3 running task managers x 0.1) = 0.5 cores for 5 new JVMs: 0.1 each, 30 s
    assert SATURATED.startup_s(5, ALONE_S, busy_cores=1.5) == pytest.approx(30.0)
    # one new JVM gets its start-up quota (0.5 cores left, at most 1.0): 3 CPU-s in 6 s, as long as alone
    assert SATURATED.startup_s(1, ALONE_S, busy_cores=1.5) == pytest.approx(ALONE_S)
    assert ROOMY.startup_s(5, ALONE_S, busy_cores=1.5) == pytest.approx(ALONE_S)
    assert SATURATED.startup_s(0, ALONE_S, busy_cores=1.5) == 0.0


def test_a_scale_up_on_a_saturated_host_starts_its_task_managers_later() -> None:
    busy, rescale = scaled_up(SATURATED)
    free, rescale_free = scaled_up(ROOMY)
    none, rescale_none = scaled_up(None)
    # five new JVMs share 2 - 0.3 - 9e-6 x 100k - 3 x 0.1 = 0.5 cores: 3 CPU-s each at 0.1 cores = 30 s
    assert rescale["startup_s"] == pytest.approx(30.0, rel=0.01)
    assert rescale_free["startup_s"] == pytest.approx(ALONE_S)
    assert rescale_none["startup_s"] == pytest.approx(ALONE_S)
    # the old configuration runs 24 s longer, so the new one has processed less by the same time
    taken = {k: b.model.totals().processed for k, b in (("busy", busy), ("free", free))}  # type: ignore[union-attr]
    assert taken["busy"] < 0.9 * taken["free"]
    # until the new configuration runs, the saturated run's rows are the old parallelism
    rows = busy.model.rows_array()  # type: ignore[union-attr]
    tms = rows[:, 12]
    assert tms[40] == 3.0 and tms[60] == 8.0


def test_an_unsaturated_host_or_the_model_off_changes_nothing() -> None:
    free, _ = scaled_up(ROOMY)
    off, _ = scaled_up(SATURATED, host_share=False)
    none, _ = scaled_up(None)
    ref = none.model.rows_array()  # type: ignore[union-attr]
    assert np.array_equal(free.model.rows_array(), ref, equal_nan=True)  # type: ignore[union-attr]
    assert np.array_equal(off.model.rows_array(), ref, equal_nan=True)  # type: ignore[union-attr]
