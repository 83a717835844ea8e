"""Every file fa-doctor writes goes through here: a fresh private file (mkstemp, O_EXCL) beside the destination,
renamed over it, so a link planted at either name is replaced, never written through."""

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
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, mode & ~umask)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
