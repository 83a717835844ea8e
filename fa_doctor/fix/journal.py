"""The journal of `fix --apply`: each change and how to put it back, in words and as data, rewritten and fsynced
after each change; the undos: docs/fix.md. What an apply that did not finish (SIGKILL, power cut) left behind is
read back by `find`, put back by `undo` or kept by `discard`; an apply still running is named, never touched."""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import glob
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fa_doctor.catalog.families import normalize
from fa_doctor.model.install import Distribution
from fa_doctor.probes.files import read
from fa_doctor.process.atomic import write_atomic

_RECORD_BYTES = 32 << 20
SCHEMA = "fa-doctor.apply-journal/2"
MANIFEST = "manifest.json"
UNDO_PREFIX = ".fa-doctor-undo-"


class SnapshotError(Exception):
    """A snapshot cannot be taken (no RECORD, no space, no permission): the step must not run."""


def record_files(location: str, metadata_dir: str) -> list[str]:
    """Absolute paths of the files a dist-info's RECORD lists (the dist-info's own files included)."""
    got = read(os.path.join(metadata_dir, "RECORD"), _RECORD_BYTES)
    text = got.text() if not got.truncated else None
    if not text:
        raise SnapshotError(
            f"{metadata_dir} has no readable RECORD: its files are unknown, so it could not be put back"
        )
    try:  # the first column, as importlib.metadata reads RECORD
        paths = [row[0] for row in csv.reader(text.splitlines()) if row and row[0]]
    except csv.Error as exc:
        raise SnapshotError(f"{metadata_dir}/RECORD cannot be read ({exc}): it could not be put back") from None
    return list(dict.fromkeys(os.path.normpath(os.path.join(location, p)) for p in paths))


def forget_listings() -> None:
    """The check's folder listings are cached: stale once anything may have changed."""
    from fa_doctor.probes import modules

    modules.listdir.cache_clear()
    modules.by_stem.cache_clear()


def scan(sys_path: Sequence[str], interesting: Callable[[str], bool]) -> tuple[Distribution, ...]:
    """The distributions on the path as they are now."""
    from fa_doctor.probes.distributions import scan_distributions

    forget_listings()
    return scan_distributions(sys_path, interesting).distributions


