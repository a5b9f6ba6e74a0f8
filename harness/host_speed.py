"""This machine's CPU speed per CPU-second: MB of SHA-256 hashed per second of this process's CPU time.

Why: a calibrated profile's costs are CPU-seconds per record on the machine that measured them, and the same
job cost 3.3 times the CPU per record on one session's machine as on another's. Recording this probe beside
a profile and beside each local run lets a comparison of the two say whether they came from machines of
the same speed. Process CPU time (not wall time), so other processes' load on a shared host changes it
little while the machine's speed per CPU-second does; the median of 9 chunks, 0.15-0.5 s in all.
Imports hashlib only at load time: every run (sim ones too, timed at 0.6 s) loads this module.
"""

from __future__ import annotations

import hashlib
import time

CHUNK_BYTES = 1 << 25  # 32 MB per timed chunk (a longer chunk: less timer and scheduler noise)
CHUNKS = 9
UNIT = "MB of SHA-256 per CPU-second"


def sha256_mb_per_cpu_s(chunks: int = CHUNKS) -> float:
    """The median over `chunks` of MB of SHA-256 hashed per second of process CPU time."""
    import statistics  # here: only runs that measure the host pay for importing it (a sim run imports this module)

    buf = bytes(CHUNK_BYTES)
    rates = []
    for _ in range(max(1, chunks)):
        c0 = time.process_time()
        hashlib.sha256(buf).digest()
        rates.append(CHUNK_BYTES / 1e6 / max(time.process_time() - c0, 1e-9))
    return float(statistics.median(rates))


def speed_ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None when either is unknown (not measured is never a speed of 0)."""
    if a is None or b is None or not a > 0 or not b > 0:
        return None
    return a / b
