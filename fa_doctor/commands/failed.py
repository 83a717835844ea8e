"""The result of a command that could not run (misuse, an internal error, a signal): one `Result` with the error,
and for a check or exec the host it ran on, so a fleet merge still lists that node as failing."""

from __future__ import annotations

import signal

from fa_doctor.model.result import CheckPayload, Result


def _where(command: str) -> CheckPayload | None:
    if command not in ("check", "exec"):
        return None
    from fa_doctor.probes.environment import probe_host as probe

    return CheckPayload(host=probe())


def error_result(command: str, message: str) -> Result:
    return Result(command=command, error=message, payload=_where(command))


def interrupted_result(command: str, signum: int) -> Result:
    error = f"interrupted by {signal.Signals(signum).name}"
    return Result(command=command, error=error, signal=signum, payload=_where(command))
