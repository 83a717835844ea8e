"""`fa-doctor fix`: act on what `check` found (docs/fix.md). `--unset-override` prints shell code for the calling
shell and edits env files; `--plan` lists the repairs fa-doctor can carry out; `--apply` runs them as one proven,
journalled transaction (`--dry-run`: the proofs only); `--undo` / `--discard-journal` resolve an unfinished apply."""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from fa_doctor.model.finding import Finding, Remedy, Severity
from fa_doctor.model.lines import Lines
from fa_doctor.model.options import CheckOptions
from fa_doctor.model.result import FixPayload, PlanStep, Result
from fa_doctor.render.shell import describe, render

if TYPE_CHECKING:
    from fa_doctor.fix.apply import ApplyResult, Progress
    from fa_doctor.fix.envfile import EditResult
    from fa_doctor.fix.journal import Leftover
    from fa_doctor.probes.target import TargetProbe

Confirm = Callable[[tuple[PlanStep, ...]], bool]


@dataclass(frozen=True, slots=True)
class OverrideOptions:
    shell: str | None = None  # detected when None
    set_value: int | None = None
    env_files: tuple[str, ...] = ()
    dry_run: bool = False
    env: Mapping[str, str] | None = None


@dataclass(frozen=True, slots=True)
class FixOptions:
    check: CheckOptions = field(default_factory=CheckOptions)
    apply: bool = False
    only: tuple[str, ...] = ()  # finding ids; empty: every failing or warning finding
    timeout: float | None = None  # per step; None: each kind of step's own bound (fa_doctor.fix.apply)
    allow_torch_change: bool = False  # take remedies that replace torch (marked by the planner)
    dry_run: bool = False  # with apply: prove every step and stop; nothing changes
    undo: bool = False  # put back what an unfinished apply on this target left in effect (its journal)
    discard_journal: bool = False  # keep the environment as an unfinished apply left it; drop its journal


def unset_override(options: OverrideOptions) -> Result:
    """ValueError (an unknown shell, an invalid --set) propagates: the CLI validates before this."""
    from fa_doctor.fix import envfile
    from fa_doctor.probes.environment import detect_shell
    from fa_doctor.render.shell import eval_hint, override_code

    which = options.shell or detect_shell(os.environ if options.env is None else options.env)
    code, hint = override_code(which, options.set_value), eval_hint(which, options.set_value)
    edits = tuple(envfile.edit(p, set_value=options.set_value, dry_run=options.dry_run) for p in options.env_files)
    payload = FixPayload("unset-override", options.dry_run, which, code, hint, edits)
    return Result("fix", tuple(_edit_finding(e, options.dry_run) for e in edits), payload)


def _edit_finding(edit: EditResult, dry_run: bool) -> Finding:
    evidence = {"path": edit.path, "backup": edit.backup, "notes": list(edit.notes)}
    if edit.error:
        by_hand = Remedy("Remove the SGLANG_FLASHATTENTION_VERSION line from the file by hand.", ())
        return Finding(
            "fix.edit_failed", Severity.FAIL, f"{edit.path} was not changed", edit.error, evidence, (by_hand,)
        )
    if not edit.changed:
        return Finding("fix.edit_unneeded", Severity.INFO, f"{edit.path} does not set the override", "", evidence)
    verb = "would change" if dry_run else "changed"
    detail = edit.diff if dry_run else f"Backup: {edit.backup}" if edit.backup else ""
    return Finding("fix.edited", Severity.OK, f"{edit.path}: {verb}", detail, evidence)


def plan_steps(
    findings: Sequence[Finding], only: Sequence[str] = (), allow_torch_change: bool = False
) -> tuple[PlanStep, ...]:
    """The repairs fa-doctor can carry out, worst finding first (see `_choose`)."""
    return _choose(findings, only, allow_torch_change)[0]


def _wanted(f: Finding, only: Sequence[str]) -> bool:
    return f.id in only if only else f.severity in (Severity.FAIL, Severity.WARN)


