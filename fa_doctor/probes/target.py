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


def probe_target(python: str, timeout: float = 15.0) -> TargetFacts:
    if not python or "\x00" in python:
        raise TargetError("--python needs the path of a Python interpreter")
    if os.sep in python and not os.path.exists(python):
        raise TargetError(f"--python {python!r}: no such file")
    try:
        proc = subprocess.run(
            [python, "-c", _SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            errors="replace",
        )
    except FileNotFoundError:
        raise TargetError(f"--python {python!r}: not found") from None
    except PermissionError:
        raise TargetError(f"--python {python!r}: not executable") from None
    except OSError as exc:
        raise TargetError(f"--python {python!r}: cannot run it ({exc.strerror or exc})") from None
    except subprocess.TimeoutExpired:
        raise TargetError(f"--python {python!r}: gave no answer within {timeout:.0f} s") from None
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise TargetError(f"--python {python!r} is not a working Python interpreter (exit {proc.returncode}: {tail})")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
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
