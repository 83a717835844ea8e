"""Structure-aware edits of the override in env files: sh (bash, zsh), dotenv and systemd.

Each dialect module reads the whole file (continuations, compound statements, quoted strings, heredocs) and
returns a Plan: text spans to replace, in the original text's offsets, or the lines that may set the override in
a form fa-doctor does not edit (then nothing is edited). The rules they share live in base.py:

- A statement that only sets the override goes. Its physical lines are deleted when it stands alone on them at
  the top level; anywhere else (inside `if`/a function/a loop, after `&&`) it becomes `:`, so nothing around it
  changes meaning. systemd: only the one assignment leaves an `Environment=` line that holds several.
- One word among others goes with the blank (or `\\`-newline) before it, so no continuation dangles.
- The name is looked for as a shell reads it: quotes, backslashes and backslash-newlines dropped.

fish, PowerShell and csh files are not edited: `refused()` names the lines where the name appears.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from fa_doctor.fix.dialects import dotenv, sh, systemd
from fa_doctor.fix.dialects.base import N, Plan, apply, line_of

__all__ = ["Plan", "apply", "detect", "line_of", "planner", "refused"]

_SYSTEMD_EXT = {".service", ".socket", ".timer", ".mount", ".path", ".slice", ".scope", ".swap", ".target"}
_SH_NAMES = {".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin"}
_SH_NAMES |= {".kshrc", ".envrc", ".bash_aliases", "bashrc", "profile", "zshrc", "zshenv", "bash.bashrc"}
_OTHER_SHELLS = {".fish": "fish", ".ps1": "PowerShell", ".psm1": "PowerShell", ".psd1": "PowerShell"}
_OTHER_SHELLS |= {".csh": "csh", ".tcsh": "tcsh", ".cshrc": "csh", ".tcshrc": "tcsh", ".login": "csh"}
_SECTION = re.compile(r"^[ \t]*\[(?:Unit|Service|Install|Socket|Timer|Mount|Path|Slice|Scope|Swap)\][ \t]*\r?$", re.M)
_SD_HINT = re.compile(rf"^[ \t]*Environment[ \t]*=[^\n]*{re.escape(N)}", re.M)
_DOTENV_SPACED = re.compile(rf"^[ \t]*(?:export[ \t]+)?{re.escape(N)}[ \t]+=", re.M)


def _is_dotenv_name(name: str) -> bool:
    return name in ("env", "environment", ".env") or name.endswith(".env") or name.startswith(".env.")


def detect(path: str, text: str) -> str:
    """The dialect ("sh", "systemd", "dotenv"; "fish", "PowerShell", "csh", "tcsh" are refused): from the
    name where it says, else the text."""
    name = os.path.basename(path).lower()
    ext = os.path.splitext(name)[1] or name
    if ext in _OTHER_SHELLS:
        return _OTHER_SHELLS[ext]
    if ext in _SYSTEMD_EXT:
        return "systemd"
    if ext in (".sh", ".bash", ".zsh", ".ksh") or name in _SH_NAMES:
        return "sh"
    if _SECTION.search(text) or _SD_HINT.search(text):
        return "systemd"
    if _is_dotenv_name(name) or _DOTENV_SPACED.search(text):
        return "dotenv"
    return "sh"


_PLANS: dict[str, Callable[[str, str | None], Plan]] = {"sh": sh.plan, "systemd": systemd.plan, "dotenv": dotenv.plan}


def planner(dialect: str) -> Callable[[str, str | None], Plan]:
    return _PLANS.get(dialect) or refused(dialect)


def refused(dialect: str) -> Callable[[str, str | None], Plan]:
    """A shell fa-doctor does not read: every line that names the variable (any case: PowerShell's are not
    case-sensitive), or the whole file where none does (code it sources may still set it)."""

    def plan(text: str, value: str | None) -> Plan:
        out, why = Plan(), f"fa-doctor does not edit {dialect} files; remove or change it by hand"
        for m in re.finditer(re.escape(N), text, re.I):
            out.refuse(line_of(text, m.start()), f"names {N}: {why}")
        if not out.refusals:
            out.refuse(1, f"{why} (no line names {N}, but code the file runs may set it)")
        return out

    return plan
