"""The outermost guard: run the typer app, and turn whatever goes wrong (misuse, a signal, a closed
stream, a bug) into an exit code and, in a machine format, one document. Never a traceback."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from fa_doctor.cli.deliver import Outputs, _silence, deliver
from fa_doctor.commands.failed import error_result, interrupted_result
from fa_doctor.model.result import EXIT_ERROR, Result
from fa_doctor.process import interrupt


def _name(args: Sequence[str]) -> str:
    return args[0] if args and not args[0].startswith("-") else "fa-doctor"


def _commands() -> Any:
    import typer.main

    from fa_doctor.cli.app import app

    return typer.main.get_command(app)


def dispatch(args: list[str]) -> int:
    from fa_doctor.cli.app import app, app_for

    chosen = app
    complete, cword = os.environ.get("_FA_DOCTOR_COMPLETE"), os.environ.get("COMP_CWORD", "")
    if complete:  # a completion script asks: typer's protocol, click's answers
        if complete.startswith("complete_bash") and not (cword.isdecimal() and cword.isascii()):
            sys.stderr.write("fa-doctor: completion: COMP_CWORD is not a word index; nothing to complete\n")
            return 1
        from typer.completion import completion_init  # type: ignore[attr-defined]

        completion_init()
    elif not args:  # `fa-doctor` alone: what it can do, as misuse
        group = _commands()
        sys.stderr.write(group.get_help(group.make_context("fa-doctor", [], resilient_parsing=True)) + "\n")
        return EXIT_ERROR
    else:
        chosen = app_for(args[0])
    code = chosen(args=args, prog_name="fa-doctor", standalone_mode=False)
    return code if isinstance(code, int) else 0


def requested_format(args: Sequence[str]) -> str:
    """The format asked for, read by click itself without acting on errors (values skipped, nothing after `--`
    or exec's COMMAND): a usage error still answers in that format."""
    from fa_doctor.render.base import FORMATS

    try:
        command = _commands().commands.get(args[0]) if args else None
        if command is None:
            return "human"
        ctx = command.make_context(args[0], list(args[1:]), resilient_parsing=True, ignore_unknown_options=True)
    except Exception:  # whatever went wrong is reported, in the plain format
        return "human"
    fmt = "json" if ctx.params.get("as_json") else ctx.params.get("fmt")
    return fmt if fmt in FORMATS else "human"


def main_guard(args: list[str]) -> int:
    from fa_doctor.process import proc
    from fa_doctor.process.interrupt import Interrupted, handled

    if sys.stderr is None:  # a closed stderr or stdout (`2>&-`, `>&-`) becomes /dev/null
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    stdout_lost = sys.stdout is None
    if stdout_lost:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    try:
        with handled():
            try:
                code = dispatch(args)
            except Interrupted as exc:
                code = emit_interrupted(args, exc.signum)
            except BrokenPipeError:
                _silence(sys.stdout)
                code = EXIT_ERROR
            except Exception as exc:
                code = _failed(args, exc)
    finally:
        interrupt.finishing()  # decided: from here a signal only ends the process (128+N), without a traceback
        interrupt.checkpoint("cleanup")
        proc.terminate_all()  # the early target probe of a usage error, anything a crash left behind
    if stdout_lost and code in (0, 1):
        sys.stderr.write("fa-doctor: stdout is closed: the report could not be written\n")
        return EXIT_ERROR
    return code


def _failed(args: list[str], exc: Exception) -> int:
    signalled = interrupt.within(exc)
    if signalled is not None:  # a signal raised inside what wrapped it
        return emit_interrupted(args, signalled.signum)
    cli = sys.modules.get("fa_doctor.cli.app")
    if cli is not None and isinstance(exc, cli.UsageError):
        return _misuse(args, exc)
    if type(exc).__name__ == "Abort":  # click's word for an interrupt it caught itself (EOF at a prompt)
        return _error_out(args, interrupted_result(_name(args), 2))
    if os.environ.get("FA_DOCTOR_DEBUG"):
        raise exc
    return _error_out(args, error_result(_name(args), f"internal error: {type(exc).__name__}: {exc}"))


def _message(exc: Any) -> str:
    """click's message, naming the FA_DOCTOR_* variable a bad value came from (click 8.2 on says it itself)."""
    message, ctx, param = exc.format_message(), exc.ctx, getattr(exc, "param", None)
    envvar = getattr(param, "envvar", None)
    if ctx is not None and param is not None and isinstance(envvar, str) and envvar not in message:
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name == "ENVIRONMENT":
            message += f" (from {envvar})"
    return str(message)


def _misuse(args: Sequence[str], exc: Any) -> int:
    message, fmt = _message(exc), requested_format(args)
    if fmt != "human":
        return _error_out(args, error_result(_name(args), message), fmt)
    from fa_doctor.render.escape import escape

    # The message quotes the command line, which may carry anything (a newline and `::error::` into a CI log):
    # escaped onto one line, as every renderer does.
    ctx, name = exc.ctx, _name(args)
    where = ctx.command_path if ctx else "fa-doctor" if name == "fa-doctor" else f"fa-doctor {name}"
    usage = ctx.get_usage() if ctx else f"Usage: {where} [OPTIONS] ..."
    sys.stderr.write(f"{usage}\nTry '{where} -h' for help.\n\nError: {escape(message)}\n")
    return EXIT_ERROR


def emit_interrupted(args: Sequence[str], signum: int) -> int:
    from fa_doctor.process import proc

    proc.terminate_all()
    result, fmt = interrupted_result(_name(args), signum), requested_format(args)
    if fmt != "human":
        sys.stderr.write(f"fa-doctor: {result.error}\n")
    return _error_out(args, result, fmt)


def _error_out(args: Sequence[str], result: Result, fmt: str | None = None) -> int:
    fmt = fmt or requested_format(args)
    stream = sys.stderr if (fmt == "human" or (args and args[0] == "exec")) else sys.stdout
    try:
        return deliver(result, Outputs(fmt), stream)
    except BrokenPipeError:
        return result.exit_code
    except Exception as exc:  # the last line of defence: a plain message, never a traceback
        with contextlib.suppress(Exception):
            sys.stderr.write(f"fa-doctor: {result.error} (and the report failed: {type(exc).__name__}: {exc})\n")
        return result.exit_code
