"""`fix --apply`'s outcome as findings: each step's fate, and one finding that says exactly what state remains."""

from __future__ import annotations

from fa_doctor.fix.apply import ApplyResult, Step
from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.lines import Lines
from fa_doctor.render.shell import render

_AGAIN = Remedy("Fix the cause above, then run `fa-doctor fix --apply` again.", ())


def _output(step: Step) -> list[str]:
    return step.output.splitlines() if step.output else []


def findings(applied: ApplyResult) -> list[Finding]:
    out = [Finding("fix.applied", Severity.OK, s.description, s.message) for s in applied.ran if s.status == "done"]
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
    out += [
        Finding(
            "fix.refused", Severity.FAIL, f"Refused before anything changed: {s.description}", s.message, {}, (_AGAIN,)
        )
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
    if not applied.ok:
        out.append(_state(applied))
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
