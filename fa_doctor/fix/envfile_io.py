"""Reading and replacing an env file: bounded, never blocking, byte-exact, keeping owner, mode, ACLs and xattrs.

Encodings: UTF-8 (bytes that are not UTF-8 survive through surrogateescape), and UTF-8, UTF-16 or UTF-32 with a
byte-order mark (Windows editors save env files in UTF-16 LE with one). A file is edited only if its
text encodes back to exactly the bytes read. Hard-linked files are refused: a rename would leave the other names
with the old value.
"""

from __future__ import annotations

import codecs
import errno
import os
import stat
import tempfile

from fa_doctor.probes.environment import OVERRIDE

MAX_BYTES = 1 << 20
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


class Refused(Exception):
    pass


def read(real: str) -> tuple[os.stat_result, bytes]:
    """A regular file of at most MAX_BYTES with one name, never blocking on a FIFO or touching a device."""
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            raise Refused("is not a regular file")
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise Refused("is not a regular file")
            if st.st_size > MAX_BYTES:
                raise Refused(f"is larger than {MAX_BYTES // 1024} KiB; fa-doctor does not edit it")
            chunks, size = [], 0
            while size <= MAX_BYTES:
                chunk = os.read(fd, MAX_BYTES + 1 - size)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise Refused("does not exist") from None
    except OSError as e:
        raise Refused(f"cannot be read: {e.strerror or e}") from None
    if size > MAX_BYTES:
        raise Refused(f"is larger than {MAX_BYTES // 1024} KiB; fa-doctor does not edit it")
    if st.st_nlink > 1:
        raise Refused(
            f"has {st.st_nlink} hard links: replacing it would leave the other names with the old value; "
            "edit it by hand (or remove the other links first)"
        )
    return st, b"".join(chunks)


def decode(data: bytes) -> tuple[str, str, bytes]:
    """(text, encoding, BOM) such that encode() gives `data` back; Refused where that cannot hold."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                text = data[len(bom) :].decode(encoding, "surrogatepass")
            except UnicodeDecodeError:
                raise Refused(f"starts with a {encoding.upper()} byte-order mark but is not {encoding}") from None
            if encode(text, encoding, bom) != data:
                raise Refused(f"cannot be re-encoded as {encoding} byte for byte")
            return text, encoding, bom
    for encoding in ("utf-16-le", "utf-16-be"):
        if OVERRIDE.encode(encoding) in data:
            raise Refused(f"looks like {encoding.upper()} without a byte-order mark; fa-doctor does not guess")
    return data.decode("utf-8", "surrogateescape"), "utf-8", b""


def encode(text: str, encoding: str, bom: bytes) -> bytes:
    if encoding == "utf-8" and not bom:
        return text.encode("utf-8", "surrogateescape")
    return bom + text.encode(encoding, "surrogatepass")


def _unchanged_since(real: str, st: os.stat_result) -> None:
    now = os.stat(real)
    if (now.st_ino, now.st_size, now.st_mtime_ns, now.st_nlink) != (st.st_ino, st.st_size, st.st_mtime_ns, 1):
        raise OSError(0, "it changed while fa-doctor was editing it")


def _backup(real: str, data: bytes, st: os.stat_result) -> str:
    """A copy of the original beside the real file, under a name that is not taken (never overwritten)."""
    for i in range(100):
        name = f"{real}.fa-doctor.bak" + (f".{i}" if i else "")
        try:
            os.link(real, name)  # same inode: content, mode, owner, ACLs exactly as they were
            return name
        except FileExistsError:
            continue
        except OSError:
            pass
        try:
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(name, stat.S_IMODE(st.st_mode))
        return name
    raise OSError(0, f"{real}.fa-doctor.bak.1 to .99 all exist")


def _xattrs(real: str) -> list[tuple[str, bytes]]:
    """Every extended attribute, POSIX ACLs (`system.posix_acl_access`) and SELinux labels included."""
    try:
        names = os.listxattr(real)
    except OSError as e:
        if e.errno in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
            return []
        raise
    return [(name, os.getxattr(real, name)) for name in names]


def _keep_attributes(fd: int, st: os.stat_result, attrs: list[tuple[str, bytes]]) -> None:
    mine = os.fstat(fd)
    if (mine.st_uid, mine.st_gid) != (st.st_uid, st.st_gid):
        try:
            os.fchown(fd, st.st_uid, st.st_gid)
        except PermissionError:
            raise OSError(0, f"its owner ({st.st_uid}:{st.st_gid}) could not be kept") from None
    os.fchmod(fd, stat.S_IMODE(st.st_mode))  # after chown, which clears set-id bits
    for name, value in attrs:  # after chmod: an access ACL also sets the group bits (its mask)
        try:
            os.setxattr(fd, name, value)
        except OSError as e:
            raise OSError(0, f"its extended attribute {name} could not be kept ({e.strerror or e})") from None


def write(real: str, st: os.stat_result, old: bytes, new: bytes) -> str:
    """Replace the file atomically; returns the backup's path. Raises OSError, leaving the file as it was."""
    folder = os.path.dirname(real) or "."
    if not st.st_mode & stat.S_IWUSR:
        raise OSError(0, f"it is read-only (mode {stat.S_IMODE(st.st_mode):04o}); fa-doctor leaves it so")
    if not os.access(real, os.W_OK):
        raise OSError(0, "no permission to write it")
    attrs = _xattrs(real)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".fa-doctor.tmp", dir=folder)
    backup = None
    try:
        try:
            os.write(fd, new)
            _keep_attributes(fd, st, attrs)
            os.fsync(fd)
        finally:
            os.close(fd)
        _unchanged_since(real, st)
        backup = _backup(real, old, st)
        os.replace(tmp, real)
    except BaseException:
        for leftover in (tmp, backup):
            if leftover and os.path.lexists(leftover) and leftover != real:
                os.unlink(leftover)
        raise
    try:
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass  # the rename is done; a folder that cannot be fsynced (some network filesystems) is not an error
    return backup
