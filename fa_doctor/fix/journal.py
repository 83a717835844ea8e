"""The journal of `fix --apply`: what each step changed and how to put it back, kept on disk as it happens.

- A move is undone by moving the path back (`os.rename`, the same filesystem: proven before it ran).
- An install or uninstall that replaces or removes a distribution is undone from a snapshot taken just before
  it: every file its RECORD lists, hard-linked (copied where a link cannot be made) into a hidden folder beside
  it on the same filesystem. Putting it back needs no index and no download: the files the step wrote for the
  new version (its RECORD) are removed, then each saved file is renamed back over its old path. A distribution
  without a RECORD cannot be snapshot, so no step may replace or remove it (checked in `proofs`).
- An env-file edit is undone by renaming the backup `envfile` kept over the file.
The journal file (JSON, rewritten and fsynced after each change) names every change and its undo in words, so
even after a SIGKILL the state can be read and put back by hand.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from fa_doctor.probes.files import read
from fa_doctor.process.atomic import write_atomic

_RECORD_BYTES = 32 << 20


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


@dataclass(slots=True)
class Snapshot:
    """Saved copies of one distribution's files: (original path, saved path)."""

    name: str
    version: str
    location: str
    folder: str
    files: list[tuple[str, str]] = field(default_factory=list)


def take(name: str, version: str, location: str, metadata_dir: str) -> Snapshot:
    """Hard-link (or copy) every file of the distribution into a fresh hidden folder inside `location`."""
    paths = record_files(location, metadata_dir)
    try:
        folder = tempfile.mkdtemp(prefix=".fa-doctor-undo-", dir=location)
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
    except OSError as exc:
        discard(snap)
        raise SnapshotError(
            f"cannot save {name} {version}'s files ({exc.strerror or exc}): it could not be put back"
        ) from None
    return snap


def discard(snap: Snapshot) -> None:
    shutil.rmtree(snap.folder, ignore_errors=True)


def installed_copy(location: str, name: str) -> tuple[str, str] | None:
    """(version, metadata dir) of the dist-info of `name` in `location`, if there is exactly one."""
    from fa_doctor.catalog.families import normalize

    found = []
    with contextlib.suppress(OSError):
        for entry in os.listdir(location):
            if entry.endswith(".dist-info") and normalize(entry[: -len(".dist-info")].split("-", 1)[0]) == name:
                found.append((entry[: -len(".dist-info")].split("-", 1)[-1], os.path.join(location, entry)))
    return found[0] if len(found) == 1 else None


def remove_installed(location: str, name: str, keep: Iterable[str] = ()) -> None:
    """Delete what pip wrote for `name` in `location` (its RECORD's files inside `location`, then its dist-info),
    except the paths in `keep`. OSError propagates."""
    found = installed_copy(location, name)
    if found is None:
        return
    kept = set(keep)
    root = location.rstrip("/") + "/"
    for path in record_files(location, found[1]):
        if path in kept or not path.startswith(root):
            continue
        if os.path.islink(path) or os.path.isfile(path):
            os.unlink(path)
    shutil.rmtree(found[1], ignore_errors=True)


def restore(snap: Snapshot, wrote: Iterable[str] = ()) -> None:
    """Put the distribution back as it was: remove what the step wrote for the names in `wrote` (other than the
    saved paths), then rename every saved file over its old path. OSError propagates."""
    originals = [path for path, _ in snap.files]
    for name in wrote:
        found = installed_copy(snap.location, name)
        if found is not None and not (name == snap.name and found[0] == snap.version):  # pip put it back itself
            remove_installed(snap.location, name, originals)
    for path, saved in snap.files:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        os.replace(saved, path)
    discard(snap)


@dataclass(slots=True)
class Entry:
    step: int
    did: str  # what changed, in words
    undo_text: str  # how to put it back, in words (for a person, after a SIGKILL)
    undo: Callable[[], None] | None  # None: it cannot be undone here


class Journal:
    """The changes of one run, newest last, mirrored to `path` after each one."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[Entry] = []

    def add(self, step: int, did: str, undo_text: str, undo: Callable[[], None] | None) -> None:
        self.entries.append(Entry(step, did, undo_text, undo))
        self.write()

    def write(self, state: str = "running") -> None:
        doc = {
            "schema": "fa-doctor.apply-journal/1",
            "state": state,
            "changes": [{"step": e.step, "did": e.did, "undo": e.undo_text} for e in self.entries],
        }
        with contextlib.suppress(OSError):
            write_atomic(self.path, json.dumps(doc, indent=1).encode(), mode=0o600)

    def rollback(self) -> tuple[list[tuple[Entry, str | None]], list[Entry]]:
        """Undo every change, newest first: ([(entry, None or why its undo failed)], entries with no undo)."""
        done: list[tuple[Entry, str | None]] = []
        manual: list[Entry] = []
        for entry in reversed(self.entries):
            if entry.undo is None:
                manual.append(entry)
                continue
            try:
                entry.undo()
            except (OSError, SnapshotError) as exc:
                done.append((entry, str(getattr(exc, "strerror", None) or exc)))
            else:
                done.append((entry, None))
        return done, manual
