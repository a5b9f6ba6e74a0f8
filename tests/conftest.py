"""Test order and, under `make test` (pytest-xdist, `-n 2 --dist loadgroup`), two lanes.

The real-stack tests (`tests/local`, marked `integration`) take about 28 of `make test`'s minutes, almost all
of it waiting on runs of fixed length; everything else takes about 6. So they run in two xdist groups, one
worker each: the real-stack lane one test at a time (as always: one stack at a time, and timing-sensitive),
and the rest lane (unit, CLI, simulator, query and Kubernetes-tier tests) beside it. The real-stack lane
starts with its tests that need little CPU (q1 at 1,000 records/s with faults, short runs checking the disk),
so the measurements that compare rates against a CPU quota (calibration, DS2's choice, latency bounds) run
after the rest lane has finished. The Kubernetes tier runs last in its lane: by then the background build of
its binaries (see the Makefile) has had the most time. Without xdist the order is the same, one lane after
the other.
"""

from __future__ import annotations

import pytest

STACK_LANE = "local-stack"
REST_LANE = "rest"
# the real-stack modules that need little CPU first (they overlap the rest lane), then the others
STACK_ORDER = ("test_fault_injection.py", "test_disk.py", "test_faults.py", "test_interrupt_local.py",
               "test_stack.py", "test_reactive.py", "test_local_backend.py", "test_vertical.py",
               "test_end_to_end.py", "test_calibrate.py", "test_measurements.py")


def _on_real_stack(item: pytest.Item) -> bool:
    return item.get_closest_marker("integration") is not None and "tests/local/" in item.nodeid


def _order(item: pytest.Item) -> tuple[int, int]:
    if _on_real_stack(item):
        name = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        return 0, STACK_ORDER.index(name) if name in STACK_ORDER else len(STACK_ORDER)
    return (2 if item.get_closest_marker("k8s_cluster") is not None else 1), 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_order)  # stable: within a module, the file's order
    for item in items:
        item.add_marker(pytest.mark.xdist_group(STACK_LANE if _on_real_stack(item) else REST_LANE))
