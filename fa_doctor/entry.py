"""Program entry: take the signals first (this module imports nothing heavy), then hand over to the CLI; a signal
during the imports ends the run as one during the check would (docs/internals.md, The command line)."""

from __future__ import annotations

import gc
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
    except (interrupt.Interrupted, RuntimeError) as exc:  # before the CLI's own guard took over, or after it let go
        # (a signal during the guard's imports, with a check's early probe already running: Python 3.11 wraps one
        # raised inside a dataclass field's __set_name__ in a RuntimeError)
        signalled = interrupt.within(exc)
        if signalled is None:
            raise
        from fa_doctor.cli.guard import emit_interrupted

        sys.exit(emit_interrupted(args, signalled.signum))
    finally:
        if argv is None:  # the program itself, about to exit: its last collection would walk every object it
            gc.freeze()  # ever loaded (typer's, pydantic's) for nothing, 30 ms; atexit and flushes still run
