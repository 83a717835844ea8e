"""`fa-doctor fix --unset-override`: shell code that unsets (or sets) the override in the calling shell.

A child process cannot change its parent's environment, so fa-doctor prints code for the shell to evaluate:
`eval "$(fa-doctor fix --unset-override)"` (bash, zsh, sh), `fa-doctor fix --unset-override | source` (fish),
`fa-doctor fix --unset-override | Out-String | Invoke-Expression` (PowerShell). The code is rendered from the same
actions as every remedy (fa_doctor.actions), so it is quoted by the one function that quotes everything.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping

from fa_doctor.actions import SetEnv, Shell, UnsetEnv, render
from fa_doctor.derive.pin import VALID
from fa_doctor.probes.environment import OVERRIDE

SHELLS = tuple(s.value for s in Shell)
# Names a process or $SHELL may carry, mapped to the syntax fa-doctor prints for it.
_ALIASES = {
    "bash": "bash",
    "zsh": "zsh",
    "sh": "sh",
    "dash": "sh",
    "ash": "sh",
    "busybox": "sh",
    "ksh": "sh",
    "mksh": "sh",
    "yash": "sh",
    "fish": "fish",
    "pwsh": "powershell",
    "powershell": "powershell",
}
EVAL = {
    "bash": 'eval "$(fa-doctor fix --unset-override{args})"',
    "zsh": 'eval "$(fa-doctor fix --unset-override{args})"',
    "sh": 'eval "$(fa-doctor fix --unset-override{args})"',
    "fish": "fa-doctor fix --unset-override{args} | source",
    "powershell": "fa-doctor fix --unset-override{args} | Out-String | Invoke-Expression",
}


def _known(name: str | None) -> str | None:
    if not name:
        return None
    base = os.path.basename(name.strip()).lower()
    base = base[1:] if base.startswith("-") else base  # a login shell's argv[0]: -bash
    base = base[:-4] if base.endswith(".exe") else base
    return _ALIASES.get(base)


def _shellingham() -> str | None:
    try:
        import shellingham  # type: ignore[import-untyped]  # a dependency; imported only when used
    except ImportError:
        return None
    try:
        name, _path = shellingham.detect_shell()
    except Exception:  # shellingham.ShellDetectionFailure, or /proc unreadable
        return None
    return str(name)


def detect_shell(env: Mapping[str, str], probe: Callable[[], str | None] = _shellingham) -> str:
    """The calling shell's syntax: the nearest known shell among our ancestors, else $SHELL, else sh."""
    return _known(probe()) or _known(env.get("SHELL")) or "sh"


def override_code(shell: str, set_value: int | None) -> str:
    """Code (ending in a newline) that unsets the override, or sets it to `set_value` (2, 3 or 4).

    Raises ValueError for an unknown shell or a value other than the ints 2, 3, 4 (a bool or "3" is refused:
    the value must never carry text of the caller's into shell code).
    """
    if shell not in SHELLS:
        raise ValueError(f"unknown shell {shell!r}: expected one of {', '.join(SHELLS)}")
    if set_value is None:
        action: SetEnv | UnsetEnv = UnsetEnv(OVERRIDE)
    elif type(set_value) is int and set_value in VALID:
        action = SetEnv(OVERRIDE, str(set_value))
    else:
        raise ValueError(f"--set takes 2, 3 or 4, not {set_value!r}")
    return render(action, Shell(shell)) + "\n"


def eval_hint(shell: str, set_value: int | None = None) -> str:
    """How to run override_code's output in `shell` (for messages on stderr and the docs)."""
    args = f" --set {set_value}" if set_value is not None else ""
    return EVAL[shell if shell in EVAL else "sh"].format(args=args)


# Anything a shell, fish or PowerShell might take for the end of a line, and other controls: shown as escapes.
_BREAKS = re.compile("[\x00-\x08\x0b-\x1f\x7f\x85\u2028\u2029]")


def as_comments(text: str) -> str:
    """`text` with every line a comment, so that `eval "$(...)"`, `| source` and `| Invoke-Expression` run
    nothing of it (a `--dry-run` diff quotes the env file, whose lines are code)."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "".join("# " + _BREAKS.sub(lambda m: f"\\u{ord(m[0]):04x}", line) + "\n" for line in lines)