@dataclass(slots=True)
class Snapshot:
    """Saved copies of one distribution's files: (original path, saved path)."""

    name: str
    version: str
    location: str
    folder: str
    files: list[tuple[str, str]] = field(default_factory=list)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Snapshot:
        """Raises SnapshotError when `d` is not one: a journal is read back after a crash, by path only."""
        try:
            snap = cls(str(d["name"]), str(d["version"]), str(d["location"]), str(d["folder"]))
            snap.files = [(str(a), str(b)) for a, b in d["files"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SnapshotError(f"a saved copy's description cannot be read ({exc})") from None
        folder = os.path.normpath(snap.folder)
        inside = os.path.dirname(folder) == os.path.normpath(snap.location)
        inside = inside and os.path.basename(folder).startswith(UNDO_PREFIX)
        if not inside or not all(os.path.isabs(a) and os.path.dirname(b) == snap.folder for a, b in snap.files):
            raise SnapshotError(f"{snap.folder}: its saved files do not lie where fa-doctor puts them; left alone")
        return snap


def take(name: str, version: str, location: str, metadata_dir: str, about: Mapping[str, Any] | None = None) -> Snapshot:
    """Hard-link (or copy) every file of the distribution into a fresh hidden folder inside `location`, with a
    manifest of what it holds (and `about`: the step that replaces it), so it can be put back without the journal."""
    paths = record_files(location, metadata_dir)
    for where, _, files in os.walk(metadata_dir):  # the metadata folder whole, listed in its RECORD or not
        paths += [p for p in (os.path.join(where, f) for f in files) if p not in paths]
    try:
        folder = tempfile.mkdtemp(prefix=UNDO_PREFIX, dir=location)
    except OSError as exc:
        raise SnapshotError(f"cannot write in {location}: {exc.strerror or exc}") from None
    snap = Snapshot(name, version, location, folder)
    try:
        for number, path in enumerate(paths):
            if not os.path.lexists(path) or (os.path.isdir(path) and not os.path.islink(path)):
                continue
            saved = os.path.join(folder, str(number))
            try:
                os.link(path, saved, follow_symlinks=False)
            except OSError as exc:
                if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.EACCES):
                    raise
                shutil.copy2(path, saved, follow_symlinks=False)
            snap.files.append((path, saved))
        write_atomic(os.path.join(folder, MANIFEST), json.dumps({**asdict(snap), **(about or {})}).encode(), mode=0o600)
    except OSError as exc:
        shutil.rmtree(snap.folder, ignore_errors=True)
        raise SnapshotError(
            f"cannot save {name} {version}'s files ({exc.strerror or exc}): it could not be put back"
        ) from None
    return snap


def remove_installed(location: str, name: str, keep: Iterable[str] = ()) -> None:
    """Delete what pip wrote for `name` in `location` (its RECORD's files inside `location`, then its dist-info,
    if there is exactly one), except the paths in `keep`. OSError propagates."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        found = [
            e for e in os.listdir(location) if e.endswith(".dist-info") and normalize(e[:-10].split("-")[0]) == name
        ]
    if len(found) != 1:
        return
    info, kept, root = os.path.join(location, found[0]), set(keep), location.rstrip("/") + "/"
    for path in record_files(location, info):
        if path not in kept and path.startswith(root) and (os.path.islink(path) or os.path.isfile(path)):
            os.unlink(path)
    shutil.rmtree(info, ignore_errors=True)


def undo_install(
    snaps: Sequence[Snapshot], wrote: Sequence[str], before: Iterable[str], sys_path: Sequence[str]
) -> None:
    """Put back an install (or uninstall): remove what it wrote for the names in `wrote` (a copy whose metadata
    folder was not there before), then rename every saved file back over its old path. OSError propagates."""
    kept = [path for snap in snaps for path, _ in snap.files]
    wanted, old = set(wrote), set(before)
    for dist in scan(sys_path, lambda n: n in wanted):
        if dist.metadata_dir not in old:  # written by this step
            remove_installed(dist.location, dist.normalized, kept)
    for snap in snaps:
        for path, saved in snap.files:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.replace(saved, path)
        shutil.rmtree(snap.folder, ignore_errors=True)


def _move_back(src: str, dst: str) -> None:
    if os.path.lexists(src):
        raise OSError(f"{src} exists again; {dst} left where it is")
    os.rename(dst, src)


def undo_of(data: Mapping[str, Any]) -> Callable[[], None] | None:
    """The undo of one journalled change, from its data (the same now and after a crash); None: none is known.
    Raises SnapshotError for data that does not describe a change fa-doctor made."""
    kind = data.get("kind")
    if kind == "install":
        snaps = [Snapshot.from_dict(d) for d in data.get("snapshots", ())]
        wrote, before, search = ([str(p) for p in data.get(key, ())] for key in ("wrote", "before", "sys_path"))
        return lambda: undo_install(snaps, wrote, before, search)
    if kind == "move":
        return functools.partial(_move_back, str(data["src"]), str(data["dst"]))
    if kind == "edit":
        edited, backup = str(data["path"]), str(data["backup"])
        return lambda: os.replace(backup, edited)
    return None


@dataclass(slots=True)
class Entry:
    step: int
    did: str  # what changed, in words
    undo: str  # how to put it back, in words (for a person, after a SIGKILL)
    data: Mapping[str, Any]  # the same as data: `undo_of` rebuilds the undo from it (after a crash too)
    undone: bool = False


def started(pid: int) -> str | None:
    """The kernel's start time of `pid` (a reused pid has another one), where /proc has it."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return None


class Journal:
    """The changes of one run, newest last, mirrored to `path` after each one, with the target it is for and
    the process that writes it."""

    def __init__(self, path: str, python: str = "", sys_path: Sequence[str] = ()) -> None:
        self.path, self.python = path, python
        self.sys_path: tuple[str, ...] = tuple(sys_path)
        self.entries: list[Entry] = []
        self.current: tuple[int, str] | None = None  # the step under way: (index, description)
        self.state = "running"
        self.writer: tuple[object, object] = (os.getpid(), started(os.getpid()))  # read back: who wrote it

    def begin(self, step: int, description: str) -> None:
        """Say which step is under way before it changes anything (a SIGKILL may come before its entry)."""
        self.current = (step, description)
        self.write()

    def add(self, step: int, did: str, undo: str, data: Mapping[str, Any]) -> None:
        self.entries.append(Entry(step, did, undo, dict(data)))
        self.write()

    def write(self, state: str | None = None) -> None:
        if state is not None:
            self.state = state
        pid = os.getpid()
        doc = {
            "schema": SCHEMA,
            "state": self.state,
            "python": self.python,
            "sys_path": list(self.sys_path),
            "pid": pid,
            "pid_started": started(pid),
            "current": None if self.current is None else {"step": self.current[0], "what": self.current[1]},
            "changes": [asdict(e) for e in self.entries],  # step, did, undo, data, undone
        }
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(doc, indent=1).encode(), mode=0o600)

    def rollback(self) -> tuple[list[tuple[Entry, str | None]], list[Entry]]:
        """Undo every change not undone yet, newest first: ([(entry, None or why its undo failed)], entries with
        no undo). Each success is written to the journal as it happens."""
        done: list[tuple[Entry, str | None]] = []
        manual: list[Entry] = []
        for entry in (e for e in reversed(self.entries) if not e.undone):
            try:
                undo = undo_of(entry.data)
                if undo is None:
                    manual.append(entry)
                    continue
                undo()
            except (OSError, SnapshotError, KeyError) as exc:
                done.append((entry, str(getattr(exc, "strerror", None) or exc)))
            else:
                entry.undone = True
                self.write()
                done.append((entry, None))
        return done, manual


