"""`fa-doctor fix --apply`: a transaction. Every step is proven before the first change, each change is
journalled with its undo, and a failure or an interrupt puts back everything that can be put back.

1. Prove (`proofs`): installs through pip's resolver (`--dry-run --report`, the same constraints), moves,
   uninstalls, env-file edits (a dry run of the editor), clones (`git ls-remote`; an unreachable source
   skips that build). One step that cannot be proven refuses the whole plan: nothing changes.
2. Run, in order, each command bounded by its step timeout, in a temporary folder fa-doctor made (mode 0700:
   never the caller's directory, where a planted `setup.py` or `pip/` would run), under a supervisor that
   ends it, and everything it started, with fa-doctor even on SIGKILL (`children`). Before a step that
   replaces or removes a distribution, its files are saved (`journal.take`).
3. On a failure or an interrupt (SIGINT/SIGTERM/SIGHUP), undo the journal newest first, then say exactly
   which steps completed, which were undone and what remains.
Setting or unsetting a variable of the calling shell, and diagnostic commands, come back as `manual`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from fa_doctor.fix import journal as J
from fa_doctor.fix.proofs import Inventory, Refused
from fa_doctor.fix.run_steps import Failed, Runner
from fa_doctor.model.actions import Action, BuildFromClone, PipInstall, RunCommand, SetEnv, UnsetEnv
from fa_doctor.process import interrupt
from fa_doctor.render.shell import describe

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Step:
    """One action and what became of it. `output` is the tail of what the command printed."""

    action: Action
    description: str
    ok: bool
    message: str
    returncode: int | None = None
    output: str = ""
    seconds: float = 0.0
    left_unchanged: bool = False  # a failed step: nothing it changed remains (it changed nothing, or was undone)
    status: str = "done"  # done | failed | refused | skipped | undone | kept (an undo that failed)
    undo: str = ""  # how to put it back by hand


@dataclass(frozen=True, slots=True)
class ApplyResult:
    ran: tuple[Step, ...]  # completed and still in effect, in order
    failed: Step | None  # the step that stopped the run (failed, or refused before anything ran)
    not_run: tuple[Action, ...]  # never started
    manual: tuple[Action, ...]  # SetEnv / UnsetEnv / RunCommand: for the user (render them with actions.render)
    undone: tuple[Step, ...] = ()  # completed, then put back
    refused: tuple[Step, ...] = ()  # could not be proven: the plan did not run
    skipped: tuple[Step, ...] = ()  # a build whose clone source does not answer
    interrupted: int | None = None  # the signal that stopped the run
    journal: str | None = None  # the journal file, kept when something went wrong
    state: str = ""  # one sentence: what the environment holds now

    @property
    def ok(self) -> bool:
        return self.failed is None and self.interrupted is None

    @property
    def unchanged(self) -> bool:
        """Nothing in the environment changed: no step remains in effect, and a failed one left nothing."""
        return not self.ran and (self.failed is None or self.failed.left_unchanged)


def _steps_default(action: Action) -> float:
    if isinstance(action, BuildFromClone):
        return 4 * 3600.0  # FA3's hopper build: "well over an hour" with MAX_JOBS=4
    if isinstance(action, PipInstall):
        return 1800.0
    return 600.0


def apply(
    actions: Sequence[Action],
    *,
    python: str,
    timeout: float | None = None,
    progress: Progress | None = None,
    torch_moves: Collection[Action] = (),
    sys_path: Sequence[str] | None = None,
) -> ApplyResult:
    """Prove, then run `actions` in the target interpreter `python`, as one transaction.

    `timeout` bounds each step (None: 30 min an install, 4 h a build, 10 min anything else; a dry run gets at
    most 5 min of it). `torch_moves` are the actions allowed to replace torch (--allow-torch-change, a remedy
    marked so). `sys_path` is the target's search path (asked of `python` when None). Never raises for a
    failing step, nor for SIGINT/SIGTERM/SIGHUP: they come back in the result.
    """
    from fa_doctor.process.interrupt import Interrupted

    manual = tuple(a for a in actions if isinstance(a, (SetEnv, UnsetEnv, RunCommand)))
    runnable: list[Action] = [a for a in actions if not isinstance(a, (SetEnv, UnsetEnv, RunCommand))]
    if not runnable:
        return ApplyResult((), None, (), manual, state="nothing was changed")
    workdir = tempfile.mkdtemp(prefix="fa-doctor-apply-")  # 0700, ours alone
    book = J.Journal(os.path.join(workdir, "journal.json"))
    runner = Runner(python, workdir, book, timeout, _steps_default, set(torch_moves))
    result: ApplyResult | None = None
    try:
        try:
            result = _transaction(runner, runnable, manual, sys_path, progress)
        except Interrupted as exc:  # during the proofs: nothing was changed yet
            result = _ended(runner, runnable, manual, [], -1, None, exc.signum)
        return result
    finally:
        # The journal (and any saved files an undo could not put back) stay when something remains to see.
        trouble = result is None or (not result.ok and result.journal is not None)
        runner.close(keep=result is None or bool(result.ran and not result.ok))
        _cleanup(workdir, keep_journal=trouble and bool(book.entries))
        _forget_listings()


def _forget_listings() -> None:
    """The folder listings cached during the proofs are stale now: the re-check must read the folders again."""
    from fa_doctor.probes import modules

    modules.listdir.cache_clear()
    modules.by_stem.cache_clear()


def _transaction(
    runner: Runner,
    runnable: list[Action],
    manual: tuple[Action, ...],
    sys_path: Sequence[str] | None,
    progress: Progress | None,
) -> ApplyResult:
    from fa_doctor.process.interrupt import Interrupted

    total = len(runnable)
    say = progress or (lambda _line: None)
    say(f"Proving {total} step(s) before changing anything")
    try:
        runner.start(sys_path)
    except Refused as exc:
        step = Step(runnable[0], describe(runnable[0]), False, str(exc), left_unchanged=True, status="refused")
        return ApplyResult((), step, tuple(runnable[1:]), manual, refused=(step,), state="nothing was changed")
    refused: list[Step] = []
    skipped: list[Step] = []
    for index, action in enumerate(runnable):
        label = f"[{index + 1}/{total}] {describe(action)}"
        try:
            runner.prove(index, action)
        except Refused as exc:
            say(f"{label}: refused: {exc}")
            refused.append(Step(action, describe(action), False, str(exc), left_unchanged=True, status="refused"))
        if index in runner.skips:
            say(f"{label}: skipped: {runner.skips[index]}")
            skipped.append(Step(action, describe(action), True, runner.skips[index], status="skipped"))
    if refused:
        rest = tuple(a for a in runnable if a is not refused[0].action)
        return ApplyResult(
            (), refused[0], rest, manual, refused=tuple(refused), skipped=tuple(skipped),
            state="nothing was changed: the plan did not run, because a step could not be proven safe",
        )  # fmt: skip
    done: list[tuple[int, Step]] = []
    running: tuple[int, float] | None = None  # the step whose command is under way, and since when
    try:
        for index, action in enumerate(runnable):
            if index in runner.skips:
                continue
            label = f"[{index + 1}/{total}] {describe(action)}"
            interrupt.checkpoint(f"apply-{index + 1}")  # a test hook: a signal between two steps
            say(label)
            running = (index, time.monotonic())
            try:
                message, returncode, output, undo = runner.run(index, action)
            except Failed as exc:
                say(f"{label}: failed: {exc}")
                failed = Step(action, describe(action), False, str(exc), exc.returncode, exc.output,
                              time.monotonic() - running[1], status="failed")  # fmt: skip
                return _ended(runner, runnable, manual, done, index, failed, None, skipped)
            seconds = time.monotonic() - running[1]
            done.append((index, Step(action, describe(action), True, message, returncode, output, seconds, undo=undo)))
            running = None
            say(f"{label}: {message}")
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        if running is None:  # between two steps: the next one never started
            last = done[-1][0] if done else -1
            return _ended(runner, runnable, manual, done, last, None, exc.signum, skipped)
        index, since = running
        action = runnable[index]
        stopped = Step(action, describe(action), False, f"interrupted by {name}", seconds=time.monotonic() - since,
                       status="failed")  # fmt: skip
        return _ended(runner, runnable, manual, done, index, stopped, exc.signum, skipped)
    runner.book.write("done")
    steps = [s for _, s in done]
    return ApplyResult(tuple(steps), None, (), manual, skipped=tuple(skipped), state=_state_done(steps, skipped))


def _state_done(done: list[Step], skipped: list[Step]) -> str:
    text = f"all {len(done)} step(s) completed"
    return text + (f"; {len(skipped)} skipped" if skipped else "")


def _ended(
    runner: Runner,
    runnable: list[Action],
    manual: tuple[Action, ...],
    done: list[tuple[int, Step]],
    index: int,
    failed: Step | None,
    signum: int | None,
    skipped: Sequence[Step] = (),
) -> ApplyResult:
    """A step failed or a signal came: undo the journal, newest first, and say what remains."""
    from dataclasses import replace

    results, late = _rollback(runner.book)
    signum = signum if signum is not None else late
    problems = {e.step: why for e, why in results if why is not None}
    undone_steps = {e.step for e, why in results if why is None}
    undone = [replace(s, status="undone") for i, s in done if i in undone_steps and i not in problems]
    kept = [
        replace(s, status="kept", message=f"{s.message}; its undo failed: {problems[i]}")
        for i, s in done
        if i in problems
    ]
    kept += [s for i, s in done if i not in undone_steps and i not in problems]  # changed nothing to undo
    if failed is not None:
        own_changes = [e for e in runner.book.entries if e.step == index]
        clean = all(e.step not in problems for e in own_changes)
        note = "" if not own_changes else "; its changes were undone" if clean else "; its changes could not be undone"
        failed = replace(failed, message=failed.message + note, left_unchanged=clean)
    not_run = tuple(a for i, a in enumerate(runnable) if i > index and i not in runner.skips)
    runner.book.write("rolled back" if not kept else "partly rolled back")
    if kept or (failed is not None and not failed.left_unchanged):
        state = (
            "the environment is partly changed: "
            + "; ".join(f"{k.description} remains ({k.undo or 'see the journal'})" for k in kept)
            + f"; journal: {runner.book.path}"
        )
    elif undone:
        state = f"every completed step was undone ({len(undone)}); the environment is as it was before"
    else:
        state = "nothing was changed"
    return ApplyResult(
        tuple(kept), failed, not_run, manual, undone=tuple(undone), skipped=tuple(skipped), interrupted=signum,
        journal=runner.book.path if runner.book.entries else None, state=state,
    )  # fmt: skip


def _rollback(book: J.Journal) -> tuple[list[tuple[J.Entry, str | None]], int | None]:
    """Undo the journal with SIGINT/SIGTERM/SIGHUP held: a Ctrl-C cannot stop it half-way; it is reported."""
    from fa_doctor.process.interrupt import Interrupted

    late: int | None = None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.SIGNALS)
    try:
        results, _ = book.rollback()
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a held signal's handler runs here
        except Interrupted as exc:
            late = exc.signum
    return results, late


def _cleanup(workdir: str, keep_journal: bool) -> None:
    for name in os.listdir(workdir) if os.path.isdir(workdir) else ():
        if keep_journal and name == "journal.json":
            continue
        path = os.path.join(workdir, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
    if not keep_journal:
        shutil.rmtree(workdir, ignore_errors=True)


__all__ = ["ApplyResult", "Inventory", "Step", "apply"]
