"""Ctrl-C and SIGTERM: the first stops scheduling and interrupts the run in flight, the second aborts.

The runner marks a region *interruptible* (start-up and the MAPE loop): a first signal there raises
`Interrupted`, the runner writes the record with status `interrupted` and tears the backend down.
Outside it (writing a record, between runs) the signal only sets a flag that the matrix checks
before it schedules the next run, so a record is never cut in half by a Ctrl-C. A second signal
exits at once (130) - a `local` stack may then be left up, and the message says `bench down`.

Process-pool workers ignore SIGINT (a terminal sends it to the whole process group; the parent
decides) and turn SIGTERM into `Interrupted` while a run is in flight, so the parent can have
in-flight runs record themselves as interrupted.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells expect after a Ctrl-C


class Interrupted(BaseException):
    """A run was interrupted by the user (BaseException: no `except Exception` swallows it)."""


class _State:
    def __init__(self) -> None:
        self.count = 0
        self.interruptible = 0
        self.installed = False
        self.worker = False
        self.notice: Callable[[str], None] | None = None


_state = _State()


def requested() -> bool:
    """True once a first Ctrl-C/SIGTERM arrived (the matrix stops scheduling)."""
    return _state.count > 0


def _signame(signum: int) -> str:
    return signal.Signals(signum).name


def _handler(signum: int, _frame: FrameType | None) -> None:
    _state.count += 1
    if _state.count >= 2:
        sys.stderr.write("\naborted by a second interrupt (a local stack may still run: `bench down` stops it)\n")
        sys.stderr.flush()
        os._exit(EXIT_INTERRUPTED)
    if _state.notice is not None:
        _state.notice(f"{_signame(signum)}: stopping (interrupt again to abort at once)")
    if _state.interruptible:
        raise Interrupted(_signame(signum))


def _worker_handler(signum: int, _frame: FrameType | None) -> None:
    if _state.interruptible and _state.count == 0:
        _state.count += 1
        raise Interrupted(_signame(signum))


def _outside_commands(signum: int, _frame: FrameType | None) -> None:
    raise Interrupted(_signame(signum))


@contextlib.contextmanager
def outside_commands() -> Iterator[None]:
    """Around a whole command (before its own handler, after it): a signal is `Interrupted`.

    Not KeyboardInterrupt: Typer turns that into a silent exit 130, so the user would not learn
    that the command stopped early. Only the main thread may set handlers (else: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _outside_commands) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def handling(notice: Callable[[str], None] | None = None) -> Iterator[None]:
    """Install the two-stage handler for SIGINT and SIGTERM in the main process (restored on exit)."""
    previous: dict[int, Any] = {}
    _state.count, _state.notice, _state.installed = 0, notice, True
    for sig in (signal.SIGINT, signal.SIGTERM):
        previous[sig] = signal.signal(sig, _handler)
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)
        _state.installed, _state.notice, _state.count = False, None, 0


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A region a first signal may cut short with `Interrupted` (raised at once if one came already)."""
    if _state.count > 0 and (_state.installed or _state.worker):
        raise Interrupted("interrupted before the run started")
    _state.interruptible += 1
    try:
        yield
    finally:
        _state.interruptible -= 1


def worker_init() -> None:
    """Process-pool initializer: ignore SIGINT, SIGTERM interrupts a run in flight, die with the parent."""
    _state.worker, _state.count, _state.interruptible = True, 0, 0
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _worker_handler)
    die_with_parent()


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies, so a killed matrix leaves no orphan writing records.

    A parent killed between the fork and the request leaves the worker orphaned already (the request
    then never fires): the worker checks for that afterwards and exits."""
    if not sys.platform.startswith("linux"):
        return
    import multiprocessing

    parent = multiprocessing.parent_process()
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
    if parent is not None and os.getppid() != parent.pid:
        os._exit(1)
