"""The `bench` console script: a Ctrl-C even while the CLI's modules load exits 130 without a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from harness.cli import main as cli_main
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    cli_main()
