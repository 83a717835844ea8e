"""The outermost guard: dispatch the parsed command line, and turn whatever goes wrong (misuse, a signal, a closed
stream, a bug) into an exit code and, in a machine format, one document. Never a traceback."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from fa_doctor import interrupt
from fa_doctor.cli.deliver import Outputs, _silence, deliver
from fa_doctor.result import EXIT_ERROR, Result, error_result, interrupted_result

COMPLETE = "_FA_DOCTOR_COMPLETE"


def _name(args: Sequence[str]) -> str:
    return args[0] if args and not args[0].startswith("-") else "fa-doctor"


def _help(command: Any) -> str:
    from fa_doctor.cli.help import render

    return render(command)


def dispatch(args: list[str], early: Any, parsed: Any = None) -> int:
    from fa_doctor.cli.parse import parse
    from fa_doctor.cli.spec import ROOT

    if os.environ.get(COMPLETE, "").startswith("complete_"):
        from fa_doctor.cli.completion import candidates

        sys.stdout.write("".join(f"{word}\n" for word in candidates(os.environ)))
        return 0
    if not args:  # `fa-doctor` alone: what it can do, as misuse
        sys.stderr.write(_help(ROOT))
        return EXIT_ERROR
    parsed = parsed if parsed is not None else parse(args, os.environ)
    if parsed.help:
        sys.stdout.write(_help(parsed.command))
        return 0
    if parsed.command is ROOT:
        return _root(parsed.values)
    from fa_doctor.cli.commands import RUN

    return RUN[parsed.command.name](parsed, early)


def _root(values: dict[str, object]) -> int:
    import fa_doctor.cli.completion as completion

    if values["show_completion"]:
        sys.stdout.write(completion.script(str(values["show_completion"])))
    elif values["install_completion"]:
        where, todo = completion.install(str(values["install_completion"]), os.environ)
        sys.stderr.write(f"fa-doctor: completion written to {where}" + (f"; {todo}" if todo else "") + "\n")
    else:
        from fa_doctor import __version__

        sys.stdout.write(f"fa-doctor {__version__}\n")
    return 0


def _ensure_streams() -> bool:
    """A closed stdout or stderr (`>&-`, `2>&-`) becomes /dev/null; True when stdout was lost."""
    lost = False
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
        lost = True
    return lost


def main_guard(args: list[str], early: object, parsed: Any = None) -> int:
    from fa_doctor import proc
    from fa_doctor.cli.parse import UsageError
    from fa_doctor.interrupt import Interrupted, handled

    stdout_lost = _ensure_streams()
    try:
        with handled():
            try:
                code = dispatch(args, early, parsed)
            except Interrupted as exc:
                code = emit_interrupted(args, exc.signum)
            except BrokenPipeError:
                _silence(sys.stdout)
                code = EXIT_ERROR
            except UsageError as exc:
                code = _misuse(args, exc)
            except Exception as exc:
                if os.environ.get("FA_DOCTOR_DEBUG"):
                    raise
                code = _error_out(args, error_result(_name(args), f"internal error: {type(exc).__name__}: {exc}"))
    finally:
        interrupt.finishing()  # decided: from here a signal only ends the process (128+N), without a traceback
        interrupt.checkpoint("cleanup")
        proc.terminate_all()  # the early target probe of a usage error, anything a crash left behind
    if stdout_lost and code in (0, 1):
        sys.stderr.write("fa-doctor: stdout is closed: the report could not be written\n")
        return EXIT_ERROR
    return code


def _misuse(args: Sequence[str], exc: Any) -> int:
    import fa_doctor.cli.help as helptext
    from fa_doctor.cli.parse import requested_format

    if requested_format(args, os.environ) == "human":
        sys.stderr.write(helptext.error(exc.command, exc.message))
        return EXIT_ERROR
    return _error_out(args, error_result(_name(args), exc.message))


def emit_interrupted(args: Sequence[str], signum: int) -> int:
    from fa_doctor import proc
    from fa_doctor.cli.parse import requested_format

    proc.terminate_all()
    result = interrupted_result(_name(args), signum)
    if requested_format(args, os.environ) != "human":
        sys.stderr.write(f"fa-doctor: {result.error}\n")
    return _error_out(args, result)


def _error_out(args: Sequence[str], result: Result) -> int:
    from fa_doctor.cli.parse import requested_format

    fmt = requested_format(args, os.environ)
    stream = sys.stderr if (fmt == "human" or (args and args[0] == "exec")) else sys.stdout
    try:
        return deliver(result, Outputs(fmt), stream)
    except BrokenPipeError:
        return result.exit_code
    except Exception as exc:  # the last line of defence: a plain message, never a traceback
        with contextlib.suppress(Exception):
            sys.stderr.write(f"fa-doctor: {result.error} (and the report failed: {type(exc).__name__}: {exc})\n")
        return result.exit_code
