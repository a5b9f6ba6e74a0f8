"""The `bench` console script: a Ctrl-C or SIGTERM even while the CLI's modules load exits 130 without a
traceback (the commands install their own two-stage handler once they run)."""

from __future__ import annotations

import signal
import sys
from types import FrameType


def _as_ctrl_c(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main() -> None:
    signal.signal(signal.SIGTERM, _as_ctrl_c)
    try:
        from harness.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    cli_main()
