"""A failed or interrupted `fix --apply`: the journal undone newest first, signals held, and what remains said."""

from __future__ import annotations

import signal
from collections.abc import Sequence
from dataclasses import replace

from fa_doctor.fix import journal as J
from fa_doctor.fix.outcome import ApplyResult, Step
from fa_doctor.fix.run_steps import Runner
from fa_doctor.model.actions import Action
from fa_doctor.process import interrupt


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
    results, late = rollback(runner.book)
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


def rollback(book: J.Journal) -> tuple[list[tuple[J.Entry, str | None]], int | None]:
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
