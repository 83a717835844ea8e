"""Supervisor of one `fix --apply` command, run as `python -I -c <this file> COMMAND...` (stdlib only, never
imported): it, COMMAND and all COMMAND starts end together (docs/internals.md, "fix --apply's commands")."""

from __future__ import annotations

import contextlib
import ctypes
import glob
import os
import signal
import subprocess
import sys
from functools import partial

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
_LIBC = ctypes.CDLL(None, use_errno=True)


def _descendants() -> list[int]:
    found: list[int] = []
    todo = [os.getpid()]
    while todo and len(found) < 100000:
        for path in glob.glob(f"/proc/{todo.pop()}/task/*/children"):
            try:
                with open(path, "rb") as fh:
                    kids = [int(p) for p in fh.read().split()]
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in found:
                    found.append(kid)
                    todo.append(kid)
    return found


def _kill_all() -> None:
    for _ in range(3):  # one that forks while we sweep gets another round
        pids = _descendants()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError, OSError):
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass


def _on_signal(signum: int, frame: object) -> None:
    del frame
    _kill_all()
    os._exit(128 + signum)


def main(argv: list[str]) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    _LIBC.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        child = subprocess.Popen(argv, preexec_fn=partial(_LIBC.prctl, PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0))
    except OSError as exc:
        sys.stderr.write(f"cannot start {argv[0]}: {exc}\n")
        return 127
    code = child.wait()
    _kill_all()
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL's disposition cannot be set (nor needs to be)
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