def _choose(
    findings: Sequence[Finding], only: Sequence[str], allow_torch_change: bool
) -> tuple[tuple[PlanStep, ...], tuple[str, ...]]:
    """For each failing or warning finding (or those named by --only), worst first, the first remedy whose
    actions fa-doctor can carry out (the planner did not mark it refused; one that replaces torch only with
    `allow_torch_change`); a repair two findings share runs once. Also, for each step, the repair it belongs to
    (a finding's id; findings that share a step are one repair): `fix --apply` holds back a refused one only."""
    from fa_doctor.model.actions import runnable

    steps: list[PlanStep] = []
    owner: dict[object, int] = {}  # action -> index of the step that runs it
    parent: dict[str, str] = {}

    def root(fid: str) -> str:
        while parent.get(fid, fid) != fid:
            fid = parent[fid]
        return fid

    for f in sorted((f for f in findings if _wanted(f, only)), key=lambda f: -f.severity.rank):
        for remedy in f.remedies:
            if (remedy.replaces_torch and not allow_torch_change) or remedy.refused:
                continue
            # Repairs only: a command to run (`nvidia-smi`, `fa-doctor check`) diagnoses, it repairs nothing;
            # a variable of the calling shell is `fix --unset-override`'s job (eval), not something a child can do.
            actions = [a for a in remedy.actions if runnable(a)]
            if not actions:
                continue
            parent.setdefault(f.id, f.id)
            for action in actions:
                if action in owner:  # two findings, one repair: run it once, and they stand or fall together
                    parent[root(f.id)] = root(steps[owner[action]].finding)
                    continue
                owner[action] = len(steps)
                steps.append(PlanStep(f.id, remedy.text, action, describe(action), render(action)))
            break
    return tuple(steps), tuple(root(s.finding) for s in steps)


def _left_out(findings: Sequence[Finding], steps: Sequence[PlanStep], options: FixOptions) -> list[Finding]:
    """What the plan leaves out, said: ids --only names that the check did not find, findings whose only repair
    moves torch (without --allow-torch-change), and those whose repair fa-doctor cannot carry out here, with why."""
    out = []
    if unknown := sorted(set(options.only) - {f.id for f in findings}):
        repairable = sorted({f.id for f in findings if f.severity in (Severity.FAIL, Severity.WARN)})
        title = f"--only names {', '.join(unknown)}, which this check did not find"
        detail = (
            "Nothing was planned for it: the id is misspelt, or the finding is not present with these options. "
            + (f"Findings to repair here: {', '.join(repairable)}." if repairable else "Nothing here needs repair.")
        )
        hint = Remedy("Run `fa-doctor fix --plan` with the same options to see what can be repaired.", ())
        evidence = {"unknown": unknown, "findings": repairable}
        out.append(Finding("fix.unknown_finding", Severity.FAIL, title, detail, evidence, (hint,)))
    planned = {s.finding for s in steps}
    left = [f for f in findings if _wanted(f, options.only) and f.id not in planned]
    torch = sorted(f.id for f in left if any(r.replaces_torch and r.actions for r in f.remedies))
    if torch and not options.allow_torch_change:
        title = f"Not planned: the repair of {', '.join(torch)} replaces torch"
        detail = (
            "fa-doctor never moves the server's torch on its own. Read that remedy: it says which torch it "
            "installs and why; if that is what you want, plan again with --allow-torch-change."
        )
        out.append(Finding("fix.needs_torch_change", Severity.INFO, title, detail, {"findings": torch}))
    why = {f.id: next(r.refused for r in f.remedies if r.refused) for f in left if any(r.refused for r in f.remedies)}
    if why:
        title = f"Not planned: fa-doctor cannot carry out the repair of {', '.join(sorted(why))} here"
        detail = "Its remedy is printed above to run by hand where it can run; `fix --apply` would refuse it here: "
        detail += "; ".join(f"{fid}: {reason}" for fid, reason in sorted(why.items()))
        out.append(Finding("fix.not_doable", Severity.INFO, title, detail, {"findings": dict(sorted(why.items()))}))
    return out


