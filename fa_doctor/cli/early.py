"""The target and GPU probes, started as soon as their question is known. A plain `check`'s are started from the
raw command line, beside typer's imports (half of the start-up; a misuse found then ends them with the run), and
taken only where the parsed options ask exactly the same; every other command's start once its options are
parsed, before its modules load."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

_guessed: Any = None  # the TargetProbe started from the raw command line, until the parsed options take or end it


def _python(args: Sequence[str]) -> str | None:
    """--python's value as click reads it (the last one given, else FA_DOCTOR_PYTHON); a misread costs one probe."""
    value = os.environ.get("FA_DOCTOR_PYTHON") or None
    for i, arg in enumerate(args):
        if arg == "--":
            break
        if arg == "--python" and i + 1 < len(args):
            value = args[i + 1]
        elif arg.startswith("--python="):
            value = arg.partition("=")[2]
    return value


def guess(args: Sequence[str]) -> None:
    """Start a plain `check`'s probes from its command line, beside typer's imports."""
    global _guessed
    if args[:1] != ["check"] or os.environ.get("_FA_DOCTOR_COMPLETE") or {"-h", "--help"} & set(args):
        return
    from fa_doctor.probes.gpu import start_early
    from fa_doctor.probes.target import TargetProbe, choose

    try:
        python = choose(_python(args[1:]), os.environ).python
        _guessed = TargetProbe(python)
        start_early(python, os.environ)
    except Exception:  # a guess that fails costs nothing: the parsed options start the probes
        return


def drop() -> None:
    global _guessed
    if _guessed is not None:
        _guessed.close()
    _guessed = None
    if "fa_doctor.probes.gpu" in sys.modules:  # not imported for this: `--version` stays light
        from fa_doctor.probes import gpu

        gpu.early = None  # the GPU probe of a run that ended unasked too


def probes(check: Any) -> Any:
    """The target probe for these CheckOptions (the guess, where it asked the same) and the GPU probe beside it,
    both running while the command's modules load."""
    global _guessed
    from fa_doctor.probes.gpu import start_early
    from fa_doctor.probes.target import TargetProbe
    from fa_doctor.process import interrupt

    python = check.python or sys.executable
    probe, _guessed = _guessed, None
    if probe is None or not probe.answers(python, check.env, check.cwd, check.python_flags):
        if probe is not None:
            probe.close()
        probe = TargetProbe(python, env=check.env, cwd=check.cwd, flags=check.python_flags)  # a signal ends it too
    start_early(python, os.environ if check.env is None else check.env)  # one that asked the same runs on
    interrupt.checkpoint("probe")
    return probe
