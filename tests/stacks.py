"""Helpers for tests that start a real local stack: they clean up their own stack directories."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest


def purge_stack(workdir: Path, port_offset: int) -> None:
    """Stop whatever is left running in `workdir` and remove the directory (`bench down --purge`);
    the installs, in the shared cache, stay."""
    from harness.backends.local.config import LocalConfig
    from harness.backends.local.stack import LocalStack

    LocalStack(LocalConfig(workdir=workdir, port_offset=port_offset)).down(purge=True)


def purged_after_module(workdir: Path, port_offset: int) -> Callable[[], Iterator[None]]:
    """A module-scoped autouse fixture that purges the module's stack directory when its tests are done."""

    @pytest.fixture(scope="module", autouse=True)
    def _purge_stack_dir() -> Iterator[None]:
        yield
        purge_stack(workdir, port_offset)

    return _purge_stack_dir
