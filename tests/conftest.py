"""Test order and, under `make test` (pytest-xdist, `-n 2`), two lanes.

The real-stack tests (`tests/local`) take about 28 of `make test`'s minutes, almost all of it waiting on runs of
fixed length; everything else takes about 6. So `make test` runs them in two lanes, one xdist worker each (the
scheduler below): the real-stack lane one test at a time (as always: one stack at a time, and timing-sensitive),
and the rest lane (unit, CLI, simulator, query and Kubernetes-tier tests) beside it. The real-stack lane starts with
its tests that need little CPU (q1 at 1,000 records/s with faults, short runs checking the disk), so the
measurements that compare rates against a CPU quota (calibration, DS2's choice, latency bounds) run after the rest
lane has finished. The Kubernetes tier runs last in its lane: by then the background build of its binaries (see the
Makefile) has had the most time. Without xdist the order is the same, one lane after the other.

(xdist's own `--dist loadgroup` cannot do this with pytest 9: it renames test ids through an attribute pytest no
longer reads, so every group was spread over both workers, two real stacks at once.)
"""

from __future__ import annotations

from typing import Any

import pytest

STACK_LANE = "tests/local/"
# the real-stack modules that need little CPU first (they overlap the rest lane), then the others
STACK_ORDER = ("test_fault_injection.py", "test_disk.py", "test_faults.py", "test_interrupt_local.py",
               "test_stack.py", "test_reactive.py", "test_local_backend.py", "test_vertical.py",
               "test_end_to_end.py", "test_calibrate.py", "test_measurements.py")


def lane(nodeid: str) -> str:
    """The lane of a test: every test of `tests/local` runs in the real-stack lane (its unit modules too: a few
    seconds), everything else in the rest lane."""
    return "real-stack" if nodeid.startswith(STACK_LANE) else "rest"


def _order(item: pytest.Item) -> tuple[int, int]:
    if lane(item.nodeid) == "real-stack":
        name = item.nodeid.split("::")[0].rsplit("/", 1)[-1]
        return 0, STACK_ORDER.index(name) if name in STACK_ORDER else len(STACK_ORDER)
    return (2 if item.get_closest_marker("k8s_cluster") is not None else 1), 0


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    items.sort(key=_order)  # stable: within a module, the file's order


@pytest.hookimpl(optionalhook=True)  # an xdist hook: without xdist installed, ignored
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """One work unit per lane: each xdist worker takes one lane and runs it in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class TwoLanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane(nodeid)

    return TwoLanes(config, log)
