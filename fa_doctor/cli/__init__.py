"""The command line: one table of commands and options (`spec`), one parser (`parse`), `--help` and completion
written from the table, the glue from a parsed line to a command (`commands`), and delivery under one guard
(`deliver`, `guard`). No logic of its own: each command returns a `Result`, rendered in the chosen format; its
exit code is the process's."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None, early: object = None, parsed: object = None) -> None:
    """No traceback reaches the user, and a JSON format always gets one JSON document. `early`: a TargetProbe
    already started by fa_doctor.entry; `parsed`: the command line it already parsed."""
    from fa_doctor.cli.guard import main_guard

    args = sys.argv[1:] if argv is None else list(argv)
    sys.exit(main_guard(args, early, parsed))


def interrupted(args: list[str], signum: int) -> None:
    """A signal that came before the command ran: the same result and exit code as one that came during it."""
    from fa_doctor.cli.guard import emit_interrupted

    sys.exit(emit_interrupted(args, signum))


__all__ = ["interrupted", "main"]
