"""One error type for everything that stops the local stack, naming the missing piece."""

from __future__ import annotations


class StackError(RuntimeError):
    """A failure the user can act on: Java missing, a port in use, a download that failed.

    `piece` names what is missing or broken (e.g. "java", "port 9092", "kafka"), so the CLI can
    print it first and exit non-zero; the message says what to do about it.
    """

    def __init__(self, piece: str, message: str) -> None:
        super().__init__(f"{piece}: {message}")
        self.piece = piece
        self.message = message
