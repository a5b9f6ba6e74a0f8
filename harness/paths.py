"""Output paths checked before any work starts: a wrong `--results` or `--plot` costs nothing.

Each check raises `PathError` with one line naming the flag, the path and what would be valid.
Nothing is created here; the caller creates directories once the run is about to write.
"""

from __future__ import annotations

import os
from pathlib import Path

PLOT_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


class PathError(ValueError):
    """An output path that cannot be used; the message names the flag."""


def _first_existing(path: Path) -> Path:
    cur = path
    while not cur.exists() and cur != cur.parent:
        cur = cur.parent
    return cur


def check_output_dir(path: Path, flag: str, writable: bool = True) -> None:
    """`path` is a directory, or can be created as one (its nearest existing ancestor is a writable dir).

    `writable=False` (a dry run, which only reads) checks only that it is or could be a directory."""
    path = Path(path)
    if path.exists():
        if not path.is_dir():
            raise PathError(f"{flag} {path}: is a file, not a directory; give a directory (created if missing)")
        if writable and not os.access(path, os.W_OK | os.X_OK):
            raise PathError(f"{flag} {path}: directory is not writable")
        return
    base = _first_existing(path.absolute())
    if not base.is_dir():
        raise PathError(f"{flag} {path}: {base} is a file, so {path} cannot be created as a directory")
    if writable and not os.access(base, os.W_OK | os.X_OK):
        raise PathError(f"{flag} {path}: cannot create it, {base} is not writable")


def check_output_file(path: Path, flag: str, suffixes: tuple[str, ...] = PLOT_SUFFIXES) -> None:
    """`path` can be written as a file: its directory exists and is writable, it is not a directory."""
    path = Path(path)
    if path.is_dir():
        raise PathError(f"{flag} {path}: is a directory; give a file name, e.g. {path / ('plot' + suffixes[0])}")
    if suffixes and path.suffix.lower() not in suffixes:
        raise PathError(f"{flag} {path}: unknown image type {path.suffix or '(none)'!r}; "
                        f"use one of {', '.join(suffixes)}")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise PathError(f"{flag} {path}: directory {path.parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PathError(f"{flag} {path}: directory {path.parent} is not writable")
    if path.exists() and not os.access(path, os.W_OK):
        raise PathError(f"{flag} {path}: file is not writable")


def check_input_dir(path: Path, what: str) -> None:
    path = Path(path)
    if not path.exists():
        raise PathError(f"{what} {path}: no such directory")
    if not path.is_dir():
        raise PathError(f"{what} {path}: is a file, not a directory")
