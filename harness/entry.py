"""The `bench` console script: a Ctrl-C or SIGTERM even while the CLI's modules load exits 130 without a
traceback (the commands install their own two-stage handler once they run)."""

from __future__ import annotations

import gc
import signal
import sys
from types import FrameType


def _as_ctrl_c(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _as_ctrl_c)
    # Loading the CLI's modules makes only long-lived objects: no collection while they load (a tenth of
    # the import time), and frozen afterwards so that no later collection scans them again (issue 13).
    gc.disable()
    try:
        from harness.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    finally:
        gc.freeze()
        gc.enable()
    cli_main()
