"""The calling shell, for `fix --unset-override`: the nearest known shell among fa-doctor's ancestors
(shellingham reads the process tree), else $SHELL, else sh."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

# Names a process or $SHELL may carry, mapped to the syntax fa-doctor prints for it.
_ALIASES = {
    **dict.fromkeys(("sh", "dash", "ash", "busybox", "ksh", "mksh", "yash"), "sh"),
    **{name: name for name in ("bash", "zsh", "fish")},
    **dict.fromkeys(("pwsh", "powershell"), "powershell"),
}


def _known(name: str | None) -> str | None:
    """The syntax for a process name or $SHELL (a login shell's argv[0] is -bash; on Windows, pwsh.exe)."""
    return _ALIASES.get(os.path.basename(name.strip()).lower().removeprefix("-").removesuffix(".exe")) if name else None


def _shellingham() -> str | None:
    try:
        import shellingham  # type: ignore[import-untyped]  # a dependency; imported only when used

        name, _path = shellingham.detect_shell()
    except Exception:  # not installed, shellingham.ShellDetectionFailure, or /proc unreadable
        return None
    return str(name)


def detect_shell(env: Mapping[str, str], probe: Callable[[], str | None] = _shellingham) -> str:
    """The calling shell's syntax: the nearest known shell among our ancestors, else $SHELL, else sh."""
    return _known(probe()) or _known(env.get("SHELL")) or "sh"
