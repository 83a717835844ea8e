"""The one remedy planner: run after every check, it turns each remedy's intent into typed actions (its rules:
docs/remedies.md, "Who writes a remedy")."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING

from fa_doctor.model.actions import RunCommand, runnable
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy

if TYPE_CHECKING:
    from fa_doctor.diagnose.plan.feasible import Ground


def plan(findings: Iterable[Finding], facts: Facts | None, target: tuple[str, ...] = ()) -> list[Finding]:
    """`findings` with every intent expanded into concrete remedies, the fix hints made for `target`, and each
    remedy fa-doctor cannot carry out here marked so (`feasible.refusal`, the rule `fix --apply` refuses by)."""
    out = [replace(f, remedies=tuple(_expanded(f.remedies, facts))) for f in findings]
    ground = None
    if facts is not None and any(runnable(a) for f in out for r in f.remedies for a in r.actions):
        from fa_doctor.diagnose.plan.feasible import ground_of

        ground = ground_of(facts)
    return [replace(f, remedies=tuple(unique([mark(_for_target(r, target), ground) for r in f.remedies]))) for f in out]


def _expanded(remedies: Iterable[Remedy], facts: Facts | None) -> Iterator[Remedy]:
    for remedy in remedies:
        if remedy.intent is None:
            yield remedy
        else:
            from fa_doctor.diagnose.plan.expand import expand  # the recipes load only for an intent

            yield from expand(remedy, facts)


def mark(remedy: Remedy, ground: Ground | None) -> Remedy:
    """The remedy, with the reason fa-doctor cannot carry it out here (its first refused action), if any. A remedy
    marked as moving torch is judged as its hint runs it: with --allow-torch-change."""
    steps = [a for a in remedy.actions if runnable(a)]
    if ground is None or not steps:
        return remedy
    from fa_doctor.diagnose.plan.feasible import refusal

    refusals = (refusal(a, ground, torch_move=remedy.replaces_torch, allow_torch_change=True) for a in steps)
    return replace(remedy, refused=next((why for why in refusals if why is not None), ""))


def _for_target(remedy: Remedy, target: tuple[str, ...]) -> Remedy:
    """The remedy as computed for `target`: its fix hint carries the same options, and any `fa-doctor check` it
    suggests looks at the same interpreter (`--python PATH`; not the launch flags, which remedy (3) removes)."""
    where = next((target[i : i + 2] for i in range(len(target) - 1) if target[i] == "--python"), ())
    actions = tuple(
        RunCommand((*a.argv, *where)) if isinstance(a, RunCommand) and a.argv == ("fa-doctor", "check") else a
        for a in remedy.actions
    )
    return replace(remedy, target=target, actions=actions)


def unique(remedies: list[Remedy]) -> list[Remedy]:
    first: dict[tuple[object, ...], Remedy] = {}
    for r in remedies:
        first.setdefault((r.text, r.commands, r.actions), r)
    return list(first.values())
