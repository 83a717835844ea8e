"""`fa-doctor exec [check options] -- COMMAND ...`: check what COMMAND will run (`commands/launch.py`), then become
COMMAND (same PID, its signals, its exit). docs/internals.md tells how the interpreter and environment are chosen."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from fa_doctor.commands.launch import Launch, parse_launch, shebang
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import Result
from fa_doctor.probes.environment import OVERRIDE

if TYPE_CHECKING:
    from fa_doctor.probes.target import TargetProbe

EXIT_NOT_FOUND = 127  # as a shell reports a command it cannot find
EXIT_NOT_EXECUTABLE = 126  # and one it cannot run (a missing #! interpreter: "bad interpreter")


@dataclass(frozen=True, slots=True)
class ExecOptions:
    check: CheckOptions
    command: tuple[str, ...]
    warn_only: bool = False
    allow_no_gpu: bool = False
    unset_override: bool = False


def server_env(options: ExecOptions, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """What fa-doctor hands to COMMAND (before any `env` in COMMAND changes it)."""
    out = dict(os.environ if env is None else env)
    if options.unset_override:
        out.pop(OVERRIDE, None)
    return out


def fallback_python(launch: Launch) -> str:
    """The Python to inspect when COMMAND's cannot be told: the server's `python3` (or `python`), else ours."""
    path = launch.env.get("PATH") or os.defpath
    return shutil.which("python3", path=path) or shutil.which("python", path=path) or sys.executable


def plan(options: ExecOptions, env: Mapping[str, str] | None = None) -> tuple[CheckOptions, Launch]:
    """The check that fits COMMAND: its interpreter, its backend flags, the environment it will get."""
    launch = parse_launch(options.command, server_env(options, env))
    check = options.check
    # COMMAND's own interpreter is what will run: an explicit --python (or FA_DOCTOR_PYTHON) names it only when
    # COMMAND's cannot be told; where the two disagree, COMMAND's is judged and the report says so (run()).
    python = launch.python or check.python or fallback_python(launch)
    why = "COMMAND" if launch.python else "--python" if check.python else "python3 on the server's PATH"
    checked = replace(
        check,
        python=python,
        python_why=why,
        flags=launch.flags if launch.sglang else check.flags,
        require_gpu=check.require_gpu or not options.allow_no_gpu,
        env=dict(launch.env),
        python_flags=launch.python_flags if python == launch.python else (),
        cwd=launch.cwd,
    )
    return checked, launch


def unknown_python(launch: Launch, checked: str) -> Finding:
    return Finding(
        "exec.python_unknown",
        Severity.WARN,
        "Which Python COMMAND runs could not be told; the check inspected another one",
        f"{launch.problem}. Checked instead: {checked} (the first python3 on the server's PATH, else fa-doctor's "
        "own). The server may run a different environment.",
        {"command": list(launch.argv), "why": launch.problem, "checked": checked},
        (
            Remedy(
                "Name the server's interpreter: fa-doctor exec --python /path/to/venv/bin/python -- COMMAND ...",
                (f"fa-doctor exec --python /path/to/venv/bin/python -- {launch.argv[0] if launch.argv else ''} ...",),
            ),
        ),
    )


def run(
    options: ExecOptions,
    progress: Callable[[str], None] | None = None,
    pending: TargetProbe | None = None,
    planned: tuple[CheckOptions, Launch] | None = None,
) -> Result:
    """`planned`: plan(options), when the caller made it already (it read COMMAND once). `pending` must probe that
    check's interpreter (the CLI's delivery drops an early probe that guessed another)."""
    from fa_doctor.commands import check

    check_options, launch = planned or plan(options)
    result = replace(check.run(check_options, progress, pending), command="exec")
    if result.error:
        return result
    given = options.check.python  # a venv's python links to a shared binary: the path tells the environment
    if launch.python and given and os.path.abspath(given) != os.path.abspath(launch.python):
        return replace(result, findings=(python_differs(given, launch), *result.findings))
    if given or launch.python:
        return result
    return replace(result, findings=(unknown_python(launch, check_options.python or sys.executable), *result.findings))


def python_differs(given: str, launch: Launch) -> Finding:
    return Finding(
        "exec.python_differs",
        Severity.WARN,
        "--python names another interpreter than COMMAND runs; COMMAND's was judged",
        f"--python (or FA_DOCTOR_PYTHON) is {given}, but COMMAND runs {launch.python}: the check judged what will "
        "run. Drop --python, or change COMMAND, so the two agree.",
        {"python_option": given, "command_python": launch.python, "command": list(launch.argv)},
        (Remedy("Let exec read the interpreter from COMMAND: unset FA_DOCTOR_PYTHON and drop --python."),),
    )


def may_start(result: Result, options: ExecOptions, delivered: int = 0) -> bool:
    """`delivered`: the delivery's exit code (2 when a report file could not be written: not started either)."""
    if delivered == 2 and result.exit_code != 2:
        return False
    return result.exit_code == 0 or (options.warn_only and result.signal is None)


def _cannot_start(command: Sequence[str], env: Mapping[str, str], exc: OSError) -> tuple[str, int]:
    """What a shell would say: not found, a missing #! interpreter ("bad interpreter"), not executable."""
    name = command[0]
    where = name if "/" in name else shutil.which(name, path=env.get("PATH") or os.defpath)
    found = shebang(where) if isinstance(exc, FileNotFoundError) and where and os.path.isfile(where) else None
    if found and not os.path.exists(found[0]):
        return f"{name!r}: bad interpreter {found[0]!r}: no such file", EXIT_NOT_EXECUTABLE
    if isinstance(exc, FileNotFoundError):
        return f"{name!r}: command not found", EXIT_NOT_FOUND
    if isinstance(exc, PermissionError):
        return f"{name!r}: not executable", EXIT_NOT_EXECUTABLE
    return f"{name!r}: cannot start it ({exc.strerror or exc})", EXIT_NOT_EXECUTABLE


def become(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Replace this process with COMMAND, with the signal dispositions a shell would give it. Returns an exit
    code only when it cannot be started."""
    from fa_doctor.process import interrupt
    from fa_doctor.render.escape import escape

    sys.stdout.flush()
    sys.stderr.flush()
    interrupt.restore_for_exec()
    interrupt.checkpoint("exec")
    try:
        os.execvpe(command[0], list(command), dict(env))
    except (OSError, ValueError) as exc:
        error = exc if isinstance(exc, OSError) else OSError(str(exc))
        message, code = _cannot_start(command, env, error)
        sys.stderr.write(f"fa-doctor exec: {escape(message)}\n")
        return code
