"""What a `fix --apply` that did not finish left behind (SIGKILL, out of memory, power cut): its journal and saved
copies. `find` names them for one target; `undo` puts back what is still in effect, `discard` keeps the
environment and deletes them. An apply still running on the target is named, never touched."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fa_doctor.fix import journal as J

PREFIX = "fa-doctor-apply-"
_FINAL = ("done", "rolled back", "undone", "discarded")  # nothing of these remains to resolve


@dataclass(frozen=True, slots=True)
class Leftover:
    """One unfinished apply on this target."""

    journal: str | None  # the journal file; None: only saved folders were found (the journal is gone)
    state: str  # the journal's state: "running" when its writer died mid-run
    changes: tuple[str, ...]  # what is still in effect, each with how to put it back by hand
    folders: tuple[str, ...]  # the saved copies it left in the target's search path
    running: int | None = None  # the pid of an apply that is still running on this target: not stale, busy

    @property
    def lines(self) -> list[str]:
        head = f"Journal: {self.journal} (state: {self.state})" if self.journal else "No journal (it is gone)"
        if self.running is not None:
            head += f"; fa-doctor (pid {self.running}) is still running this apply"
        return [head, *(f"Still in effect: {c}" for c in self.changes), *(f"Saved copy: {f}" for f in self.folders)]


def _journals(tmp: str, exclude: str | None) -> Iterator[str]:
    """Journals in `tmp` this user wrote (a folder of another user is never read, let alone acted on)."""
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return
    for entry in (e for e in entries if e.name.startswith(PREFIX) and e.path != exclude):
        path = os.path.join(entry.path, "journal.json")
        try:
            folder, info = entry.stat(follow_symlinks=False), os.lstat(path)
        except OSError:
            continue
        mine = folder.st_uid == os.geteuid() and info.st_uid == os.geteuid()
        if stat.S_ISDIR(folder.st_mode) and stat.S_ISREG(info.st_mode) and mine:
            yield path


def _folders(sys_path: Sequence[str]) -> list[str]:
    out = []
    for entry in dict.fromkeys(sys_path):
        try:
            names = sorted(os.listdir(entry))
        except OSError:
            continue
        out += [os.path.join(entry, n) for n in names if n.startswith(J.UNDO_PREFIX)]
    return [f for f in out if os.path.isdir(f) and not os.path.islink(f)]


def find(python: str, sys_path: Sequence[str], exclude: str | None = None, tmp: str | None = None) -> list[Leftover]:
    """Every unfinished apply on the target `python` (its search path `sys_path`); `exclude`: this run's folder."""
    here = {os.path.abspath(p) for p in sys_path}
    target = os.path.abspath(python)
    claimed: set[str] = set()
    out: list[Leftover] = []
    for path in _journals(tmp or tempfile.gettempdir(), exclude):
        try:
            book = J.load(path)
        except (ValueError, TypeError, AttributeError):
            continue
        snaps = [e.data.get("snapshots") or () for e in book.entries]
        saved = [str(s.get("folder")) for ss in snaps if isinstance(ss, list) for s in ss if isinstance(s, dict)]
        claimed.update(saved)
        ours = bool(book.python) and os.path.abspath(book.python) == target
        ours = ours or any(os.path.dirname(f) in here for f in saved)
        pending = [e for e in book.entries if not e.undone]
        if not ours or book.state in _FINAL or not (pending or book.current):
            continue
        changes = [f"{e.did} (undo: {e.undo})" for e in pending]
        if book.current is not None and not any(e.step == book.current[0] for e in book.entries):
            changes.append(f"step {book.current[0] + 1} was under way: {book.current[1]}")
        pid, since = book.writer
        running = pid if isinstance(pid, int) and alive(pid, since) else None
        out.append(Leftover(path, book.state, tuple(changes), tuple(f for f in saved if os.path.isdir(f)), running))
    if orphans := [f for f in _folders(sys_path) if f not in claimed]:
        out.append(Leftover(None, "no journal", tuple(map(_manifest_line, orphans)), tuple(orphans)))
    return out


def alive(pid: int, started: object) -> bool:
    """Whether the process that wrote a journal still runs (the same one: a reused pid starts at another time)."""
    if pid <= 0 or pid == os.getpid():
        return False
    now = J.started(pid)
    if now is not None:
        return started is None or now == started
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, under another user
    return True


def _manifest(folder: str) -> dict[str, object]:
    doc = J.read_json(os.path.join(folder, J.MANIFEST))
    if not isinstance(doc, dict):
        raise ValueError(f"{folder} has no readable {J.MANIFEST}")
    return doc


def _manifest_line(folder: str) -> str:
    try:
        doc = _manifest(folder)
    except ValueError as exc:
        return str(exc)
    return f"saved {doc.get('name')} {doc.get('version')} before a step that replaced it, in {folder}"


def undo(left: Leftover) -> list[str]:
    """Put back what `left` still holds in effect, newest first; the problems (empty: all of it is back)."""
    if left.running is not None:
        return [f"fa-doctor (pid {left.running}) is still running this apply: nothing was touched"]
    problems: list[str] = []
    if left.journal is not None:
        try:
            book = J.load(left.journal)
        except (ValueError, TypeError, AttributeError) as exc:
            return [f"{left.journal}: {exc}"]
        results, manual = book.rollback()
        problems += [f"{e.did}: its undo failed: {why}" for e, why in results if why is not None]
        problems += [f"{e.did}: fa-doctor knows no undo for it ({e.undo})" for e in manual]
        book.write("undone" if not problems else "partly undone")
    else:
        for folder in left.folders:
            try:
                doc = _manifest(folder)
                snap = {k: doc[k] for k in ("name", "version", "location", "folder", "files")}
                more = {k: doc.get(k, []) for k in ("wrote", "before", "sys_path")}
                put_back = J.undo_of({"kind": "install", "snapshots": [snap], **more})
                if put_back is not None:
                    put_back()
            except (OSError, ValueError, KeyError, J.SnapshotError) as exc:
                problems.append(f"{folder}: {getattr(exc, 'strerror', None) or exc}")
    if not problems:
        _drop(left)
    return problems


def discard(left: Leftover) -> list[str]:
    """Keep the environment as it is: delete the journal and the saved copies; the problems."""
    if left.running is not None:
        return [f"fa-doctor (pid {left.running}) is still running this apply: nothing was touched"]
    if left.journal is not None:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            J.load(left.journal).write("discarded")  # said first: a crash half-way leaves no stale journal
    return _drop(left)


def _drop(left: Leftover) -> list[str]:
    """Delete the saved copies, then the journal's folder (each only where fa-doctor's prefix names it)."""
    problems: list[str] = []
    home = [(os.path.dirname(left.journal), PREFIX)] if left.journal is not None else []
    for folder, prefix in [*((f, J.UNDO_PREFIX) for f in left.folders), *home]:
        if os.path.basename(folder).startswith(prefix) and not os.path.islink(folder):
            shutil.rmtree(folder, onerror=lambda *a: problems.append(f"cannot delete {a[1]}"))
    return problems