def read_json(path: str) -> Any:
    """A JSON file of at most 16 MiB (None when empty or cut short); ValueError when it is not JSON."""
    got = read(path, 16 << 20)
    text = got.text() if not got.truncated else None
    return json.loads(text) if text else None


def load(path: str) -> Journal:
    """A journal another run wrote, read back (ValueError: it is not one fa-doctor can read)."""
    doc = read_json(path)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ValueError(f"{path} is not a journal this fa-doctor can read")
    book = Journal(path, str(doc.get("python") or ""), [str(p) for p in doc.get("sys_path") or ()])
    book.state = str(doc.get("state") or "")
    current = doc.get("current")
    if isinstance(current, dict):
        book.current = (int(current.get("step", -1)), str(current.get("what", "")))
    for c in doc.get("changes") or ():
        data = c.get("data") if isinstance(c.get("data"), dict) else {}
        book.entries.append(Entry(int(c.get("step", -1)), str(c.get("did", "")), str(c.get("undo", "")), data,
                                  bool(c.get("undone"))))  # fmt: skip
    book.writer = (doc.get("pid"), doc.get("pid_started"))
    return book


# ---- what an apply that did not finish left behind -------------------------------------------------------------------

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
    found = (sorted(glob.glob(os.path.join(glob.escape(p), UNDO_PREFIX + "*"))) for p in dict.fromkeys(sys_path) if p)
    return [f for names in found for f in names if os.path.isdir(f) and not os.path.islink(f)]


def find(python: str, sys_path: Sequence[str], exclude: str | None = None) -> list[Leftover]:
    """Every unfinished apply on the target `python` (its search path `sys_path`); `exclude`: this run's folder."""
    here = {os.path.abspath(p) for p in sys_path}
    target = os.path.abspath(python)
    claimed: set[str] = set()
    out: list[Leftover] = []
    for path in _journals(tempfile.gettempdir(), exclude):
        try:
            book = load(path)
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


def alive(pid: int, since: object) -> bool:
    """Whether the process that wrote a journal still runs (the same one: a reused pid starts at another time)."""
    if pid <= 0 or pid == os.getpid():
        return False
    now = started(pid)
    if now is not None:
        return since is None or now == since
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # it exists, under another user
    return True


def _manifest(folder: str) -> dict[str, object]:
    doc = read_json(os.path.join(folder, MANIFEST))
    if not isinstance(doc, dict):
        raise ValueError(f"{folder} has no readable {MANIFEST}")
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
            book = load(left.journal)
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
                put_back = undo_of({"kind": "install", "snapshots": [snap], **more})
                if put_back is not None:
                    put_back()
            except (OSError, ValueError, KeyError, SnapshotError) as exc:
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
            load(left.journal).write("discarded")  # said first: a crash half-way leaves no stale journal
    return _drop(left)


def _drop(left: Leftover) -> list[str]:
    """Delete the saved copies, then the journal's folder (each only where fa-doctor's prefix names it)."""
    problems: list[str] = []
    home = [(os.path.dirname(left.journal), PREFIX)] if left.journal is not None else []
    for folder, prefix in [*((f, UNDO_PREFIX) for f in left.folders), *home]:
        if os.path.basename(folder).startswith(prefix) and not os.path.islink(folder):
            shutil.rmtree(folder, onerror=lambda *a: problems.append(f"cannot delete {a[1]}"))
    return problems
