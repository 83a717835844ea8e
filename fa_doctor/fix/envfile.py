"""Remove or rewrite the override's assignment in env files, keeping every other byte, as the dialect's Plan says
(or refuse the file, naming each line that may set it otherwise); docs/fix.md: "The override in files"."""

from __future__ import annotations

import codecs
import contextlib
import difflib
import errno
import os
import re
import stat
import tempfile
from dataclasses import dataclass

from fa_doctor.diagnose.derive import VALID
from fa_doctor.fix.dialects import apply, detect, plan
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.probes.files import NotRegular, open_regular
from fa_doctor.render.scrub import hide_secret_values

MAX_BYTES = 1 << 20
_BOMS = [(codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8")]
_BOMS += [(codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be")]  # after UTF-32 LE, its prefix


class Refused(Exception):
    """The file cannot be read or written back byte for byte."""


def read(real: str) -> tuple[os.stat_result, bytes]:
    """A regular file of at most MAX_BYTES with one name, never blocking on a FIFO or touching a device."""
    try:
        with open_regular(real) as fh:
            st = os.fstat(fh.fileno())
            data = fh.read(MAX_BYTES + 1)
    except NotRegular:
        raise Refused("is not a regular file") from None
    except FileNotFoundError:
        raise Refused("does not exist") from None
    except OSError as e:
        raise Refused(f"cannot be read: {e.strerror or e}") from None
    if len(data) > MAX_BYTES:
        raise Refused(f"is larger than {MAX_BYTES // 1024} KiB; fa-doctor does not edit it")
    if st.st_nlink > 1:
        raise Refused(
            f"has {st.st_nlink} hard links: replacing it would leave the other names with the old value; "
            "edit it by hand (or remove the other links first)"
        )
    return st, data


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


def write(real: str, st: os.stat_result, old: bytes, new: bytes) -> str:
    """Replace the file atomically; returns the backup's path. Raises OSError, leaving the file as it was."""
    folder = os.path.dirname(real) or "."
    if not st.st_mode & stat.S_IWUSR:
        raise OSError(0, f"it is read-only (mode {stat.S_IMODE(st.st_mode):04o}); fa-doctor leaves it so")
    if not os.access(real, os.W_OK):
        raise OSError(0, "no permission to write it")
    try:
        names = os.listxattr(real)
    except OSError as e:
        if e.errno not in (errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS):
            raise
        names = []
    attrs = [(name, os.getxattr(real, name)) for name in names]  # POSIX ACLs and SELinux labels included
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(real)}.", suffix=".fa-doctor.tmp", dir=folder)
    backup = None
    try:
        try:
            os.write(fd, new)
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
            os.fsync(fd)
        finally:
            os.close(fd)
        now = os.stat(real)
        if (now.st_ino, now.st_size, now.st_mtime_ns, now.st_nlink) != (st.st_ino, st.st_size, st.st_mtime_ns, 1):
            raise OSError(0, "it changed while fa-doctor was editing it")
        backup = _backup(real, old, st)
        os.replace(tmp, real)
    except BaseException:
        for leftover in (tmp, backup):
            if leftover and os.path.lexists(leftover) and leftover != real:
                os.unlink(leftover)
        raise
    with contextlib.suppress(OSError):  # the rename is done; a folder that cannot be fsynced (NFS...) is no error
        dfd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return backup


_SHOWN = 12  # refused lines named in the error; the rest are counted
_LAST_NOTE = "Files take effect in new shells and services; the running shell keeps its value."


@dataclass(frozen=True, slots=True)
class EditResult:
    """What edit() did. `changed` with `dry_run` means "would change"; `error` set means nothing was written."""

    path: str
    changed: bool
    diff: str = ""
    backup: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()


def _rewrite(path: str, text: str, value: str | None, dialect: str) -> tuple[str, list[str]]:
    """The whole text rewritten, and the dialect's notes. Raises ValueError naming PATH:LINE for every line that
    may set the override in a form not edited."""
    try:
        edits = plan(dialect, text, value)
    except RecursionError:
        raise ValueError(f"{path}: it nests substitutions or blocks too deeply for fa-doctor") from None
    if edits.refusals:
        lines = sorted(edits.refusals.items())
        said = [f"{path}:{line}: {why}" for line, why in lines[:_SHOWN]]
        more = [f"and {len(lines) - _SHOWN} more lines"] if len(lines) > _SHOWN else []
        raise ValueError("; ".join([*said, *more]) + f"; fa-doctor cannot prove that {path} leaves {OVERRIDE} alone")
    try:
        new = apply(text, edits.changes)
    except ValueError:
        raise ValueError(f"{path}: fa-doctor found overlapping edits") from None
    return new, edits.notes


def _diff(path: str, old: str, new: str) -> str:
    """A unified diff of the changed lines only (no context: env files hold secrets), secrets on them hidden."""
    out = []  # lines split on LF only (str.splitlines also splits on \f, \x1c, U+2028...), terminators kept
    before, after = ([line for line in re.split(r"(?<=\n)", text) if line] for text in (old, new))
    for line in difflib.unified_diff(before, after, path, path, n=0):
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            line = hide_secret_values(line)
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def edit(path: str, *, set_value: int | None, dry_run: bool) -> EditResult:
    """Remove the override's assignment from `path` (or set it to `set_value`), keeping every other byte; with
    `dry_run` only the diff. Errors come back in `error` (the file is then as it was), never as exceptions."""
    if set_value is not None and set_value not in VALID:
        return EditResult(path, False, error=f"--set takes 2, 3 or 4, not {set_value!r}")
    value = None if set_value is None else str(set_value)
    try:
        real = os.path.realpath(path)
        st, data = read(real)
        text, encoding, bom = decode(data)
    except Refused as e:
        return EditResult(path, False, error=f"{path} {e}")
    except ValueError:  # a NUL byte in the path
        return EditResult(path, False, error=f"{path!r} is not a usable path")
    try:
        new, notes = _rewrite(path, text, value, detect(path, text))
    except ValueError as e:
        return EditResult(path, False, error=f"{e}; the file is unchanged: edit it by hand")
    if new == text:
        return EditResult(path, False)
    diff = _diff(path, text, new)
    all_notes = (*dict.fromkeys(notes), _LAST_NOTE)
    if dry_run:
        return EditResult(path, True, diff, notes=all_notes)
    try:
        backup = write(real, st, data, encode(new, encoding, bom))
    except OSError as e:
        return EditResult(path, False, diff, error=f"cannot write {path}: {e.strerror or e}; the file is unchanged")
    return EditResult(path, True, diff, backup, notes=all_notes)
