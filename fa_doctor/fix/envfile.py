"""Remove or rewrite the override's assignment in env files, keeping every other byte.

Each file is read whole by a small tokenizer for its dialect (fa_doctor/fix/dialects: sh/bash/zsh, fish,
PowerShell, systemd units, dotenv), which knows continuations, compound statements, quoted strings and heredocs.
Only real assignments change; where deleting one would change what the rest means it becomes a neutral statement;
whatever cannot be placed with certainty is refused with the line and the reason, and the file stays as it was.
Reading, encodings (UTF-16 with a BOM too), hard links and the atomic write that keeps owner, mode, ACLs and
xattrs are in envfile_io. Diffs show only the changed lines, with secret-looking values hidden (fa_doctor.render.scrub).
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from fa_doctor.diagnose.derive.pin import VALID
from fa_doctor.fix import envfile_io
from fa_doctor.fix.dialects import Plan, Unsafe, apply, assigns_somewhere, detect, line_of, planner
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.render.scrub import hide_secret_values

MAX_BYTES = envfile_io.MAX_BYTES
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


def _plan(text: str, value: str | None, dialect: str) -> Plan:
    """Raises ValueError with a line and a reason where the file cannot be edited safely."""
    try:
        return planner(dialect)(text, value)
    except Unsafe as e:
        if "cannot read this file" in e.reason and not assigns_somewhere(text):
            return Plan()  # it only reads or unsets the variable: nothing to do, whatever else it holds
        raise ValueError(f"{e}; edit it by hand") from None
    except RecursionError:
        raise ValueError("it nests substitutions or blocks too deeply for fa-doctor; edit it by hand") from None


def rewrite(text: str, value: str | None, dialect: str | None = None) -> tuple[str, list[int]]:
    """The whole text rewritten, and the 1-based numbers of the lines that changed. Raises ValueError."""
    new, changed, _notes = _rewrite(text, value, dialect or detect("", text))
    return new, changed


def _rewrite(text: str, value: str | None, dialect: str) -> tuple[str, list[int], list[str]]:
    if OVERRIDE not in text:
        return text, [], []
    plan = _plan(text, value, dialect)
    try:
        new = apply(text, plan.changes)
    except ValueError:
        raise ValueError("fa-doctor found overlapping edits; edit it by hand") from None
    changed = sorted({line_of(text, c.start) for c in plan.changes if text[c.start : c.end] != c.new})
    return new, changed, plan.notes


def _lines(text: str) -> list[str]:
    """Lines split on LF only (str.splitlines also splits on \\f, \\x1c, U+2028...), terminators kept."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _diff(path: str, old: str, new: str) -> str:
    """A unified diff of the changed lines only (no context: env files hold secrets), secrets on them hidden."""
    out = []
    for line in difflib.unified_diff(_lines(old), _lines(new), path, path, n=0):
        if line[:1] in "+-" and not line.startswith(("+++", "---")):
            line = hide_secret_values(line)
        out.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(out)


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
        st, data = envfile_io.read(real)
        text, encoding, bom = envfile_io.decode(data)
    except envfile_io.Refused as e:
        return EditResult(path, False, error=f"{path} {e}")
    except ValueError:  # a NUL byte in the path
        return EditResult(path, False, error=f"{path!r} is not a usable path")
    try:
        new, _changed, notes = _rewrite(text, value, detect(path, text))
    except ValueError as e:
        return EditResult(path, False, error=f"{path}: {e}; the file is unchanged")
    if new == text:
        return EditResult(path, False)
    diff = _diff(path, text, new)
    all_notes = (*dict.fromkeys(notes), _LAST_NOTE)
    if dry_run:
        return EditResult(path, True, diff, notes=all_notes)
    try:
        backup = envfile_io.write(real, st, data, envfile_io.encode(new, encoding, bom))
    except OSError as e:
        reason = e.strerror or str(e)
        return EditResult(path, False, diff, error=f"cannot write {path}: {reason}; the file is unchanged")
    return EditResult(path, True, diff, backup, notes=all_notes)