def run(
    options: FixOptions,
    progress: Progress | None = None,
    pending: TargetProbe | None = None,
    confirm: Confirm | None = None,
) -> Result:
    """Plan; with `apply`, confirm, apply, re-check (with `dry_run`: prove only). `undo` / `discard_journal`
    resolve an unfinished apply's journal instead. TargetError propagates (exit code 2)."""
    from fa_doctor.commands import check
    from fa_doctor.fix import journal as stale

    before = check.run(options.check, progress, pending)
    steps, groups = _choose(before.findings, options.only, options.allow_torch_change)
    findings = (*before.findings, *_left_out(before.findings, steps, options))
    payload = FixPayload("plan", plan=steps, check=before.check)
    planned = replace(before, command="fix", payload=payload, findings=findings)
    if options.undo or options.discard_journal:
        return _resolve(options, planned, progress)
    target = planned.check.target
    found = stale.find(target.executable, target.sys_path) if target else []
    left = [_stale_finding(x, options.check.target_args) for x in found]  # an unfinished apply: named in every mode
    if left and not (options.apply and options.dry_run and steps):
        return replace(planned, findings=(*planned.findings, *left))  # and nothing is applied over it
    if not options.apply or not steps:
        return planned
    if not options.dry_run and confirm is not None and not confirm(steps):
        extra = Finding("fix.declined", Severity.INFO, "Nothing was applied: the plan was declined", "")
        return replace(planned, findings=(*planned.findings, extra))
    from fa_doctor.fix.apply import apply

    python = target.executable if target else (options.check.python or "python3")
    # the actions of remedies the planner marked as moving torch: taken only with --allow-torch-change
    moves = [a for f in planned.findings for r in f.remedies if r.replaces_torch for a in r.actions]
    applied = apply(
        [s.action for s in steps],
        python=python,
        timeout=options.timeout,
        progress=progress,
        torch_moves=moves if options.allow_torch_change else (),
        sys_path=target.sys_path if target else None,
        groups=groups,
        dry_run=options.dry_run,
    )
    if options.dry_run or applied.blocked:  # nothing changed: the plan as it was, with the proofs (or the refusal)
        payload = FixPayload("plan", dry_run=options.dry_run, plan=steps, applied=applied, check=planned.check)
        shown = (*planned.findings, *_apply_findings(applied, options.check.target_args))
        return replace(planned, findings=shown, payload=payload)
    if applied.interrupted is not None:  # no re-check: say what ran, what was undone, and stop with 128+N
        payload = FixPayload("apply", plan=steps, applied=applied, check=planned.check)
        stopped = (*planned.findings, *_apply_findings(applied))
        return Result("fix", stopped, payload, planned.timings, options.check.strict, signal=applied.interrupted)
    after = check.run(options.check, progress)
    bad = (Severity.FAIL, Severity.WARN)
    failing = {f.id for f in planned.findings if f.severity in bad}
    still = sorted({f.id for f in after.findings if f.severity in bad})
    fixed = tuple(sorted(failing - set(still)))
    payload = FixPayload("apply", plan=steps, applied=applied, fixed=fixed, remaining=tuple(still), check=after.check)
    return Result("fix", (*after.findings, *_apply_findings(applied)), payload, after.timings, options.check.strict)


def _resolve(options: FixOptions, planned: Result, progress: Progress | None) -> Result:
    """--undo / --discard-journal: act on the unfinished applies of this target, then check again."""
    from fa_doctor.commands import check
    from fa_doctor.fix import journal as stale

    target = planned.check.target
    python = target.executable if target else (options.check.python or "python3")
    found = stale.find(python, target.sys_path if target else ())
    outcomes = [(left, stale.undo(left) if options.undo else stale.discard(left)) for left in found]
    after = check.run(options.check, progress) if outcomes and options.undo else planned
    findings = (*after.findings, *_resolved(outcomes, "undo" if options.undo else "discard"))
    return Result("fix", findings, FixPayload("resolve", check=after.check), after.timings, options.check.strict)


_AGAIN = Remedy("Fix the cause above, then run `fa-doctor fix --apply` again.", ())


