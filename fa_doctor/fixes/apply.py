"""`fa-doctor fix --apply`: run planned actions in the target interpreter, one at a time, stopping at a failure.

- pip runs as `<target python> -m pip ...` (the interpreter given to apply(), whatever the plan recorded), never
  through a shell; the server's pins go to pip as a constraints file.
- Before an install, the same command runs with `--dry-run` and short network timeouts: an index that cannot
  be reached, or a resolution that cannot succeed, stops the run before anything changed. pip itself changes
  nothing before "Installing collected packages", which is how a real failure is judged afterwards.
- A move is `os.rename` inside one filesystem, refused when either end resolves outside the action's root or
  the backup name exists; nothing is ever deleted.
- Setting or unsetting a variable cannot be done for the calling shell: those actions come back as `manual`.
Every subprocess is bounded (fa_doctor.proc) and its output kept to a tail.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fa_doctor import proc
from fa_doctor.actions import (
    CONSTRAINTS_STDIN,
    Action,
    EditFile,
    MovePath,
    PipInstall,
    PipUninstall,
    RunCommand,
    SetEnv,
    UnsetEnv,
    describe,
)
from fa_doctor.fixes import envfile
from fa_doctor.probes.environment import OVERRIDE

_TAIL = 4000
_PREFLIGHT_LIMIT = 180.0
# pip's own words when the index (or a proxy) cannot be reached; any one of them settles it.
_NETWORK = re.compile(
    r"Failed to establish a new connection|NewConnectionError|Temporary failure in name resolution|"
    r"Name or service not known|Network is unreachable|Connection refused|ConnectTimeoutError|ReadTimeoutError|"
    r"Max retries exceeded|Could not fetch URL|ProxyError|SSLError|Connection (?:aborted|reset)|"
    r"No route to host|Read timed out|Connection timed out",
    re.IGNORECASE,
)
_TOUCHED = ("Installing collected packages", "Attempting uninstall", "Successfully uninstalled")
_QUIET = {"PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@dataclass(frozen=True)
class Step:
    """One action and what became of it. `output` is the tail of what the command printed."""

    action: Action
    description: str
    ok: bool
    message: str
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0
    left_unchanged: bool = False  # a failed step: it changed nothing (pip stopped before installing, ...)


@dataclass(frozen=True)
class ApplyResult:
    ran: tuple[Step, ...]  # done, in order
    failed: Step | None  # the step that stopped the run
    not_run: tuple[Action, ...]  # after the failure, untouched
    manual: tuple[Action, ...]  # SetEnv / UnsetEnv: for the user's shell (render them with actions.render)

    @property
    def ok(self) -> bool:
        return self.failed is None

    @property
    def unchanged(self) -> bool:
        """Nothing in the environment changed: no step ran, and a failed one changed nothing either."""
        return not self.ran and (self.failed is None or self.failed.left_unchanged)


class _Failed(Exception):
    def __init__(self, message: str, *, unchanged: bool, returncode: int | None = None, output: str = "") -> None:
        super().__init__(message)
        self.unchanged = unchanged
        self.returncode = returncode
        self.output = output


def _tail(done: proc.Completed) -> str:
    return (done.out() + done.err())[-_TAIL:]


def _run(argv: Sequence[str], timeout: float, env: dict[str, str] | None = None) -> proc.Completed:
    try:
        return proc.run(argv, timeout, env={**os.environ, **_QUIET, **(env or {})}, max_output=1 << 16)
    except (OSError, ValueError) as e:
        raise _Failed(f"cannot start {argv[0]}: {e}; nothing was changed", unchanged=True) from None


def _pip_argv(python: str, argv: tuple[str, ...], constraints_file: str | None) -> list[str]:
    out = [python, *argv[1:]]  # the target interpreter, whatever the plan recorded
    if constraints_file is not None:
        # `-c /dev/stdin` sits right before the requirements (PipInstall.argv); an option's value never moves it
        i = len(out) - 1 - out[::-1].index("-c")
        if out[i + 1] != CONSTRAINTS_STDIN:
            raise _Failed("the planned pip command has no constraints slot; nothing was changed", unchanged=True)
        out[i + 1] = constraints_file
    return out


def _pip_version(python: str, timeout: float) -> tuple[int, ...]:
    done = _run([python, "-m", "pip", "--version"], min(timeout, 60.0))
    m = re.match(r"pip (\d+)\.(\d+)", done.out())
    if done.returncode != 0 or m is None:
        raise _Failed(
            f"pip does not run in {python} ({_tail(done).strip()[-300:] or 'no output'}); nothing was changed",
            unchanged=True,
            returncode=done.returncode,
        )
    return int(m.group(1)), int(m.group(2))


def _install(action: PipInstall, python: str, timeout: float) -> proc.Completed:
    with tempfile.TemporaryDirectory(prefix="fa-doctor-fix-") as tmp:
        constraints = None
        if action.constraints:
            constraints = os.path.join(tmp, "constraints.txt")
            with open(constraints, "w", encoding="utf-8") as fh:
                fh.write("".join(c + "\n" for c in action.constraints))
        argv = _pip_argv(python, action.argv, constraints)
        env = dict(action.env)
        if _pip_version(python, timeout) >= (22, 2):
            # `install` is argv[3]: the dry run goes right after it, with short network timeouts.
            dry = [*argv[:4], "--dry-run", "--timeout", "15", "--retries", "1", *argv[4:]]
            done = _run(dry, min(timeout, _PREFLIGHT_LIMIT), env)
            if done.timed_out:
                raise _Failed(
                    f"pip's dry run did not finish in {min(timeout, _PREFLIGHT_LIMIT):.0f} s (is the package index "
                    "reachable?); nothing was changed",
                    unchanged=True,
                    output=_tail(done),
                )
            if done.returncode != 0:
                text = _tail(done)
                why = (
                    "the package index cannot be reached"
                    if _NETWORK.search(text)
                    else "pip cannot resolve this install (dry run)"
                )
                raise _Failed(f"{why}; nothing was changed", unchanged=True, returncode=done.returncode, output=text)
        done = _run(argv, timeout, env)
    text = _tail(done)
    if done.timed_out or done.returncode != 0:
        touched = any(marker in done.out() + done.err() for marker in _TOUCHED) or done.truncated
        what = f"timed out after {timeout:.0f} s" if done.timed_out else f"failed (exit {done.returncode})"
        if _NETWORK.search(text) and not touched:
            what += ": the package index cannot be reached"
        state = "the environment may be partly changed" if touched else "nothing was changed"
        raise _Failed(f"pip {what}; {state}", unchanged=not touched, returncode=done.returncode, output=text)
    return done


def _inside(path: str, root: str) -> bool:
    return path != root and path.startswith(root.rstrip("/") + "/")


def _move(action: MovePath) -> str:
    root = os.path.realpath(action.root)
    # The names themselves are not resolved (a symlink is moved as a link), their folders are.
    src = os.path.join(os.path.realpath(os.path.dirname(action.path)), os.path.basename(action.path))
    dst = os.path.join(os.path.realpath(os.path.dirname(action.backup)), os.path.basename(action.backup))
    if not (_inside(src, root) and _inside(dst, root)):
        raise _Failed(f"{action.path} or its backup resolves outside {action.root}; not moved", unchanged=True)
    if not os.path.lexists(src):
        raise _Failed(f"{action.path} is gone already; nothing to move", unchanged=True)
    if os.path.lexists(dst):
        raise _Failed(f"{action.backup} exists; not moved (nothing is overwritten)", unchanged=True)
    try:
        os.rename(src, dst)
    except OSError as e:
        raise _Failed(f"cannot move {action.path}: {e.strerror or e}; not moved", unchanged=True) from None
    return f"moved {action.path} to {action.backup}"


def _edit(action: EditFile) -> str:
    if action.variable != OVERRIDE:
        raise _Failed(f"fa-doctor edits only {OVERRIDE} in files, not {action.variable}", unchanged=True)
    if action.value not in (None, "2", "3", "4"):
        raise _Failed(f"{OVERRIDE} can be set to 2, 3 or 4 only, not {action.value!r}", unchanged=True)
    value = None if action.value is None else int(action.value)
    result = envfile.edit(action.path, set_value=value, dry_run=False)
    if result.error:
        raise _Failed(result.error, unchanged=True)
    return f"edited {action.path} (backup {result.backup})" if result.changed else f"{action.path}: nothing to change"


def _step(action: Action, python: str, timeout: float) -> Step:
    text = describe(action)
    if isinstance(action, PipInstall):
        done = _install(action, python, timeout)
        return Step(action, text, True, "installed", done.returncode, _tail(done), done.seconds)
    if isinstance(action, (PipUninstall, RunCommand)):
        argv = _pip_argv(python, action.argv, None) if isinstance(action, PipUninstall) else list(action.argv)
        done = _run(argv, timeout)
        if done.timed_out or done.returncode != 0:
            what = f"timed out after {timeout:.0f} s" if done.timed_out else f"exited {done.returncode}"
            # pip uninstall says what it removed; any other command may have changed anything
            untouched = isinstance(action, PipUninstall) and not any(m in done.out() for m in _TOUCHED)
            raise _Failed(f"{argv[0]} {what}", unchanged=untouched, returncode=done.returncode, output=_tail(done))
        return Step(action, text, True, "done", done.returncode, _tail(done), done.seconds)
    if isinstance(action, MovePath):
        return Step(action, text, True, _move(action))
    if isinstance(action, EditFile):
        return Step(action, text, True, _edit(action))
    raise TypeError(f"not an action fa-doctor can run: {action!r}")


def apply(
    actions: Sequence[Action],
    *,
    python: str,
    timeout: float,
    progress: Callable[[str], None] | None = None,
) -> ApplyResult:
    """Run `actions` in order in the target interpreter `python`; stop at the first failure.

    `timeout` bounds each command (the dry run before an install gets at most 180 s of it). `progress` gets
    one line before each step and one after. Never raises for a failing step: it comes back in `failed`.
    """
    ran: list[Step] = []
    runnable = [a for a in actions if not isinstance(a, (SetEnv, UnsetEnv))]
    manual = [a for a in actions if isinstance(a, (SetEnv, UnsetEnv))]
    for index, action in enumerate(runnable):
        label = f"[{index + 1}/{len(runnable)}] {describe(action)}"
        if progress:
            progress(label)
        try:
            step = _step(action, python, timeout)
        except _Failed as e:
            failed = Step(action, describe(action), False, str(e), e.returncode, e.output, left_unchanged=e.unchanged)
            if progress:
                progress(f"{label}: failed: {e}")
            return ApplyResult(tuple(ran), failed, tuple(runnable[index + 1 :]), tuple(manual))
        ran.append(step)
        if progress:
            progress(f"{label}: {step.message}")
    return ApplyResult(tuple(ran), None, (), tuple(manual))
