"""Remove or rewrite the override's assignment in env files, keeping every other byte.

Each file is read whole by a small tokenizer for its dialect (fa_doctor/fix/dialects: sh/bash/zsh, systemd units,
dotenv), which knows continuations, compound statements, quoted strings and heredocs. Only plain assignments are
edited; a file with any other line that may set the override (the name quoted or split, `read`, `printf -v`,
`${N:=3}`, `eval`, `source`...) is refused with every such line as FILE:LINE, and stays as it was. fish, PowerShell
and csh files are refused the same way. Reading, encodings, hard links and the atomic write that keeps owner, mode,
ACLs and xattrs are in envfile_io. Diffs show only the changed lines, with secret-looking values hidden.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass

from fa_doctor.diagnose.derive.pin import VALID
from fa_doctor.fix import envfile_io
from fa_doctor.fix.dialects import Plan, apply, detect, line_of, planner
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.render.scrub import hide_secret_values

MAX_BYTES = envfile_io.MAX_BYTES
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


def _plan(path: str, text: str, value: str | None, dialect: str) -> Plan:
    """Raises ValueError naming PATH:LINE for every line that may set the override in a form not edited."""
    try:
        plan = planner(dialect)(text, value)
    except RecursionError:
        raise ValueError(f"{path}: it nests substitutions or blocks too deeply for fa-doctor") from None
    if plan.refusals:
        lines = sorted(plan.refusals.items())
        said = [f"{path}:{line}: {why}" for line, why in lines[:_SHOWN]]
        more = [f"and {len(lines) - _SHOWN} more lines"] if len(lines) > _SHOWN else []
        raise ValueError("; ".join([*said, *more]) + f"; fa-doctor cannot prove that {path} leaves {OVERRIDE} alone")
    return plan


def rewrite(text: str, value: str | None, dialect: str | None = None, path: str = "FILE") -> tuple[str, list[int]]:
    """The whole text rewritten, and the 1-based numbers of the lines that changed. Raises ValueError."""
    new, changed, _notes = _rewrite(path, text, value, dialect or detect("", text))
    return new, changed


def _rewrite(path: str, text: str, value: str | None, dialect: str) -> tuple[str, list[int], list[str]]:
    plan = _plan(path, text, value, dialect)
    try:
        new = apply(text, plan.changes)
    except ValueError:
        raise ValueError(f"{path}: fa-doctor found overlapping edits") from None
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
        new, _changed, notes = _rewrite(path, text, value, detect(path, text))
    except ValueError as e:
        return EditResult(path, False, error=f"{e}; the file is unchanged: edit it by hand")
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
