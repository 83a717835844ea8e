"""Program entry: take the signals first, start the target probe before the CLI framework loads, hand over to the CLI.

The probe's child interpreter needs 20-50 ms to start (more with thousands of installed distributions);
importing typer and the checks takes about as long. Started first, the child's start-up is hidden. Every
command that inspects a target gets that head start; the CLI re-reads the options and drops the early probe
when it guessed another interpreter.

Signals: `interrupt.defer()` is the first thing `main` does (this module imports nothing heavy), so a signal
during the imports is recorded, then raised under the guard below: same report, same exit code 128+N as one that
comes during the check, never a traceback.
"""

from __future__ import annotations

import os
import sys

# Commands that inspect a target interpreter.
_TARGET_COMMANDS = ("check", "exec", "fix")


def _early_python(args: list[str]) -> str | None:
    """The interpreter the command will inspect, read from argv the simple way, before `--`."""
    if not args or args[0] not in _TARGET_COMMANDS or "--help" in args or "-h" in args:
        return None
    head = args[: args.index("--")] if "--" in args else args
    for i, arg in enumerate(head):
        if arg == "--python" and i + 1 < len(head):
            return head[i + 1] or None
        if arg.startswith("--python="):
            return arg.split("=", 1)[1] or None
    if os.environ.get("FA_DOCTOR_PYTHON"):  # --python's default, as the CLI reads it
        return os.environ["FA_DOCTOR_PYTHON"]
    if args[0] == "exec":
        if "--" not in args:
            return None  # the command's own interpreter may be meant; the CLI finds out
        from fa_doctor.commands.launch import parse_launch

        return parse_launch(args[args.index("--") + 1 :], os.environ).python  # None: the CLI says why
    return sys.executable


def main(argv: list[str] | None = None) -> None:
    from fa_doctor import interrupt

    interrupt.defer()  # before anything can take time: a signal is recorded, raised by arm() below
    interrupt.checkpoint("entry")
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        interrupt.arm()
        python = _early_python(args)
        early = None
        if python:
            from fa_doctor.probes.target import TargetProbe

            early = TargetProbe(python)  # a signal from here on ends its child too
            interrupt.checkpoint("probe")
        from fa_doctor.cli import main as cli_main

        interrupt.checkpoint("cli")
        cli_main(args, early=early)
    except interrupt.Interrupted as exc:  # before the CLI's own guard took over, or after it let go
        from fa_doctor.cli import interrupted

        interrupted(args, exc.signum)