def _apply_findings(applied: ApplyResult, target: Sequence[str] = ()) -> list[Finding]:
    """Each step's fate, and one finding that says exactly what state remains."""
    out = [_stale_finding(left, target) for left in applied.leftovers]
    out += [Finding("fix.proven", Severity.OK, f"Would run: {s.description}", s.message) for s in applied.proven]
    out += [Finding("fix.applied", Severity.OK, s.description, s.message) for s in applied.ran if s.status == "done"]
    out += [
        Finding("fix.undone", Severity.INFO, f"Undone: {s.description}", f"{s.message}; put back as it was")
        for s in applied.undone
    ]
    for s in applied.skipped:
        cmd = render(s.action)
        hint = Remedy("Run the command where the source can be reached.", (cmd,))
        out.append(
            Finding("fix.skipped", Severity.WARN, f"Skipped: {s.description}", s.message, {"command": cmd}, (hint,))
        )
    alone = applied.dry_run or applied.ran or applied.undone or applied.failed is None
    when = "Refused (its repair did not run; the others did)" if alone else "Refused before anything changed"
    when = "Would be refused" if applied.dry_run else when
    out += [
        Finding("fix.refused", Severity.FAIL, f"{when}: {s.description}", s.message, {}, (_AGAIN,))
        for s in applied.refused
    ]
    if (step := applied.failed) is not None and step.status != "refused":
        unchanged = " Nothing it changed remains." if step.left_unchanged else ""
        detail = Lines([f"{step.message}.{unchanged}", *step.output.splitlines()])
        evidence = {"returncode": step.returncode, "not_run": [render(a) for a in applied.not_run]}
        out.append(
            Finding("fix.step_failed", Severity.FAIL, f"Stopped: {step.description}", detail, evidence, (_AGAIN,))
        )
    if not applied.ok and not applied.dry_run and not applied.blocked:
        out.append(_state(applied))
    return out


def _stale_finding(left: Leftover, target: Sequence[str]) -> Finding:
    """An earlier apply on this target that did not finish (or one still running): named, and how to resolve it."""
    evidence = {"journal": left.journal, "state": left.state, "changes": list(left.changes),
                "saved": list(left.folders), "pid": left.running}  # fmt: skip
    if left.running is not None:
        title = f"Another `fa-doctor fix --apply` (pid {left.running}) is changing this environment"
        why = "Nothing was changed: two applies on one environment would undo each other's work."
        wait = Remedy("Wait for it to finish, then run `fa-doctor fix --apply` again.", ())
        return Finding("fix.apply_running", Severity.FAIL, title, Lines([why, *left.lines]), evidence, (wait,))
    undo = shlex.join(["fa-doctor", "fix", "--undo", *target])
    drop = shlex.join(["fa-doctor", "fix", "--discard-journal", *target])
    first = (
        "Nothing was changed now: a new apply over a half-changed environment could not be put back. "
        "Resolve the earlier one first."
    )
    title = "An earlier `fa-doctor fix --apply` did not finish: the environment may be half-changed"
    put_back = Remedy("Put back what it changed (from its journal and saved copies), then check again:", (undo,))
    keep = Remedy("Or keep the environment as it is now and drop the journal and saved copies:", (drop,))
    return Finding("fix.stale_journal", Severity.FAIL, title, Lines([first, *left.lines]), evidence, (put_back, keep))


def _resolved(outcomes: Sequence[tuple[Leftover, list[str]]], mode: str) -> list[Finding]:
    """What `--undo` / `--discard-journal` did to each unfinished apply."""
    if not outcomes:
        return [Finding("fix.no_journal", Severity.INFO, "No unfinished `fix --apply` on this environment", "")]
    out = []
    for left, problems in outcomes:
        name = left.journal or ", ".join(left.folders)
        if problems:
            again = Remedy("Fix the cause above (or put those files back by hand), then run it again.", ())
            evidence = {"journal": left.journal, "problems": problems}
            detail = Lines([*problems, *left.lines])
            title = f"Could not {mode} all of it: {name}"
            out.append(Finding("fix.resolve_failed", Severity.FAIL, title, detail, evidence, (again,)))
            continue
        did = "Put back" if mode == "undo" else "Kept as it is; journal and saved copies deleted"
        out.append(Finding("fix.resolved", Severity.OK, f"{did}: {name}", Lines(left.lines), {"journal": left.journal}))
    return out


def _state(applied: ApplyResult) -> Finding:
    kept = applied.ran
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
    title = f"{stopped}: {len(kept)} step(s) in effect, {len(applied.undone)} undone, {len(applied.not_run)} not run"
    evidence = {
        "state": applied.state,
        "completed": [s.description for s in kept],
        "undone": [s.description for s in applied.undone],
        "failed": applied.failed.description if applied.failed else None,
        "not_run": [render(a) for a in applied.not_run],
        "journal": applied.journal,
        "signal": applied.interrupted,
    }
    return Finding("fix.state", Severity.FAIL, title, Lines(lines), evidence, (_AGAIN,))
