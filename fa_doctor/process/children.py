"""How `fix --apply` starts a command: bounded (fa_doctor.process.proc), in a folder it owns, and ended with fa-doctor.

fa-doctor's own signal path ends its children on SIGINT/SIGTERM/SIGHUP; a SIGKILL runs no code at all. So on
Linux each command runs under `fa_doctor/process/supervise.py` (fa-doctor's interpreter, `-I`: nothing from the
working directory or the environment's PYTHON* variables), which gets a parent-death signal (PR_SET_PDEATHSIG
through prctl, set in the child between fork and exec) and ends the command and everything it started when
fa-doctor goes, however it goes. Elsewhere (no prctl, no /proc) the command runs directly.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache

from fa_doctor.process import proc

_PR_SET_PDEATHSIG = 1


@lru_cache(maxsize=1)
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return fn


def parent_death(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A preexec function giving the child `sig` when fa-doctor (this thread) ends; None where unsupported."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def setup() -> None:
        prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
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


def argv_for(argv: Sequence[str]) -> tuple[list[str], Callable[[], None] | None]:
    """The argv to start and its preexec: under the supervisor where it runs, else as given."""
    source = _supervisor()
    if source is None:
        return list(argv), parent_death(signal.SIGKILL)
    return [sys.executable, "-I", "-c", source, *argv], parent_death(signal.SIGTERM)


def run(
    argv: Sequence[str], timeout: float, *, env: Mapping[str, str], cwd: str, max_output: int = 1 << 16
) -> proc.Completed:
    """Start `argv` in `cwd` (a folder fa-doctor made), bounded by `timeout`; OSError/ValueError as proc.run."""
    full, preexec = argv_for(argv)
    return proc.run(full, timeout, env=env, cwd=cwd, max_output=max_output, preexec=preexec)
