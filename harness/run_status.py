"""A run's status as one closed set: completed, failed or interrupted (the `status` file's first word).

`flagged` (a fault happened, the run went on) is separate: a completed run can be flagged.
Interrupted runs are neither successes nor crashes: a Ctrl-C says nothing about an autoscaler.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @classmethod
    def parse(cls, text: str) -> RunStatus:
        """`completed`, `failed: why`, `interrupted: why`; anything else (a missing or garbled file) is failed."""
        word = text.strip().split(":", 1)[0].strip()
        try:
            return cls(word)
        except ValueError:
            return cls.FAILED


def status_line(status: RunStatus, why: str = "") -> str:
    """The text of a `status` file."""
    return f"{status.value}: {why}" if why else status.value
