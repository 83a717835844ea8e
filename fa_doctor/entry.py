"""Program entry: take the signals first, parse the command line, start the target probe before the commands
load, hand over to the CLI.

The probe's child interpreter needs 20-50 ms to start (more with thousands of installed distributions);
importing the checks takes about as long. Started first, the child's start-up is hidden. The line is parsed
once, by the one parser (`fa_doctor.cli.parse`), and the CLI gets the result; a line that does not parse starts
no probe and is reported by the CLI's guard.

Signals: `interrupt.defer()` is the first thing `main` does (this module imports nothing heavy), so a signal
during the imports is recorded, then raised under the guard below: same report, same exit code 128+N as one that
comes during the check, never a traceback.
"""

from __future__ import annotations

import os
import sys


def _early_python(args: list[str], parsed: object = None) -> str | None:
    """The interpreter the command will inspect, as the command itself will read it; None when it inspects none
    (or the line is misuse, which the CLI reports)."""
    return _early_target(args, parsed)[0]


def _early_target(args: list[str], parsed: object = None) -> tuple[str | None, dict[str, str]]:
    """That interpreter, and the environment the check will see (exec: COMMAND's, as `env` in it sets it)."""
    from fa_doctor.cli.parse import UsageError, parse
    from fa_doctor.cli.spec import TARGET_COMMANDS

    env = dict(os.environ)
    try:
        line = parsed if parsed is not None else parse(args, os.environ)
    except UsageError:
        return None, env
    if line.help or line.command.name not in TARGET_COMMANDS:  # type: ignore[attr-defined]
        return None, env
    python = line.values.get("python")  # type: ignore[attr-defined]
    if line.command.name == "exec":  # type: ignore[attr-defined]
        from fa_doctor.commands.launch import parse_launch

        launch = parse_launch(line.values["command"], os.environ)  # type: ignore[attr-defined]
        return (str(python) if python else launch.python), dict(launch.env)  # python None: the CLI says why
    return (str(python) if python else sys.executable), env


def main(argv: list[str] | None = None) -> None:
    from fa_doctor import interrupt

    interrupt.defer()  # before anything can take time: a signal is recorded, raised by arm() below
    interrupt.checkpoint("entry")
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        interrupt.arm()
        parsed = None
        if args and "_FA_DOCTOR_COMPLETE" not in os.environ:
            from fa_doctor.cli.parse import UsageError, parse

            try:
                parsed = parse(args, os.environ)
            except UsageError:
                parsed = None  # the CLI parses again and reports it, in the format asked for
        python, env = _early_target(args, parsed) if parsed is not None else (None, {})
        early = None
        if python:
            from fa_doctor.probes.gpu import start_early
            from fa_doctor.probes.target import TargetProbe

            early = TargetProbe(python)  # a signal from here on ends its child too
            start_early(python, env)  # NVML's start-up beside the imports below
            interrupt.checkpoint("probe")
        from fa_doctor.cli import main as cli_main

        interrupt.checkpoint("cli")
        cli_main(args, early=early, parsed=parsed)
    except interrupt.Interrupted as exc:  # before the CLI's own guard took over, or after it let go
        from fa_doctor.cli import interrupted

        interrupted(args, exc.signum)
