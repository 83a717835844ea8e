"""The one remedy planner: run after every check, it turns each remedy's intent into typed actions (its rules:
docs/remedies.md, "Who writes a remedy")."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from fa_doctor.catalog import ecosystem, names
from fa_doctor.catalog.families import family_of
from fa_doctor.catalog.knobs import OVERRIDE
from fa_doctor.diagnose.derive.requires import installed, name_of, requirement
from fa_doctor.diagnose.plan import feasible, recipes
from fa_doctor.diagnose.plan.recipes import Unheld, pip_install, reinstall_same, satisfy
from fa_doctor.diagnose.plan.torch import cuda_torch, install_torch
from fa_doctor.model import intents as I
from fa_doctor.model.actions import RunCommand, SetEnv, UnsetEnv
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Finding, Remedy


def plan(findings: Iterable[Finding], facts: Facts | None, target: tuple[str, ...] = ()) -> list[Finding]:
    """`findings` with every intent expanded into concrete remedies, the fix hints made for `target`, and each
    remedy fa-doctor cannot carry out here marked so (`feasible.refusal`, the rule `fix --apply` refuses by)."""
    ground = feasible.ground_of(facts) if facts is not None else None
    out = []
    for finding in findings:
        expanded = (r for x in finding.remedies for r in (expand(x, facts) if x.intent is not None else (x,)))
        out.append(replace(finding, remedies=tuple(unique([mark(_for_target(r, target), ground) for r in expanded]))))
    return out


def mark(remedy: Remedy, ground: feasible.Ground | None) -> Remedy:
    """The remedy, with the reason fa-doctor cannot carry it out here (its first refused action), if any. A remedy
    marked as moving torch is judged as its hint runs it: with --allow-torch-change."""
    steps = [a for a in remedy.actions if feasible.runnable(a)]
    if ground is None or not steps:
        return remedy
    refusals = (feasible.refusal(a, ground, torch_move=remedy.replaces_torch, allow_torch_change=True) for a in steps)
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


def expand(remedy: Remedy, facts: Facts | None) -> tuple[Remedy, ...]:
    intent = remedy.intent
    assert intent is not None
    if isinstance(intent, I.Override):
        return override_remedies(facts, intent.valid)
    if facts is None:
        what = intent.implementation if isinstance(intent, I.Install) else "the package"
        return (
            Remedy(
                (remedy.text + " " if remedy.text else "")
                + f"The exact install for {what} depends on the torch and server of the environment that runs it: "
                "`fa-doctor check --python PATH` (that environment's interpreter) prints it, with torch and the "
                "server's pins held.",
                actions=(RunCommand(("fa-doctor", "check", "--python", "PATH")),),
            ),
        )
    try:
        planned = _expand(intent, facts)
    except Unheld as exc:
        return (
            Remedy(
                f"fa-doctor plans no install here: {exc}, so it cannot hold torch where it is. Reinstall torch "
                "from a release (or fix its METADATA), then run fa-doctor check again.",
                actions=(RunCommand((facts.target.executable, "-m", "pip", "show", names.TORCH)),),
            ),
        )
    if remedy.text and planned:  # the check's own sentence leads the first planned remedy
        head = planned[0]
        joined = remedy.text.rstrip() + " " + head.text
        return (replace(head, text=joined, commands=remedy.commands + head.commands), *planned[1:])
    return planned


UNSET_FIX = 'eval "$(fa-doctor fix --unset-override)"'


def override_remedies(facts: Facts | None, valid: int | None) -> tuple[Remedy, ...]:
    """Remedy (1): unset, and set to a valid version, as two blocks to paste whole; "works here" only with a GPU."""
    unset = Remedy(
        f"(1) Unset {OVERRIDE} in this shell (`{UNSET_FIX}` does it) and remove it from env files and launch "
        "scripts (`fa-doctor fix --unset-override --env-file FILE`).",
        actions=(UnsetEnv(OVERRIDE),),
    )
    if valid is None:
        return (unset,)
    how = f"`fa-doctor fix --unset-override --set {valid}` (with `--env-file FILE` for files)"
    if facts is None:
        why = f"a value this machine may support (`fa-doctor check` says whether FA{valid} runs)"
    elif facts.gpus.devices:
        why = f"a value that works here: FA{valid} is installed and supports the visible GPUs"
    elif facts.gpu_arch:
        why = (
            f"a value the installed FA{valid} supports on {', '.join(facts.gpu_arch)} (--gpu-arch); no GPU here ran it"
        )
    else:
        why = (
            f"a value the installed packages provide (FA{valid}); no GPU is visible here, so whether it runs is not "
            "known: `fa-doctor check` on the GPU machine says"
        )
    return unset, Remedy(
        f"(1) Or set {OVERRIDE} to {valid} instead, {why}: {how}.", actions=(SetEnv(OVERRIDE, str(valid)),)
    )


def _expand(intent: I.Intent, facts: Facts) -> tuple[Remedy, ...]:
    if isinstance(intent, I.Install):
        planned = recipes.reinstall(facts, intent.implementation)
        return planned[:1] if intent.first else planned
    if isinstance(intent, I.ReinstallSame):
        return (Remedy(intent.text, actions=(reinstall_same(facts, *intent.specs),)),)
    if isinstance(intent, I.Rebuild):
        return (_rebuild(facts, intent),)
    if isinstance(intent, I.Satisfy):
        return tuple(satisfy(facts, intent))
    if isinstance(intent, I.InstallTorch):
        return (install_torch(facts),)
    if isinstance(intent, I.CudaTorch):
        return (cuda_torch(facts, intent.version),)
    if isinstance(intent, I.ReinstallOwners):
        return (_owners(facts, intent.owners),)
    raise TypeError(f"unknown intent {intent!r}")


def _rebuild(facts: Facts, intent: I.Rebuild) -> Remedy:
    version = installed(facts, intent.name) or ecosystem.latest(intent.name)
    spec = f"{intent.name}=={version}" if version else intent.name
    options = recipes.REBUILD + (("--no-binary", intent.name) if intent.from_source else ())
    env = intent.env if any(k == "MAX_JOBS" for k, _ in intent.env) else (*intent.env, ("MAX_JOBS", names.BUILD_JOBS))
    text = intent.text or (
        f"(2) Rebuild {intent.name} against the installed torch: no build isolation (the build sees this torch) and "
        "no wheel cache (pip would reinstall the wheel it built for the old torch)."
    )
    return Remedy(text, actions=(pip_install(facts, (spec,), options, env=env),))


def _owners(facts: Facts, owners: tuple[str, ...]) -> Remedy:
    """Reinstall so the FA4 package's copy of the shared files is the one left on disk."""
    specs = [
        (n, v)
        for n, v in (o.split(" ", 1) for o in owners if " " in o)
        if requirement(n) == n and installed(facts, n) == v
    ]
    if fa4 := [(n, v) for n, v in specs if family_of(name_of(n)).startswith("fa4")]:
        return Remedy(
            "(2) Reinstall the FA4 package last, the same version without its dependencies, so its flash_attn/cute "
            "files win (flash-attn <= 2.8.3.post2 ships an old snapshot of them). Uninstalling the other owner later "
            "deletes FA4's files: run this again after it.",
            actions=(reinstall_same(facts, *(f"{n}=={v}" for n, v in fa4)),),
        )
    return Remedy(
        "(2) Reinstall each owner, the same version without its dependencies, so the copy you want is written "
        "last (pip cannot uninstall one owner without deleting files the other needs).",
        actions=tuple(reinstall_same(facts, f"{n}=={v}") for n, v in specs),
    )
