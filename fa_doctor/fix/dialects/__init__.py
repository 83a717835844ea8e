"""Structure-aware edits of the override in env files: one small tokenizer per dialect.

Each dialect module reads the whole file (continuations, compound statements, quoted strings, heredocs) and
returns a Plan: text spans to replace, in the original text's offsets. The rules they share live here:

- A statement that only sets the override goes. Its physical lines are deleted when it stands alone on them at
  the top level; anywhere else (inside `if`/a function/a loop, after `&&`, before fish's `and`) it becomes a
  neutral statement (`:` in sh, `true` in fish, `$null = $null` in PowerShell), so nothing around it changes
  meaning. systemd: only the one assignment leaves an `Environment=` line that holds several.
- One word among others goes with the blank (or `\\`-newline) before it, so no continuation dangles.
- Anything fa-doctor cannot place with certainty raises Unsafe with the line and the reason.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable

from fa_doctor.fix.dialects import dotenv, fish, powershell, sh, systemd
from fa_doctor.fix.dialects.base import MENTION, N, Plan, Unsafe, apply, line_of

__all__ = ["MENTION", "Plan", "Unsafe", "apply", "assigns_somewhere", "detect", "line_of", "planner"]

# ---- which dialect -----------------------------------------------------------------------------------------

_SYSTEMD_EXT = {".service", ".socket", ".timer", ".mount", ".path", ".slice", ".scope", ".swap", ".target"}
_SH_NAMES = {".bashrc", ".bash_profile", ".bash_login", ".profile", ".zshrc", ".zshenv", ".zprofile", ".zlogin"}
_SH_NAMES |= {".kshrc", ".envrc", ".bash_aliases", "bashrc", "profile", "zshrc", "zshenv", "bash.bashrc"}
_SECTION = re.compile(r"^[ \t]*\[(?:Unit|Service|Install|Socket|Timer|Mount|Path|Slice|Scope|Swap)\][ \t]*\r?$", re.M)
_PS_HINT = re.compile(
    r"(?i)\$\{?env:|\b(?:set|new)-item\b[^\n]*env:|\[(?:system\.)?environment\]::|^[ \t]*#requires\b", re.M
)
_FISH_HINT = re.compile(rf"^[ \t]*set(?:[ \t]+-[-A-Za-z]+)*[ \t]+{re.escape(N)}\b", re.M)
_SD_HINT = re.compile(rf"^[ \t]*Environment[ \t]*=[^\n]*{re.escape(N)}", re.M)
_DOTENV_SPACED = re.compile(rf"^[ \t]*(?:export[ \t]+)?{re.escape(N)}[ \t]+=", re.M)


def _is_dotenv_name(name: str) -> bool:
    return name in ("env", "environment", ".env") or name.endswith(".env") or name.startswith(".env.")


def detect(path: str, text: str) -> str:
    """The dialect ("sh", "fish", "powershell", "systemd", "dotenv"): from the name where it says, else the text."""
    name = os.path.basename(path).lower()
    ext = os.path.splitext(name)[1]
    if ext in (".ps1", ".psm1", ".psd1"):
        return "powershell"
    if ext == ".fish":
        return "fish"
    if ext in _SYSTEMD_EXT:
        return "systemd"
    if ext in (".sh", ".bash", ".zsh", ".ksh") or name in _SH_NAMES:
        return "sh"
    if _SECTION.search(text) or _SD_HINT.search(text):
        return "systemd"
    if _PS_HINT.search(text):
        return "powershell"
    if _FISH_HINT.search(text):
        return "fish"
    if _is_dotenv_name(name) or _DOTENV_SPACED.search(text):
        return "dotenv"
    return "sh"


def planner(dialect: str) -> Callable[[str, str | None], Plan]:
    plans: dict[str, Callable[[str, str | None], Plan]] = {
        "sh": sh.plan,
        "fish": fish.plan,
        "powershell": powershell.plan,
        "systemd": systemd.plan,
        "dotenv": dotenv.plan,
    }
    return plans[dialect]


def assigns_somewhere(text: str) -> bool:
    """Whether any line looks like it sets the override, in any dialect (a file fa-doctor cannot read is then
    refused; one that only reads or unsets it is left alone)."""
    fish_set = any(line.strip().startswith("set") and N in line for line in text.split("\n"))
    return bool(MENTION.search(text) or powershell.ASSIGNS.search(text) or fish_set)
