"""The interpreter the server will run: its search path, read once with a short subprocess."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fa_doctor.model.machine import TargetFacts
from fa_doctor.process import proc

_MARK = "FA-DOCTOR-TARGET "
_MAX_OUTPUT = 4 << 20  # a sys.path of thousands of entries still fits
_PY2 = "FA-DOCTOR-PY2 "
# Runs inside the target (parsing under Python 2 too, to say so); sets the working directory's sys.path entry
# aside while it runs and reports it where the server will have it. The answer is a literal for ast.literal_eval.
_SCRIPT = r"""
import sys
if sys.version_info[0] < 3:
    sys.stdout.write("FA-DOCTOR-PY2 %d.%d.%d\n" % tuple(sys.version_info[:3]))
    sys.exit(3)
head = [sys.path.pop(0)] if sys.path and not getattr(sys.flags, "safe_path", False) else []
import os
try:
    cwd = os.getcwd()
except OSError:
    cwd = None
try:
    libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
except (AttributeError, ValueError, OSError):
    libc = ""
paths = []
for p in head + sys.path:
    if os.path.isabs(p):
        paths.append(p)
    elif cwd is not None:
        paths.append(os.path.join(cwd, p) if p else cwd)
sys.stdout.write("FA-DOCTOR-TARGET " + repr({
    "executable": sys.executable,
    "version": list(sys.version_info[:3]),
    "implementation": sys.implementation.name,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "sys_path": [os.path.normpath(p) for p in paths],
    "cwd": cwd,
    "machine": os.uname().machine,
    "libc": libc,
    "no_site": bool(sys.flags.no_site),
}) + "\n")
"""


class TargetError(Exception):
    """The interpreter to inspect cannot be run; the CLI turns this into exit code 2."""


class TargetProbe:
    """The target's answer: the child starts at once, beside fa-doctor's imports; ``result()`` waits at most
    ``timeout`` seconds for it, ``close()`` ends a probe whose answer is no longer wanted."""

    def __init__(
        self,
        python: str,
        timeout: float = 15.0,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        flags: Sequence[str] = (),
    ) -> None:
        self.python, self.timeout = python, timeout
        self.asked = (python, None if env is None else dict(env), cwd, tuple(flags))
        self.error: TargetError | None = None
        self.child: proc.Child | None = None
        if not python or "\x00" in python:
            self.error = TargetError("--python needs the path of a Python interpreter")
        elif os.sep in python and not os.path.lexists(python):
            self.error = TargetError(f"--python {python!r}: no such file")
        elif os.sep in python and os.path.isdir(python):
            self.error = TargetError(f"--python {python!r} is a directory, not a Python interpreter")
        else:
            try:
                self.child = proc.Child([python, *flags, "-c", _SCRIPT], env=env, cwd=cwd)
            except FileNotFoundError:
                self.error = TargetError(f"--python {python!r}: not found")
            except PermissionError:
                self.error = TargetError(f"--python {python!r}: not executable")
            except (OSError, ValueError, subprocess.SubprocessError) as exc:
                reason = getattr(exc, "strerror", None) or exc
                self.error = TargetError(f"--python {python!r}: cannot run it ({reason})")

    def answers(
        self, python: str, env: Mapping[str, str] | None, cwd: str | None = None, flags: Sequence[str] = ()
    ) -> bool:
        """Whether this probe asked exactly that: the same interpreter, flags, folder and environment."""
        return self.asked == (python, None if env is None else dict(env), cwd, tuple(flags))

    def close(self) -> None:
        if self.child is not None:
            self.child.kill(reap=0.5)
            self.child = None
            self.error = self.error or TargetError("the target probe was closed")

    def result(self) -> TargetFacts:
        if self.error is not None or self.child is None:
            raise self.error or TargetError("no interpreter to inspect")
        done = self.child.collect(self.timeout, max_output=_MAX_OUTPUT)
        self.child = None
        self.error = _failure(self.python, done, self.timeout)
        if self.error is not None:
            raise self.error
        return _parse(self.python, done.out())


def _failure(python: str, done: proc.Completed, timeout: float) -> TargetError | None:
    if done.timed_out:
        return TargetError(f"--python {python!r}: gave no answer within {timeout:g} s")
    if py2 := [line for line in done.out().splitlines() if line.startswith(_PY2)]:
        v = py2[-1][len(_PY2) :].strip()[:20]
        return TargetError(f"--python {python!r} is Python {v}: Python 2 is not supported (SGLang needs Python 3)")
    if done.returncode == 0:
        return None
    lines = [line.strip() for line in done.err().splitlines() if line.strip()]
    code = done.returncode
    status = f"signal {-code}" if code is not None and code < 0 else f"exit {code}"
    tail = lines[-1][:300] if lines else "no output"
    return TargetError(f"--python {python!r} is not a working Python interpreter ({status}: {tail})")


def _parse(python: str, stdout: str) -> TargetFacts:
    # The last marked line: a .pth may print before us, or print lines that imitate us before we run.
    lines = [line for line in stdout.splitlines() if line.startswith(_MARK)]
    try:
        data = ast.literal_eval(lines[-1][len(_MARK) :])
        v = tuple(int(n) for n in data["version"])
        exe, impl, prefix, machine = (str(data[k]) for k in ("executable", "implementation", "prefix", "machine"))
        paths = tuple(str(p) for p in data["sys_path"])
        libc, in_venv = str(data["libc"]) or None, data["prefix"] != data["base_prefix"]
        cwd = None if data.get("cwd") is None else str(data["cwd"])
        return TargetFacts(
            python, exe, (v[0], v[1], v[2]), impl, prefix, paths, machine, libc, in_venv, bool(data["no_site"]), cwd
        )
    except (ValueError, KeyError, IndexError, TypeError, AttributeError, SyntaxError, RecursionError, MemoryError):
        raise TargetError(f"--python {python!r} did not answer like a CPython 3 interpreter") from None


@dataclass(frozen=True, slots=True)
class Chosen:
    python: str
    why: str  # "--python", "$VIRTUAL_ENV", "$CONDA_PREFIX", "python3 on PATH", "fa-doctor's own interpreter"
    own: bool  # fa-doctor's own interpreter (a pipx or tools venv is rarely the server's)


def choose(explicit: str | None, env: Mapping[str, str]) -> Chosen:
    """The interpreter a bare check judges: `--python`, else the active venv's or conda environment's python, else
    the first `python3` on PATH, else fa-doctor's own."""
    own = os.path.realpath(sys.prefix)

    def chosen(python: str, why: str) -> Chosen:
        # A venv's python links to the same binary as every other venv's: the environment is its prefix.
        prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
        return Chosen(python, why, os.path.realpath(prefix) == own)

    if explicit:
        return chosen(explicit, "--python")
    for variable in ("VIRTUAL_ENV", "CONDA_PREFIX"):
        prefix = env.get(variable) or ""
        if os.path.isabs(prefix):
            for name in ("python", "python3"):
                candidate = os.path.join(prefix, "bin", name)
                if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
                    return chosen(candidate, f"${variable}")
    if found := shutil.which("python3", path=env.get("PATH") or os.defpath):
        return chosen(found, "python3 on PATH")
    return Chosen(sys.executable, "fa-doctor's own interpreter (no python3 on PATH)", True)
