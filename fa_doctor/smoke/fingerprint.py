"""What a smoke verdict depends on, read cheaply from the disk: digests of stat results and RECORD files.

The verdict cache (fa_doctor/smoke/verdicts.py) reuses a passing smoke test while none of these digests
changes. They must cost far less than the smoke test they stand in for (an unchanged `exec` within a second
of the static check), so nothing here reads a package's files: a distribution is its RECORD (pip writes the
hash of every installed file there, so a reinstall or another build changes it) plus the size, mtime and
inode of every file the RECORD lists (so a file edited or replaced in place changes it too). Without a RECORD
(torch's is skipped for its size, an egg-info install has none) the metadata files' stat results stand in.

Every path comes from the target and is hostile: reads go through probes/files.py (bounded, regular files
only), walks are bounded in entries and depth, and nothing here raises.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterable, Sequence

from fa_doctor.model.install import Distribution
from fa_doctor.probes.files import read

_RECORD_BYTES = 8 << 20  # sglang's RECORD is 0.7 MB; an FA4 runtime's are a few KB each
_MAX_FILES = 20000  # stat calls per distribution; past this the digest says "truncated"
_TREE_ENTRIES = 5000  # a module folder (flash_attn/cute holds ~60 files)
_TREE_DEPTH = 6
_META_FILES = ("METADATA", "PKG-INFO", "RECORD", "direct_url.json", "INSTALLER", "installed-files.txt")


def digest(*parts: object) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(repr(part).encode("utf-8", "surrogateescape"))
        h.update(b"\0")
    return h.hexdigest()


def stat_key(path: str, follow: bool = True) -> tuple[object, ...]:
    """(kind, size, mtime_ns, ctime_ns, inode, device) of a path, or why it has none: the identity of a file's
    contents as far as the file system tells without reading them. ctime is in it: a file rewritten in place
    with its mtime put back (`touch -d`, `cp -p`) still gets a new ctime, which no user can set."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (OSError, ValueError) as exc:
        return ("missing", type(exc).__name__)
    kind = "file" if stat.S_ISREG(st.st_mode) else "link" if stat.S_ISLNK(st.st_mode) else f"mode {st.st_mode:o}"
    return (kind, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)


def identity(path: str) -> str:
    """A loaded file's identity: where its links lead (a symlinked module's new target) and what is there."""
    try:
        real = os.path.realpath(path)
    except (OSError, ValueError):
        real = path
    return digest(real, stat_key(real))[:20]


def folders(paths: Sequence[str]) -> str:
    """The search path's folders as the import system sees them: a new `.pth`, module, package or stray folder
    that shadows an extension changes the folder's mtime (and ctime), so any of them changes this digest."""
    return digest(*((p, stat_key(p)) for p in paths))


def files_key(paths: Iterable[str], limit: int = _MAX_FILES) -> str:
    h = hashlib.sha256()
    for count, path in enumerate(paths):
        if count >= limit:
            h.update(b"truncated")
            break
        h.update(f"{path}\0{stat_key(path)}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def interpreter(executable: str, version: Sequence[int], prefix: str, sys_path: Sequence[str]) -> str:
    """The interpreter as it will run: its path, version, the binary a venv link resolves to (and that binary's
    stat: a rebuilt python at the same path), its prefix and search path (which copy an import finds)."""
    try:
        real = os.path.realpath(executable)
    except (OSError, ValueError):
        real = executable
    return digest(executable, tuple(version), real, stat_key(real), prefix, tuple(sys_path))


def distribution(dist: Distribution) -> str:
    """A distribution's install: the RECORD's bytes and the stat of each file it lists; without a RECORD, the
    stat of its metadata files (a reinstall rewrites them)."""
    meta = files_key(os.path.join(dist.metadata_dir, name) for name in _META_FILES)
    base = (dist.normalized, dist.version, dist.location, dist.metadata_dir, dist.editable_dir, meta)
    if dist.files is None:
        return digest(*base, "no RECORD read")
    record = read(os.path.join(dist.metadata_dir, "RECORD"), _RECORD_BYTES)
    record_hash = hashlib.sha256(record.data).hexdigest() if record.data is not None else record.problem
    # pip lists the .pyc files it compiled; an import rewrites a stale one (after its source was touched): the
    # source's own stat already stands for it.
    listed = files_key(os.path.join(dist.location, rel) for rel in dist.files if not rel.endswith(".pyc"))
    return digest(*base, record_hash, record.truncated, listed)


def tree(path: str) -> str:
    """The stat of every entry under a module's folder (or of the one file when it is a module file), bounded:
    what an editable install or a vendored copy (SGLang's FA4) is made of when no RECORD lists it."""
    top = os.path.dirname(path) if os.path.basename(path) == "__init__.py" else path
    h = hashlib.sha256()
    if not os.path.isdir(top):
        h.update(f"{top}\0{stat_key(top)}\n".encode("utf-8", "surrogateescape"))
        return h.hexdigest()
    h.update(f"{top}\0dir\n".encode("utf-8", "surrogateescape"))
    seen = 0
    stack: list[tuple[str, int]] = [(top, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = sorted(it, key=lambda e: e.name)
        except (OSError, ValueError) as exc:
            h.update(f"{folder}\0unreadable {type(exc).__name__}\n".encode("utf-8", "surrogateescape"))
            continue
        for entry in entries:
            seen += 1
            if seen > _TREE_ENTRIES:
                h.update(b"truncated")
                return h.hexdigest()
            if entry.name == "__pycache__":
                continue  # written by every import; not what the verdict depends on
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            # A folder's own mtime changes when the first import writes __pycache__ into it: only its name counts.
            key = ("dir",) if is_dir else stat_key(entry.path, follow=False)
            h.update(f"{entry.path}\0{key}\n".encode("utf-8", "surrogateescape"))
            if is_dir and depth + 1 < _TREE_DEPTH:
                stack.append((entry.path, depth + 1))
    return h.hexdigest()
