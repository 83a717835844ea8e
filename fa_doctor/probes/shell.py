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
