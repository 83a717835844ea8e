"""Each intent a check states, expanded into the remedies for this machine: the install recipes (recipes.py,
torch.py) with torch and the server's pins held, and remedy (1) for the override."""

from __future__ import annotations

from dataclasses import replace

from fa_doctor.catalog import ecosystem, names
from fa_doctor.catalog.families import family_of
from fa_doctor.catalog.knobs import OVERRIDE
from fa_doctor.diagnose.derive.requires import installed, name_of, requirement
from fa_doctor.diagnose.plan import recipes
from fa_doctor.diagnose.plan.recipes import Unheld, pip_install, reinstall_same, satisfy
from fa_doctor.diagnose.plan.torch import cuda_torch, install_torch
from fa_doctor.model import intents as I
from fa_doctor.model.actions import RunCommand, SetEnv, UnsetEnv
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy


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
