"""`fa-doctor exec [check options] -- COMMAND ...`: check, then become COMMAND (same PID, its signals, its exit).

The check reads what COMMAND will run: its interpreter (unless `--python` says otherwise) and, for an SGLang
launch, its `--attention-backend`/`--prefill-attention-backend`/`--decode-attention-backend`. A server needs a
GPU, so a missing one fails unless `--allow-no-gpu`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fa_doctor.commands.launch import Launch, parse_launch
from fa_doctor.commands.options import CheckOptions
from fa_doctor.probes.environment import OVERRIDE
from fa_doctor.result import Result

if TYPE_CHECKING:
    from fa_doctor.probes.target import TargetProbe

EXIT_NOT_FOUND = 127  # as a shell reports a command it cannot find
EXIT_NOT_EXECUTABLE = 126


@dataclass(frozen=True)
class ExecOptions:
    check: CheckOptions
    command: tuple[str, ...]
    warn_only: bool = False
    allow_no_gpu: bool = False
    unset_override: bool = False


def server_env(options: ExecOptions, env: Mapping[str, str] | None = None) -> dict[str, str]:
    out = dict(os.environ if env is None else env)
    if options.unset_override:
        out.pop(OVERRIDE, None)
    return out


def plan(options: ExecOptions, env: Mapping[str, str] | None = None) -> tuple[CheckOptions, Launch]:
    """The check that fits COMMAND: its interpreter, its backend flags, the environment it will get."""
    child_env = server_env(options, env)
    launch = parse_launch(options.command, child_env)
    check = options.check
    python = check.python or launch.python
    flags = launch.flags if launch.sglang else check.flags
    return (
        replace(
            check,
            python=python,
            flags=flags,
            require_gpu=check.require_gpu or not options.allow_no_gpu,
            env=child_env,
        ),
        launch,
    )


def run(
    options: ExecOptions,
    progress: Callable[[str], None] | None = None,
    pending: TargetProbe | None = None,
    planned: CheckOptions | None = None,
) -> Result:
    """`planned`: plan(options)'s check, when the caller made it already (it read COMMAND once). `pending` must
    probe that check's interpreter (the CLI's delivery drops an early probe that guessed another)."""
    from fa_doctor.commands import check

    check_options = planned or plan(options)[0]
    return replace(check.run(check_options, progress, pending), command="exec")


def may_start(result: Result, options: ExecOptions) -> bool:
    return result.exit_code == 0 or (options.warn_only and result.signal is None)


def become(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Replace this process with COMMAND. Returns an exit code only when it cannot be started."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], list(command), dict(env))
    except FileNotFoundError:
        sys.stderr.write(f"fa-doctor exec: {command[0]!r}: command not found\n")
        return EXIT_NOT_FOUND
    except PermissionError:
        sys.stderr.write(f"fa-doctor exec: {command[0]!r}: not executable\n")
        return EXIT_NOT_EXECUTABLE
    except OSError as exc:
        sys.stderr.write(f"fa-doctor exec: {command[0]!r}: cannot start it ({exc.strerror or exc})\n")
        return EXIT_NOT_EXECUTABLE
