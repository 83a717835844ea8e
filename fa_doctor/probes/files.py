"""The one way fa-doctor reads a file of the target's: regular files only (checked with stat before the open and
fstat after it, opened O_NONBLOCK, so a FIFO or device never blocks), never more than a stated size."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


class NotRegular(OSError):
    def __init__(self, path: str, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.path, self.kind = path, kind


@dataclass(frozen=True, slots=True)
class FileRead:
    """What reading one file gave: ``data``, else ``problem`` says why."""

    path: str
    data: bytes | None
    problem: str | None = None  # "no such file", "a FIFO, not a regular file", "unreadable: Permission denied"
    truncated: bool = False  # the file is longer than the limit; data holds its first `limit` bytes

    def text(self) -> str | None:
        return None if self.data is None else self.data.decode("utf-8", "replace")


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def is_regular(path: str) -> bool:
    """True for a regular file (following symlinks), as importlib's own ``_path_isfile`` decides."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def open_regular(path: str) -> Iterator[BinaryIO]:
    """Open a regular file for reading in binary; raise NotRegular for anything else, OSError as ``open``."""
    if "\0" in path:
        raise FileNotFoundError(2, "No such file or directory", path)
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegular(path, _kind(mode))
    fd = os.open(path, _FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(path, _kind(mode))
    except BaseException:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb") as fh:
        yield fh


def read(path: str, limit: int) -> FileRead:
    """At most ``limit`` bytes of a regular file. Never raises for anything about the file itself."""
    try:
        with open_regular(path) as fh:
            data = fh.read(limit + 1)
    except NotRegular as exc:
        return FileRead(path, None, problem=f"{exc.kind}, not a regular file")
    except (FileNotFoundError, NotADirectoryError):
        return FileRead(path, None, problem="no such file")
    except OSError as exc:
        return FileRead(path, None, problem=f"unreadable: {exc.strerror or type(exc).__name__}")
    except ValueError as exc:  # an impossible path (embedded NUL handled above; kept as a last guard)
        return FileRead(path, None, problem=f"unreadable: {exc}")
    return FileRead(path, data[:limit], truncated=len(data) > limit)


def creatable(folder: str) -> bool:
    """Whether `mkdir -p folder` would succeed for this user (stat and access only: nothing is created)."""
    path = os.path.abspath(folder)
    while not os.path.lexists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return False
        path = parent
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)
