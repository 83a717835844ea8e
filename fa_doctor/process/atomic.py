"""Every file fa-doctor writes goes through here: a new private file made with O_CREAT|O_EXCL (tempfile.mkstemp)
in the destination's folder, written, flushed and renamed over the destination.

A symlink or hard link planted at a temporary name is never written through (mkstemp picks a fresh name and
refuses one that exists), and the destination itself is replaced, not followed: a link there is swapped for
the new file, the file it pointed to is left as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile


def write_atomic(path: str, data: bytes, mode: int = 0o644) -> None:
    """Replace `path` with `data`; raises OSError and leaves `path` as it was when anything fails."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".fa-doctor.tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def append_nofollow(path: str, data: bytes) -> None:
    """Append to a file someone else named (`$GITHUB_STEP_SUMMARY`): created if missing, never through a link."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags, 0o644)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
