"""The command line, on typer: the commands and their options (`app`, `options`), shell completion
(`completion`), delivery of each command's `Result` in the chosen format (`deliver`), all under one guard
(`guard`) that turns misuse, signals and bugs into an exit code and, in a machine format, one document."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    """No traceback reaches the user, and a JSON format always gets one JSON document."""
    from fa_doctor.cli import early

    args = sys.argv[1:] if argv is None else list(argv)
    early.guess(args)  # a plain check's probes start now, beside the imports that follow
    try:
        from fa_doctor.cli.guard import main_guard

        code = main_guard(args)
    finally:
        early.drop()  # what no command took (a misuse, --version) ends with this run
    sys.exit(code)
