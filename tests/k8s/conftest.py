"""The real test cluster for the tests marked `k8s_cluster` (one per session, shared, torn down at the end).

Such tests run last in their lane (the binary build may still be finishing in the background when the
session starts, see the Makefile and tests/conftest.py), need root, and leave the host as they found it:
the fixture compares the host state before and after.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.backends.k8s.testcluster.cluster import BRIDGE, TestCluster
from harness.backends.k8s.testcluster.hostprep import HostState

TIMINGS: dict[str, Any] = {}


def _say(msg: str) -> None:
    print(f"[k8s] {msg}", flush=True)


@pytest.fixture(scope="session")
def k8s_cluster() -> Iterator[TestCluster]:
    if os.geteuid() != 0:
        pytest.skip("the test cluster needs root")
    if shutil.which("go") is None:
        pytest.skip("the test cluster's binaries are built with Go")
    from harness.backends.k8s.testcluster.profile import bring_up

    cluster = TestCluster(progress=_say)
    reuse = cluster.is_up()  # a developer's `bench k8s up`: use it, leave it running
    before = None if reuse else HostState.capture()
    t0 = time.monotonic()
    bring_up(_say)
    TIMINGS["bring_up_s"] = time.monotonic() - t0
    try:
        yield cluster
    finally:
        if not reuse:
            cluster.down()
            assert before is not None
            left = before.diff(cluster.our_dirs(), BRIDGE)
            assert left == [], f"the host was not restored: {left}"
