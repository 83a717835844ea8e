"""The interpreter the server will run: its search path, read once with a short subprocess."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

# Runs inside the target. `python -c` puts the working directory first on sys.path, as
# `python -m sglang.launch_server` does, so a source checkout in the cwd shows up as it would there.
_SCRIPT = r"""
import json, os, platform, sys
try:
    libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
except (AttributeError, ValueError, OSError):
    libc = ""
print(json.dumps({
    "executable": sys.executable,
    "version": list(sys.version_info[:3]),
    "implementation": sys.implementation.name,
    "prefix": sys.prefix,
    "base_prefix": sys.base_prefix,
    "sys_path": [os.path.abspath(p) if p else os.getcwd() for p in sys.path],
    "machine": platform.machine(),
    "libc": libc,
    "no_site": bool(sys.flags.no_site),
}))
"""


class TargetError(Exception):
    """The interpreter to inspect cannot be run; the CLI turns this into exit code 2."""


@dataclass(frozen=True)
class TargetFacts:
    python: str  # path as given (or fa-doctor's own interpreter)
    executable: str
    version: tuple[int, int, int]
    implementation: str
    prefix: str
    sys_path: tuple[str, ...]
    machine: str
    libc: str | None  # "glibc 2.36"
    in_venv: bool
    no_site: bool

    @property
    def python_tag(self) -> str:
        return f"cp{self.version[0]}{self.version[1]}"

    def to_dict(self) -> dict[str, object]:
        return {
            "python": self.python,
            "executable": self.executable,
            "version": ".".join(map(str, self.version)),
            "implementation": self.implementation,
            "prefix": self.prefix,
            "in_venv": self.in_venv,
            "machine": self.machine,
            "libc": self.libc,
            "sys_path": list(self.sys_path),
        }


class TargetProbe:
    """The target's answer, asked for as early as possible: the child starts at once and is read later, so its
    start-up overlaps fa-doctor's own imports."""

    def __init__(self, python: str, timeout: float = 15.0) -> None:
        self.python, self.timeout = python, timeout
        self.error: TargetError | None = None
        self.proc: subprocess.Popen[str] | None = None
        if not python or "\x00" in python:
            self.error = TargetError("--python needs the path of a Python interpreter")
        elif os.sep in python and not os.path.exists(python):
            self.error = TargetError(f"--python {python!r}: no such file")
        else:
            try:
                self.proc = subprocess.Popen(
                    [python, "-c", _SCRIPT],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    errors="replace",
                )
            except FileNotFoundError:
                self.error = TargetError(f"--python {python!r}: not found")
            except PermissionError:
                self.error = TargetError(f"--python {python!r}: not executable")
            except OSError as exc:
                self.error = TargetError(f"--python {python!r}: cannot run it ({exc.strerror or exc})")

    def result(self) -> TargetFacts:
        if self.error is not None or self.proc is None:
            raise self.error or TargetError("no interpreter to inspect")
        python, proc = self.python, self.proc
        try:
            stdout, stderr = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise TargetError(f"--python {python!r}: gave no answer within {self.timeout:.0f} s") from None
        if proc.returncode != 0:
            tail = (stderr.strip().splitlines() or ["no output"])[-1]
            raise TargetError(
                f"--python {python!r} is not a working Python interpreter (exit {proc.returncode}: {tail})"
            )
        return _parse(python, stdout)


def _parse(python: str, stdout: str) -> TargetFacts:
    try:
        data = json.loads(stdout.strip().splitlines()[-1])
        version = tuple(int(v) for v in data["version"])
        return TargetFacts(
            python=python,
            executable=str(data["executable"]),
            version=(version[0], version[1], version[2]),
            implementation=str(data["implementation"]),
            prefix=str(data["prefix"]),
            sys_path=tuple(str(p) for p in data["sys_path"]),
            machine=str(data["machine"]),
            libc=str(data["libc"]) or None,
            in_venv=data["prefix"] != data["base_prefix"],
            no_site=bool(data["no_site"]),
        )
    except (ValueError, KeyError, IndexError, TypeError):
        raise TargetError(f"--python {python!r} did not answer like a CPython 3 interpreter") from None


def probe_target(python: str, timeout: float = 15.0) -> TargetFacts:
    return TargetProbe(python, timeout).result()
