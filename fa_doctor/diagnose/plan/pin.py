"""Remedy (1), the override: unset it, or set it to a version that can work here, as two remedies to paste whole;
"works here" only where a GPU proved it (docs/remedies.md)."""

from __future__ import annotations

from fa_doctor.catalog.knobs import OVERRIDE
from fa_doctor.model.actions import SetEnv, UnsetEnv
from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy

UNSET_FIX = 'eval "$(fa-doctor fix --unset-override)"'


def override_remedies(facts: Facts | None, valid: int | None) -> tuple[Remedy, ...]:
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
