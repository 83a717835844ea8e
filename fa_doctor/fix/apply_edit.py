"""Env-file edits inside `fix --apply`: proven with the editor's own dry run, undone from the backup it keeps."""

from __future__ import annotations

import os

from fa_doctor.fix import envfile
from fa_doctor.fix.journal import Journal
from fa_doctor.fix.proofs import Failed, Refused
from fa_doctor.model.actions import EditFile
from fa_doctor.probes.environment import OVERRIDE


def _value(action: EditFile) -> int | None:
    if action.variable != OVERRIDE:
        raise Refused(f"fa-doctor edits only {OVERRIDE} in files, not {action.variable}")
    if action.value not in (None, "2", "3", "4"):
        raise Refused(f"{OVERRIDE} can be set to 2, 3 or 4 only, not {action.value!r}")
    return None if action.value is None else int(action.value)


def prove_edit(action: EditFile) -> None:
    result = envfile.edit(action.path, set_value=_value(action), dry_run=True)
    if result.error:
        raise Refused(result.error)


def run_edit(action: EditFile, index: int, book: Journal) -> tuple[str, str]:
    """(message, how to undo by hand); Failed when the editor refuses now."""

    try:
        value = _value(action)
    except Refused as exc:
        raise Failed(str(exc)) from None
    result = envfile.edit(action.path, set_value=value, dry_run=False)
    if result.error:
        raise Failed(result.error)
    if not (result.changed and result.backup):
        return f"{action.path}: nothing to change", ""
    path, backup = result.path, result.backup
    real = os.path.realpath(path)
    by_hand = f"mv -- {backup} {real}"
    book.add(index, f"edited {path} (backup {backup})", by_hand, {"kind": "edit", "path": real, "backup": backup})
    return f"edited {action.path} (backup {backup})", by_hand
