"""Runs the real CLI in this process, stdout and stderr apart (what typer's CliRunner did for the typer app):
the environment changed for the run only, standard input from `input`, the exit code from SystemExit."""

from __future__ import annotations

import contextlib
import io
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from fa_doctor.cli import main


@dataclass
class Invoked:
    exit_code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None


@contextlib.contextmanager
def _environ(env: Mapping[str, str | None] | None) -> Iterator[None]:
    saved = dict(os.environ)
    for name, value in (env or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def invoke(args: list[str], env: Mapping[str, str | None] | None = None, input: str | None = None) -> Invoked:
    out, err = io.StringIO(), io.StringIO()
    streams = sys.stdin, sys.stdout, sys.stderr
    sys.stdin, sys.stdout, sys.stderr = io.TextIOWrapper(io.BytesIO((input or "").encode())), out, err
    code, exception = 0, None
    try:
        with _environ(env):
            main(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # a bug escaped the guard: the test sees it
        code, exception = 1, exc
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
    return Invoked(code, out.getvalue(), err.getvalue(), exception)
