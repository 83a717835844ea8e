"""Remove or rewrite the override's assignment in env files, keeping every other byte.

Understood line shapes (one assignment of SGLANG_FLASHATTENTION_VERSION each; any other line is left alone):
dotenv `NAME=3`, `NAME = "3"`; POSIX shells `export NAME=3`, `export A=1 NAME=3`; fish `set -gx NAME 3`;
PowerShell `$env:NAME = '3'`; systemd `Environment=NAME=3 "B=x y"` (only that one assignment is rewritten; a
line left empty is removed, because an empty `Environment=` would reset every earlier assignment).
A line that assigns the variable in any other shape (`NAME=$(...)`, `FOO=1 NAME=3 cmd`, a continuation line)
is an error: the file is left as it was and the user is asked to edit it by hand, rather than guessing.
Writes are atomic: a temporary file in the same folder, fsync, rename; the original is kept as a backup beside
the real file (a symlink is followed and stays a symlink). Mode and owner are kept.
"""

from __future__ import annotations

import difflib
import itertools
import os
import re
import stat
import tempfile
from dataclasses import dataclass

from fa_doctor.derive.pin import VALID
from fa_doctor.probes.environment import OVERRIDE

MAX_BYTES = 1 << 20
_N = re.escape(OVERRIDE)
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# A shell word with nothing that expands or runs: quotes without `$` or backticks inside "...", no operators.
_SH_WORD = r"""(?:'[^'\n]*'|"(?:[^"\\$`\n]|\\[^\n])*"|\\[^\n]|[^\s'"\\;&|<>()`$#])+"""
_TRAIL = r"(?P<trail>(?:[ \t]+\#.*|[ \t]*))"
_SH_ONE = re.compile(rf"(?P<lead>[ \t]*)(?P<exp>export[ \t]+)?{_N}(?P<eq>[ \t]*=[ \t]*)(?P<val>{_SH_WORD})?{_TRAIL}")
_SH_EXPORT = re.compile(rf"(?P<lead>[ \t]*)export(?P<rest>(?:[ \t]+{_IDENT}(?:={_SH_WORD}|=)?)+){_TRAIL}")
_SH_EXPORT_ITEM = re.compile(rf"[ \t]+(?P<name>{_IDENT})(?:=(?P<val>{_SH_WORD})?)?")
_FISH_WORD = r"""(?:'[^'\\\n]*'|"[^"\\$(\n]*"|[^\s'"\\;&|<>()$#{}*?~])+"""
_FISH = re.compile(
    rf"(?P<lead>[ \t]*)set(?P<opts>(?:[ \t]+-[-A-Za-z]+)*)[ \t]+{_N}(?P<vals>(?:[ \t]+{_FISH_WORD})*){_TRAIL}"
)
_FISH_SETS = set("gxUlfu")
_FISH_LONG_SETS = {"--global", "--export", "--universal", "--local", "--function", "--path", "--unpath", "--unexport"}
_FISH_NOT_ASSIGN = set("eqnSL")
_FISH_LONG_NOT_ASSIGN = {"--erase", "--query", "--names", "--show", "--long"}
_PS = re.compile(
    rf"""(?P<lead>[ \t]*)\$(?i:env):{_N}(?P<eq>[ \t]*=[ \t]*)(?P<val>'[^'\n]*'|"[^"`$\n]*"|[A-Za-z0-9_.+-]+){_TRAIL}"""
)
_SYSTEMD = re.compile(r"(?P<lead>[ \t]*)Environment(?P<eq>[ \t]*=[ \t]*)(?P<rest>.*)")
_SD_WORD = re.compile(r"""(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\\.|[^\s"'\\])+""")
# Anything that looks like it assigns the variable; a line matching this that no shape above took is refused.
_MENTION = re.compile(rf"(?<![\w$]){_N}[ \t]*=|^[ \t]*set\b[^#\n]*(?<![\w$]){_N}\b")
_SECRET = re.compile(
    r"(?P<name>\b\w*(?:token|secret|passw|api_?key|access_?key|credential|auth)\w*)=(?P<val>\"[^\"]*\"|'[^']*'|\S*)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class EditResult:
    """What edit() did. `changed` with `dry_run` means "would change"; `error` set means nothing was written."""

    path: str
    changed: bool
    diff: str = ""
    backup: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = ()


class _Unsafe(Exception):
    pass


def _quoted_like(old: str | None, value: str) -> str:
    return f"{old[0]}{value}{old[0]}" if old and old[0] in "\"'" else value


def _shell(content: str, value: str | None) -> str | None:
    m = _SH_ONE.fullmatch(content)
    if m:
        if value is None:
            return None
        val = _quoted_like(m["val"], value)
        return content[: m.start("eq")] + m["eq"] + val + m["trail"]
    m = _SH_EXPORT.fullmatch(content)
    if m is None:
        raise _Unsafe("in a form fa-doctor does not rewrite safely")
    items = list(_SH_EXPORT_ITEM.finditer(m["rest"]))
    base = m.start("rest")
    out, kept = content[:base], 0
    for item in items:
        if item["name"] != OVERRIDE:
            out += item[0]
            kept += 1
        elif value is not None:
            out += item[0][: item.start("name") - item.start()] + f"{OVERRIDE}={_quoted_like(item['val'], value)}"
            kept += 1
    return None if kept == 0 else out + m["trail"]


def _fish(content: str, value: str | None) -> str | bool | None:
    """The new line, None to remove it, or False when the line is not a fish `set` of the variable."""
    m = _FISH.fullmatch(content)
    if m is None:
        return False
    opts = m["opts"].split()
    shorts = {c for o in opts if not o.startswith("--") for c in o[1:]}
    longs = {o for o in opts if o.startswith("--")}
    if shorts & _FISH_NOT_ASSIGN or longs & _FISH_LONG_NOT_ASSIGN:
        return content  # `set -e NAME`, `set -q NAME`: not an assignment
    if not (shorts <= _FISH_SETS and longs <= _FISH_LONG_SETS):
        raise _Unsafe("with fish `set` options fa-doctor does not know")
    if value is None:
        return None
    first = m["vals"].split()[0] if m["vals"].strip() else None
    return content[: m.start("vals")] + " " + _quoted_like(first, value) + m["trail"]


def _unquote_name(word: str) -> str:
    """The variable name a systemd assignment word sets ("" when the word has no `=`)."""
    out, quote, i = [], "", 0
    while i < len(word):
        c = word[i]
        if c == "\\" and i + 1 < len(word):
            out.append(word[i + 1])
            i += 2
            continue
        if c in "\"'" and (not quote or quote == c):
            quote = "" if quote else c
        else:
            out.append(c)
        i += 1
    text = "".join(out)
    return text.split("=", 1)[0] if "=" in text else ""


def _systemd(content: str, value: str | None) -> str | bool | None:
    m = _SYSTEMD.fullmatch(content)
    if m is None:
        return False
    rest, base = m["rest"], m.start("rest")
    words = list(_SD_WORD.finditer(rest))
    ours = [i for i, w in enumerate(words) if _unquote_name(w[0]) == OVERRIDE]
    if not ours:
        return content
    gaps = [rest[a.end() : b.start()] for a, b in itertools.pairwise(words)]
    outside = [rest[: words[0].start()], *gaps, rest[words[-1].end() :]]
    if rest.rstrip().endswith("\\") or any(g.strip() for g in outside):
        raise _Unsafe("on a systemd Environment= line that continues on the next line or has an unbalanced quote")
    if value is None and len(ours) == len(words):
        return None
    keep = [True] * len(rest)
    replace: dict[int, str] = {}
    for i in ours:
        w = words[i]
        if value is not None:
            replace[w.start()] = _quoted_like(w[0], f"{OVERRIDE}={value}")
            lo, hi = w.start(), w.end()
        elif i > 0:
            lo, hi = words[i - 1].end(), w.end()  # the blank before it, and the word
        else:
            lo, hi = w.start(), words[1].start()  # the word and the blank after it
        keep[lo:hi] = [False] * (hi - lo)
    out = "".join(replace.get(k, "") + (c if keep[k] else "") for k, c in enumerate(rest))
    return content[:base] + out


def rewrite_line(content: str, value: str | None) -> str | None:
    """One line without its terminator: the same line, the rewritten line, or None to remove it."""
    stripped = content.lstrip()
    if not stripped or stripped[0] in "#;":
        return content
    for shape in (_systemd, _fish):
        got = shape(content, value)
        if got is not False:
            return got  # type: ignore[return-value]
    m = _PS.fullmatch(content)
    if m:
        return None if value is None else content[: m.start("val")] + _quoted_like(m["val"], value) + m["trail"]
    if _SH_ONE.fullmatch(content) or re.match(rf"[ \t]*export[ \t].*(?<![\w$]){_N}=", content):
        return _shell(content, value)
    if _MENTION.search(content):
        raise _Unsafe("in a form fa-doctor does not rewrite safely")
    return content


def _lines(text: str) -> list[str]:
    """Lines split on LF only (str.splitlines also splits on \\f, \\x1c, U+2028...), terminators kept."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def rewrite(text: str, value: str | None) -> tuple[str, list[int]]:
    """The whole text rewritten, and the 1-based numbers of the lines that changed. Raises ValueError."""
    out: list[str] = []
    changed: list[int] = []
    for number, line in enumerate(_lines(text), 1):
        body = line[:-1] if line.endswith("\n") else line
        content = body[:-1] if body.endswith("\r") else body
        if OVERRIDE not in content:
            out.append(line)
            continue
        try:
            new = rewrite_line(content, value)
        except _Unsafe as e:
            raise ValueError(f"line {number} sets {OVERRIDE} {e}; edit it by hand") from None
        if new != content:
            changed.append(number)
        if new is not None:
            out.append(new + line[len(content) :])
    return "".join(out), changed


class _Refused(Exception):
    pass


def _read(real: str) -> tuple[os.stat_result, bytes]:
    """A regular file of at most MAX_BYTES, never blocking on a FIFO or touching a device."""
    try:
        if not stat.S_ISREG(os.stat(real).st_mode):
            raise _Refused("is not a regular file")
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise _Refused("is not a regular file")
            if st.st_size > MAX_BYTES:
                raise _Refused(f"is larger than {MAX_BYTES // 1024} KiB; fa-doctor does not edit it")
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
        raise _Refused("does not exist") from None
    except OSError as e:
        raise _Refused(f"cannot be read: {e.strerror or e}") from None
    if size > MAX_BYTES:
        raise _Refused(f"is larger than {MAX_BYTES // 1024} KiB; fa-doctor does not edit it")
    return st, b"".join(chunks)


def _unchanged_since(real: str, st: os.stat_result) -> None:
    now = os.stat(real)
    if (now.st_ino, now.st_size, now.st_mtime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns):
        raise OSError(0, "it changed while fa-doctor was editing it")


def _backup(real: str, data: bytes, st: os.stat_result) -> str:
    """A copy of the original beside the real file, under a name that is not taken (never overwritten)."""
    for i in range(100):
        name = f"{real}.fa-doctor.bak" + (f".{i}" if i else "")
        try:
            os.link(real, name)  # same inode: content, mode and owner exactly as they were
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


def _write(real: str, st: os.stat_result, old: bytes, new: bytes) -> str:
    """Replace the file atomically; returns the backup's path. Raises OSError, leaving the file as it was."""
    folder = os.path.dirname(real) or "."
    if not st.st_mode & stat.S_IWUSR:
        raise OSError(0, f"it is read-only (mode {stat.S_IMODE(st.st_mode):04o}); fa-doctor leaves it so")
    if not os.access(real, os.W_OK):
        raise OSError(0, "no permission to write it")
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


def _diff(path: str, old: str, new: str) -> str:
    """A unified diff of the changed lines only (no context: env files hold secrets), secrets on them hidden."""
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new), path, path, n=0):
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            line = _SECRET.sub(lambda m: f"{m['name']}=<hidden>", line)
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _notes(text: str, changed: list[int]) -> tuple[str, ...]:
    lines = _lines(text)
    notes = []
    if any(_SYSTEMD.fullmatch(lines[n - 1].rstrip("\r\n")) for n in changed):
        notes.append("Reload systemd and restart the service: `systemctl daemon-reload` then `systemctl restart ...`.")
    if any(re.search(r"\bset\b.*(?:-[A-Za-z]*U|--universal)", lines[n - 1]) for n in changed):
        notes.append(f"A fish universal variable outlives config.fish: also run `set -eU {OVERRIDE}` once.")
    notes.append("Files take effect in new shells and services; the running shell keeps its value.")
    return tuple(notes)


