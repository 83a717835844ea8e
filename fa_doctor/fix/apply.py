"""`fa-doctor fix --apply`: a transaction. Every step is proven before the first change (`run_steps`, `proofs`),
each change is journalled with its undo, and a failure or an interrupt puts back everything that can be put
back. The stages are described in docs/fix.md ("Repairs")."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, replace

from fa_doctor.diagnose.plan import feasible
from fa_doctor.fix import journal as J
from fa_doctor.fix import stale
from fa_doctor.fix.proofs import Failed, Refused, forget_listings
from fa_doctor.fix.run_steps import Runner
from fa_doctor.fix.stale import Leftover
from fa_doctor.model.actions import Action
from fa_doctor.process import interrupt
from fa_doctor.render.shell import describe


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
    status: str = "done"  # done | failed | refused | skipped | undone | kept (an undo that failed) | proven
    undo: str = ""  # how to put it back by hand


@dataclass(frozen=True, slots=True)
class ApplyResult:
    ran: tuple[Step, ...]  # completed and still in effect, in order
    failed: Step | None  # the step that stopped the run (failed, or refused when nothing could run)
    not_run: tuple[Action, ...]  # never started
    manual: tuple[Action, ...]  # SetEnv / UnsetEnv / RunCommand: for the user (render them with actions.render)
    undone: tuple[Step, ...] = ()  # completed, then put back
    refused: tuple[Step, ...] = ()  # could not be proven: they (and the rest of their group) did not run
    skipped: tuple[Step, ...] = ()  # a build whose clone source does not answer
    interrupted: int | None = None  # the signal that stopped the run
    journal: str | None = None  # the journal file, kept when something went wrong
    state: str = ""  # one sentence: what the environment holds now
    proven: tuple[Step, ...] = ()  # dry run: the steps that would run
    dry_run: bool = False
    leftovers: tuple[Leftover, ...] = ()  # an earlier apply on this target that did not finish

    @property
    def ok(self) -> bool:
        return self.failed is None and self.interrupted is None and not self.refused and not self.blocked

    @property
    def blocked(self) -> bool:
        """Refused for an earlier apply's leftovers (or one still running): nothing was tried."""
        return bool(self.leftovers) and not self.dry_run

    @property
    def unchanged(self) -> bool:
        """Nothing in the environment changed: no step remains in effect, and a failed one left nothing."""
        return not self.ran and (self.failed is None or self.failed.left_unchanged)


Progress = Callable[[str], None]


def apply(
    actions: Sequence[Action],
    *,
    python: str,
    timeout: float | None = None,
    progress: Progress | None = None,
    torch_moves: Collection[Action] = (),
    sys_path: Sequence[str] | None = None,
    groups: Sequence[Hashable] | None = None,
    dry_run: bool = False,
) -> ApplyResult:
    """Prove, then run `actions` in the target interpreter `python`, as one transaction; with `dry_run`, prove
    only. `groups[i]` names the repair `actions[i]` belongs to: a refused step holds back its own group only.
    Never raises for a failing step, nor for SIGINT/SIGTERM/SIGHUP: they come back in the result."""
    group_of = list(groups) if groups is not None else [0] * len(actions)
    if len(group_of) != len(actions):
        raise ValueError("groups must name one group per action")
    manual = tuple(a for a in actions if not feasible.runnable(a))
    pairs = [(a, g) for a, g in zip(actions, group_of, strict=True) if feasible.runnable(a)]
    runnable: list[Action] = [a for a, _ in pairs]
    if not runnable:
        return ApplyResult((), None, (), manual, state="nothing was changed", dry_run=dry_run)
    workdir = tempfile.mkdtemp(prefix=stale.PREFIX)  # 0700, ours alone
    book = J.Journal(os.path.join(workdir, "journal.json"))
    runner = Runner(python, workdir, book, timeout, set(torch_moves))
    result: ApplyResult | None = None
    try:
        try:
            result = _transaction(runner, runnable, [g for _, g in pairs], manual, sys_path, progress, dry_run)
        except interrupt.Interrupted as exc:  # during the proofs: nothing was changed yet
            result = ended(runner, runnable, manual, [], -1, None, exc.signum)
        return result
    finally:
        # The journal (and any saved files an undo could not put back) stay when something remains to see.
        trouble = result is None or (not result.ok and result.journal is not None)
        runner.close(keep=result is None or bool(result.ran and (result.failed or result.interrupted is not None)))
        if trouble and book.entries:
            for entry in os.scandir(workdir):
                if entry.name != "journal.json" and entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                elif entry.name != "journal.json":
                    with contextlib.suppress(OSError):
                        os.unlink(entry.path)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        forget_listings()  # the re-check must read the folders again


