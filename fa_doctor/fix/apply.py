"""`fa-doctor fix --apply`: a transaction. Every step is proven before the first change, each change is
journalled with its undo, and a failure or an interrupt puts back everything that can be put back.

0. An earlier apply on this target that did not finish (its journal and saved copies, `stale`) refuses this
   one until it is put back or discarded.
1. Prove (`proofs`): first the planner's own rule (`diagnose.plan.feasible`), then installs through pip's
   resolver (`--dry-run --report`, the same constraints), moves, uninstalls, env-file edits (a dry run of the
   editor), clones (`git ls-remote`; an unreachable source skips that build). A step that cannot be proven is
   refused with every step of its group (the repair of one finding); the other groups run. With `dry_run`,
   stop here: the proofs are the result and nothing changes.
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
from collections.abc import Callable, Collection, Hashable, Sequence

from fa_doctor.diagnose.plan import feasible
from fa_doctor.fix import journal as J
from fa_doctor.fix import stale
from fa_doctor.fix.outcome import ApplyResult, Step
from fa_doctor.fix.proofs import Failed, Inventory, Refused
from fa_doctor.fix.rollback import ended as _ended
from fa_doctor.fix.run_steps import Runner
from fa_doctor.model.actions import Action, BuildFromClone, PipInstall
from fa_doctor.process import interrupt
from fa_doctor.render.shell import describe

Progress = Callable[[str], None]


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
    groups: Sequence[Hashable] | None = None,
    dry_run: bool = False,
) -> ApplyResult:
    """Prove, then run `actions` in the target interpreter `python`, as one transaction.

    `timeout` bounds each step (None: 30 min an install, 4 h a build, 10 min anything else; a dry run gets at
    most 5 min of it). `torch_moves` are the actions allowed to replace torch (--allow-torch-change, a remedy
    marked so). `sys_path` is the target's search path (asked of `python` when None). `groups[i]` names the
    repair `actions[i]` belongs to (None: one repair): a refused step holds back its own group only. `dry_run`:
    prove and stop, nothing changes. Never raises for a failing step, nor for SIGINT/SIGTERM/SIGHUP: they come
    back in the result.
    """
    from fa_doctor.process.interrupt import Interrupted

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
    runner = Runner(python, workdir, book, timeout, _steps_default, set(torch_moves))
    result: ApplyResult | None = None
    try:
        try:
            result = _transaction(runner, runnable, [g for _, g in pairs], manual, sys_path, progress, dry_run)
        except Interrupted as exc:  # during the proofs: nothing was changed yet
            result = _ended(runner, runnable, manual, [], -1, None, exc.signum)
        return result
    finally:
        # The journal (and any saved files an undo could not put back) stay when something remains to see.
        trouble = result is None or (not result.ok and result.journal is not None)
        runner.close(keep=result is None or bool(result.ran and (result.failed or result.interrupted is not None)))
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
    groups: list[Hashable],
    manual: tuple[Action, ...],
    sys_path: Sequence[str] | None,
    progress: Progress | None,
    dry_run: bool,
) -> ApplyResult:
    from fa_doctor.process.interrupt import Interrupted

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
    if dry_run:
        proven = tuple(
            Step(a, describe(a), True, "proven: it would run", status="proven")
            for i, a in enumerate(runnable)
            if i not in refused and i not in runner.skips and i not in blocked
        )
        return ApplyResult((), None, tuple(runnable[i] for i in blocked), manual, refused=steps_refused,
                           skipped=tuple(skipped), proven=proven, dry_run=True, leftovers=left,
                           state=_state_dry(proven, steps_refused, len(blocked), skipped))  # fmt: skip
    runs = [i for i in range(total) if i not in refused and i not in blocked and i not in runner.skips]
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
                message, returncode, output, undo = runner.run(index, action)
            except Failed as exc:
                say(f"{label}: failed: {exc}")
                failed = Step(action, describe(action), False, str(exc), exc.returncode, exc.output,
                              time.monotonic() - running[1], status="failed")  # fmt: skip
                return _ended(runner, runnable, manual, done, index, failed, None, skipped, steps_refused)
            seconds = time.monotonic() - running[1]
            done.append((index, Step(action, describe(action), True, message, returncode, output, seconds, undo=undo)))
            running = None
            say(f"{label}: {message}")
    except Interrupted as exc:
        name = signal.Signals(exc.signum).name
        if running is None:  # between two steps: the next one never started
            last = done[-1][0] if done else -1
            return _ended(runner, runnable, manual, done, last, None, exc.signum, skipped, steps_refused)
        index, since = running
        action = runnable[index]
        stopped = Step(action, describe(action), False, f"interrupted by {name}", seconds=time.monotonic() - since,
                       status="failed")  # fmt: skip
        return _ended(runner, runnable, manual, done, index, stopped, exc.signum, skipped, steps_refused)
    runner.book.write("done")
    steps = [s for _, s in done]
    state = _state_done(steps, skipped)
    if refused:
        state += (
            f"; {len(refused)} refused before anything changed"
            + (f" ({len(blocked)} step(s) of the same repairs not run)" if blocked else "")
            + ": the other repairs ran"
        )
    return ApplyResult(tuple(steps), None, tuple(runnable[i] for i in blocked), manual, refused=steps_refused,
                       skipped=tuple(skipped), state=state)  # fmt: skip


def _state_dry(proven: Sequence[Step], refused: Sequence[Step], blocked: int, skipped: Sequence[Step]) -> str:
    text = f"dry run: nothing was changed; {len(proven)} step(s) proven"
    if refused:
        text += f", {len(refused)} refused" + (
            f" ({blocked} more of the same repairs would not run)" if blocked else ""
        )
    return text + (f", {len(skipped)} skipped" if skipped else "")


def _state_done(done: list[Step], skipped: list[Step]) -> str:
    text = f"all {len(done)} step(s) completed"
    return text + (f"; {len(skipped)} skipped" if skipped else "")


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
