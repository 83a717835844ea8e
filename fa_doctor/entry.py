"""Program entry: start the target probe before the CLI framework loads, then hand over to the CLI.

The probe's child interpreter needs 20-50 ms to start (more with thousands of installed distributions);
importing typer and the checks takes about as long. Started first, the child's start-up is hidden.
"""

from __future__ import annotations

import sys


def _early_python(args: list[str]) -> str | None:
    """The interpreter `check` will inspect, read from argv the simple way (the CLI re-checks it)."""
    if not args or args[0] != "check" or "--help" in args:
        return None
    for i, arg in enumerate(args):
        if arg == "--python" and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith("--python="):
            return arg.split("=", 1)[1]
    return sys.executable


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    python = _early_python(args)
    early = None
    if python:
        from fa_doctor.probes.target import TargetProbe

        early = TargetProbe(python)
    from fa_doctor.cli import main as cli_main

    cli_main(args, early=early)
