"""`fix --apply`'s outcome as findings: each step's fate, one finding that says exactly what state remains, and an
unfinished earlier apply (its journal) named with the two ways to resolve it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from fa_doctor.fix.apply import ApplyResult, Step
from fa_doctor.fix.stale import Leftover
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.lines import Lines
from fa_doctor.render.shell import render

_AGAIN = Remedy("Fix the cause above, then run `fa-doctor fix --apply` again.", ())


def _output(step: Step) -> list[str]:
    return step.output.splitlines() if step.output else []


def findings(applied: ApplyResult, target: Sequence[str] = ()) -> list[Finding]:
    out = [stale_finding(left, target) for left in applied.leftovers]
    out += [Finding("fix.proven", Severity.OK, f"Would run: {s.description}", s.message) for s in applied.proven]
    out += [Finding("fix.applied", Severity.OK, s.description, s.message) for s in applied.ran if s.status == "done"]
    out += [
        Finding("fix.undone", Severity.INFO, f"Undone: {s.description}", f"{s.message}; put back as it was")
        for s in applied.undone
    ]
    out += [
        Finding(
            "fix.skipped",
            Severity.WARN,
            f"Skipped: {s.description}",
            s.message,
            {"command": render(s.action)},
            (Remedy("Run the command where the source can be reached.", (render(s.action),)),),
        )
        for s in applied.skipped
    ]
    alone = applied.dry_run or applied.ran or applied.undone or applied.failed is None
    when = "Refused (its repair did not run; the others did)" if alone else "Refused before anything changed"
    when = "Would be refused" if applied.dry_run else when
    out += [
        Finding("fix.refused", Severity.FAIL, f"{when}: {s.description}", s.message, {}, (_AGAIN,))
        for s in applied.refused
    ]
    step = applied.failed
    if step is not None and step.status != "refused":
        unchanged = " Nothing it changed remains." if step.left_unchanged else ""
        out.append(
            Finding(
                "fix.step_failed",
                Severity.FAIL,
                f"Stopped: {step.description}",
                Lines([f"{step.message}.{unchanged}", *_output(step)]),
                {"returncode": step.returncode, "not_run": [render(a) for a in applied.not_run]},
                (_AGAIN,),
            )
        )
    if not applied.ok and not applied.dry_run and not applied.blocked:
        out.append(_state(applied))
    return out


def stale_finding(left: Leftover, target: Sequence[str]) -> Finding:
    """An earlier apply on this target that did not finish (or one still running): named, and how to resolve it."""
    evidence = {"journal": left.journal, "state": left.state, "changes": list(left.changes),
                "saved": list(left.folders), "pid": left.running}  # fmt: skip
    if left.running is not None:
        return Finding(
            "fix.apply_running",
            Severity.FAIL,
            f"Another `fa-doctor fix --apply` (pid {left.running}) is changing this environment",
            Lines(["Nothing was changed: two applies on one environment would undo each other's work.", *left.lines]),
            evidence,
            (Remedy("Wait for it to finish, then run `fa-doctor fix --apply` again.", ()),),
        )
    undo = shlex.join(["fa-doctor", "fix", "--undo", *target])
    drop = shlex.join(["fa-doctor", "fix", "--discard-journal", *target])
    return Finding(
        "fix.stale_journal",
        Severity.FAIL,
        "An earlier `fa-doctor fix --apply` did not finish: the environment may be half-changed",
        Lines(
            [
                "Nothing was changed now: a new apply over a half-changed environment could not be put back. "
                "Resolve the earlier one first.",
                *left.lines,
            ]
        ),
        evidence,
        (
            Remedy("Put back what it changed (from its journal and saved copies), then check again:", (undo,)),
            Remedy("Or keep the environment as it is now and drop the journal and saved copies:", (drop,)),
        ),
    )


def resolved(outcomes: Sequence[tuple[Leftover, list[str]]], mode: str) -> list[Finding]:
    """What `--undo` / `--discard-journal` did to each unfinished apply."""
    if not outcomes:
        return [Finding("fix.no_journal", Severity.INFO, "No unfinished `fix --apply` on this environment", "")]
    out = []
    for left, problems in outcomes:
        name = left.journal or ", ".join(left.folders)
        if problems:
            out.append(
                Finding(
                    "fix.resolve_failed",
                    Severity.FAIL,
                    f"Could not {mode} all of it: {name}",
                    Lines([*problems, *left.lines]),
                    {"journal": left.journal, "problems": problems},
                    (Remedy("Fix the cause above (or put those files back by hand), then run it again.", ()),),
                )
            )
            continue
        did = "Put back" if mode == "undo" else "Kept as it is; journal and saved copies deleted"
        out.append(Finding("fix.resolved", Severity.OK, f"{did}: {name}", Lines(left.lines), {"journal": left.journal}))
    return out


def _state(applied: ApplyResult) -> Finding:
    kept = [s for s in applied.ran]
    lines = [f"State: {applied.state}."]
    lines += [f"Completed and still in effect: {s.description} ({s.message}); undo: {s.undo or '-'}" for s in kept]
    lines += [f"Completed, then undone: {s.description}" for s in applied.undone]
    if applied.failed is not None:
        lines.append(f"{applied.failed.status.capitalize()}: {applied.failed.description}")
    lines += [f"Not run: {render(a)}" for a in applied.not_run]
    if applied.journal:
        lines.append(f"Journal: {applied.journal}")
    stopped = "Interrupted" if applied.interrupted is not None else "Stopped"
    if applied.interrupted is None and applied.failed is None:
        stopped = f"Done in part ({len(applied.refused)} refused)"
        lines += [f"Refused: {s.description}" for s in applied.refused]
    return Finding(
        "fix.state",
        Severity.FAIL,
        f"{stopped}: {len(kept)} step(s) in effect, {len(applied.undone)} undone, {len(applied.not_run)} not run",
        Lines(lines),
        {
            "state": applied.state,
            "completed": [s.description for s in kept],
            "undone": [s.description for s in applied.undone],
            "failed": applied.failed.description if applied.failed else None,
            "not_run": [render(a) for a in applied.not_run],
            "journal": applied.journal,
            "signal": applied.interrupted,
        },
        (_AGAIN,),
    )
