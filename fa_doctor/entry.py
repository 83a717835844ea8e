"""Program entry: take the signals first, then hand over to the CLI.

Signals: `interrupt.defer()` is the first thing `main` does (this module imports nothing heavy), so a signal
during the imports is recorded, then raised under the guard below: same report, same exit code 128+N as one that
comes during the check, never a traceback. The target and GPU probes start as soon as the command line is parsed,
before the command's modules load (`fa_doctor.cli.app`).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    from fa_doctor.process import interrupt

    interrupt.defer()  # before anything can take time: a signal is recorded, raised by arm() below
    interrupt.checkpoint("entry")
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        interrupt.arm()
        from fa_doctor.cli import main as cli_main

        interrupt.checkpoint("cli")
        cli_main(args)
    except interrupt.Interrupted as exc:  # before the CLI's own guard took over, or after it let go
        from fa_doctor.cli import interrupted

        interrupted(args, exc.signum)
