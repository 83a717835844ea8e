"""How `fix --apply` starts a command: bounded (proc.run) and, on Linux, under `supervise.py`, so that it ends with
fa-doctor however fa-doctor ends (docs/internals.md, "fix --apply's commands")."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from fa_doctor.process import proc


@lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def parent_death(sig: int) -> Callable[[], None] | None:
    """A preexec function giving the child `sig` (PR_SET_PDEATHSIG) when fa-doctor ends; None where unsupported."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def setup() -> None:
        prctl(1, int(sig), 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # fa-doctor ended between the fork and the prctl: the signal never comes
            os._exit(137)

    return setup


@lru_cache(maxsize=1)
def _supervisor() -> str | None:
    if _prctl() is None or not sys.executable or not os.path.isdir("/proc/self/task"):
        return None
    try:
        with open(os.path.join(os.path.dirname(__file__), "supervise.py"), encoding="utf-8") as fh:
            return fh.read()
    except OSError:
        return None


def run(
    argv: Sequence[str], timeout: float, *, env: Mapping[str, str], cwd: str, max_output: int = 1 << 16
) -> proc.Completed:
    """Start `argv` in `cwd` (a folder fa-doctor made), bounded by `timeout`; OSError/ValueError as proc.run."""
    source = _supervisor()
    full = list(argv) if source is None else [sys.executable, "-I", "-c", source, *argv]
    preexec = parent_death(signal.SIGKILL if source is None else signal.SIGTERM)
    return proc.run(full, timeout, env=env, cwd=cwd, max_output=max_output, preexec=preexec)
