"""`--json` and `--quiet`: what a script reading `bench`'s stdout can rely on.

With `--json` stdout holds exactly one JSON document, written when the command ends (also when a
run failed: the document says so, the exit code too); tables, progress and notices go to stderr.
Not only Python's `sys.stdout` is pointed at stderr meanwhile but file descriptor 1 as well, so a
child process or a native library (a JVM, librdkafka) cannot slip a line into the document.
With `--quiet` nothing is printed but errors and warnings (stderr); combined with `--json`, the
document alone. A bad-input error (exit 2) prints no document: stdout stays empty, stderr says why.

NaN is not valid JSON: a value that was not measured is `null` (unknown is not zero).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import numpy as np


def plain(obj: Any) -> Any:
    """A JSON-safe copy: NaN/inf -> None, numpy scalars -> Python, Paths and enums -> strings."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [plain(v) for v in obj]
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        return float(obj) if math.isfinite(float(obj)) else None
    if isinstance(obj, Path):
        return str(obj)
    if obj is None or isinstance(obj, str):
        return obj
    if hasattr(obj, "value") and isinstance(obj.value, str):  # an enum
        return obj.value
    try:
        import pandas as pd

        if obj is pd.NA or obj is pd.NaT:
            return None
    except ImportError:  # pragma: no cover - pandas is a dependency
        pass
    return str(obj)


def records(frame: Any) -> list[dict[str, Any]]:
    """A DataFrame as a list of JSON-safe rows."""
    return [plain(r) for r in frame.to_dict(orient="records")]


def dumps(document: Any) -> str:
    return json.dumps(plain(document), indent=2, allow_nan=False)


@dataclass
class Output:
    """What a command prints through: `emit(doc)` sets the JSON document (written at the end)."""

    json: bool = False
    quiet: bool = False
    document: Any = None
    emitted: bool = field(default=False)

    @property
    def chatty(self) -> bool:
        """Progress and notices are shown (on stderr under --json): not --quiet."""
        return not self.quiet

    @property
    def tables(self) -> bool:
        """The human-readable result is printed: neither --json (the document replaces it) nor --quiet."""
        return not self.quiet and not self.json

    def emit(self, document: Any) -> None:
        self.document = document
        self.emitted = True


def _real_fd1(stream: TextIO) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):  # a test runner's buffer has no descriptor
        return False


@contextlib.contextmanager
def machine_output(as_json: bool, quiet: bool) -> Iterator[Output]:
    """Route everything but the document away from stdout while the command runs."""
    out = Output(json=as_json, quiet=quiet)
    if not as_json and not quiet:
        yield out
        return
    real = sys.stdout
    sink: TextIO = open(os.devnull, "w") if quiet else sys.stderr  # noqa: SIM115 - closed below
    saved_fd = None
    if _real_fd1(real):
        real.flush()
        saved_fd = os.dup(1)
        os.dup2(sink.fileno(), 1)
    try:
        with contextlib.redirect_stdout(sink):
            yield out
    finally:
        sink.flush()
        if saved_fd is not None:
            os.dup2(saved_fd, 1)
            os.close(saved_fd)
        if quiet:
            sink.close()
        if as_json and out.emitted:
            real.write(dumps(out.document) + "\n")
            real.flush()