def edit(path: str, *, set_value: int | None, dry_run: bool) -> EditResult:
    """Remove the override's assignment from `path` (or set it to `set_value`), keeping every other byte.

    Nothing happens where the variable is absent. With `dry_run` the diff is returned and nothing is written.
    Errors come back in `error` (the file is then as it was), never as exceptions.
    """
    if set_value is not None and set_value not in VALID:
        return EditResult(path, False, error=f"--set takes 2, 3 or 4, not {set_value!r}")
    value = None if set_value is None else str(set_value)
    try:
        real = os.path.realpath(path)
        st, data = _read(real)
    except _Refused as e:
        return EditResult(path, False, error=f"{path} {e}")
    except ValueError:  # a NUL byte in the path
        return EditResult(path, False, error=f"{path!r} is not a usable path")
    old = data.decode("utf-8", "surrogateescape")
    try:
        new, changed = rewrite(old, value)
    except ValueError as e:
        return EditResult(path, False, error=f"{path}: {e}; the file is unchanged")
    if new == old:
        return EditResult(path, False)
    diff = _diff(path, old, new)
    notes = _notes(old, changed)
    if dry_run:
        return EditResult(path, True, diff, notes=notes)
    try:
        backup = _write(real, st, data, new.encode("utf-8", "surrogateescape"))
    except OSError as e:
        reason = e.strerror or str(e)
        return EditResult(path, False, diff, error=f"cannot write {path}: {reason}; the file is unchanged")
    return EditResult(path, True, diff, backup, notes=notes)