def _transaction(
    runner: Runner,
    runnable: list[Action],
    groups: list[Hashable],
    manual: tuple[Action, ...],
    sys_path: Sequence[str] | None,
    progress: Progress | None,
    dry_run: bool,
) -> ApplyResult:
    total = len(runnable)
    say = progress or (lambda _line: None)
    say(f"Proving {total} step(s) before changing anything")
    try:
        runner.start(sys_path)
    except Refused as exc:
        step = Step(runnable[0], describe(runnable[0]), False, str(exc), left_unchanged=True, status="refused")
        return ApplyResult((), step, tuple(runnable[1:]), manual, refused=(step,), state="nothing was changed",
                           dry_run=dry_run)  # fmt: skip
    left = tuple(stale.find(runner.python, runner.sys_path, exclude=runner.workdir))
    if left and not dry_run:
        busy = any(x.running is not None for x in left)
        why = "another fix --apply is changing" if busy else "an earlier fix --apply did not finish on"
        return ApplyResult((), None, tuple(runnable), manual, leftovers=left,
                           state=f"nothing was changed: {why} this environment; resolve it first")  # fmt: skip
    refused: dict[int, Step] = {}
    skipped: list[Step] = []
    for index, action in enumerate(runnable):
        label = f"[{index + 1}/{total}] {describe(action)}"
        try:
            runner.prove(index, action)
        except Refused as exc:
            say(f"{label}: refused: {exc}")
            refused[index] = Step(action, describe(action), False, str(exc), left_unchanged=True, status="refused")
        if index in runner.skips:
            say(f"{label}: skipped: {runner.skips[index]}")
            skipped.append(Step(action, describe(action), True, runner.skips[index], status="skipped"))
    held = {groups[i] for i in refused}
    blocked = [i for i in range(total) if groups[i] in held and i not in refused]
    steps_refused = tuple(refused[i] for i in sorted(refused))
    runs = [i for i in range(total) if i not in refused and i not in blocked and i not in runner.skips]
    if dry_run:
        proven = tuple(
            Step(runnable[i], describe(runnable[i]), True, "proven: it would run", status="proven") for i in runs
        )
        state = f"dry run: nothing was changed; {len(proven)} step(s) proven"
        if refused:
            state += f", {len(refused)} refused" + (
                f" ({len(blocked)} more of the same repairs would not run)" if blocked else ""
            )
        return ApplyResult((), None, tuple(runnable[i] for i in blocked), manual, refused=steps_refused,
                           skipped=tuple(skipped), proven=proven, dry_run=True, leftovers=left,
                           state=state + (f", {len(skipped)} skipped" if skipped else ""))  # fmt: skip
    if refused and not runs:
        first = steps_refused[0]
        rest = tuple(a for a in runnable if a is not first.action)
        return ApplyResult(
            (), first, rest, manual, refused=steps_refused, skipped=tuple(skipped),
            state="nothing was changed: the plan did not run, because a step could not be proven safe",
        )  # fmt: skip
    done: list[tuple[int, Step]] = []
    running: tuple[int, float] | None = None  # the step whose command is under way, and since when
    try:
        for index in runs:
            action = runnable[index]
            label = f"[{index + 1}/{total}] {describe(action)}"
            interrupt.checkpoint(f"apply-{index + 1}")  # a test hook: a signal between two steps
            say(label)
            running = (index, time.monotonic())
            runner.book.begin(index, describe(action))
            try:
                message, undo, returncode, output = runner.run(index, action)
            except Failed as exc:
                say(f"{label}: failed: {exc}")
                failed = Step(action, describe(action), False, str(exc), exc.returncode, exc.output,
                              time.monotonic() - running[1], status="failed")  # fmt: skip
                return ended(runner, runnable, manual, done, index, failed, None, skipped, steps_refused)
            seconds = time.monotonic() - running[1]
            done.append((index, Step(action, describe(action), True, message, returncode, output, seconds, undo=undo)))
            running = None
            say(f"{label}: {message}")
    except interrupt.Interrupted as exc:
        if running is None:  # between two steps: the next one never started
            last = done[-1][0] if done else -1
            return ended(runner, runnable, manual, done, last, None, exc.signum, skipped, steps_refused)
        index, since = running
        stopped = Step(runnable[index], describe(runnable[index]), False,
                       f"interrupted by {signal.Signals(exc.signum).name}", seconds=time.monotonic() - since,
                       status="failed")  # fmt: skip
        return ended(runner, runnable, manual, done, index, stopped, exc.signum, skipped, steps_refused)
    runner.book.write("done")
    state = f"all {len(done)} step(s) completed" + (f"; {len(skipped)} skipped" if skipped else "")
    if refused:
        state += (
            f"; {len(refused)} refused before anything changed"
            + (f" ({len(blocked)} step(s) of the same repairs not run)" if blocked else "")
            + ": the other repairs ran"
        )
    return ApplyResult(tuple(s for _, s in done), None, tuple(runnable[i] for i in blocked), manual,
                       refused=steps_refused, skipped=tuple(skipped), state=state)  # fmt: skip


def ended(
    runner: Runner,
    runnable: list[Action],
    manual: tuple[Action, ...],
    done: list[tuple[int, Step]],
    index: int,
    failed: Step | None,
    signum: int | None,
    skipped: Sequence[Step] = (),
    refused: tuple[Step, ...] = (),
) -> ApplyResult:
    """A step failed or a signal came: undo the journal, newest first, and say what remains."""
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
    not_yet = {id(s.action) for s in refused}
    not_run = tuple(a for i, a in enumerate(runnable) if i > index and i not in runner.skips and id(a) not in not_yet)
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
        journal=runner.book.path if runner.book.entries else None, state=state, refused=refused,
    )  # fmt: skip


def _rollback(book: J.Journal) -> tuple[list[tuple[J.Entry, str | None]], int | None]:
    """Undo the journal with SIGINT/SIGTERM/SIGHUP held: a Ctrl-C cannot stop it half-way; it is reported."""
    late: int | None = None
    old = signal.pthread_sigmask(signal.SIG_BLOCK, interrupt.SIGNALS)
    try:
        results, _ = book.rollback()
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)  # a held signal's handler runs here
        except interrupt.Interrupted as exc:
            late = exc.signum
    return results, late
