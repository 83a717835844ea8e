"""The three documented remedies as checks state them: (1) unset or fix the override, (2) reinstall a compatible
package (intents the planner writes), (3) let auto-detection pick."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fa_doctor.model.facts import Facts
from fa_doctor.model.finding import Remedy
from fa_doctor.probes.environment import OVERRIDE

if TYPE_CHECKING:  # intents load with the first remedy: a healthy check builds none
    from fa_doctor.model.actions import Action
    from fa_doctor.model.intents import Intent


def planned(intent: Intent) -> Remedy:
    """A remedy whose actions the planner decides."""
    return Remedy("", intent=intent)


def run(text: str, *argvs: tuple[str, ...]) -> Remedy:
    """A remedy whose actions are commands to run and read."""
    from fa_doctor.model.actions import RunCommand

    return Remedy(text, actions=tuple(RunCommand(a) for a in argvs))


def reinstall(key: str, first: bool = False) -> tuple[Remedy, ...]:
    """Remedy (2) for one implementation key, written by the planner for this machine (`first`: its first only)."""
    from fa_doctor.model.intents import Install

    return (planned(Install(key, first=first)),)


def unset_override(valid: int | None = None) -> Remedy:
    """Remedy (1): unset the override; with `valid`, setting it to that version too (expand.override_remedies)."""
    from fa_doctor.model.intents import Override

    return planned(Override(valid))


def auto_detect(facts: Facts | None = None) -> Remedy:
    """Remedy (3); given `facts`, callers offer it through `if_pinned`."""
    from fa_doctor.model.actions import RunCommand, UnsetEnv

    unset: tuple[Action, ...] = (UnsetEnv(OVERRIDE),) if facts is None or OVERRIDE in facts.env else ()
    return Remedy(
        f"(3) Remove the pin and let auto-detection choose: drop {OVERRIDE} and any "
        "--attention-backend fa3|fa4 from the launch command; `fa-doctor check` then shows what runs.",
        actions=(*unset, RunCommand(("fa-doctor", "check"))),
    )


def if_pinned(facts: Facts) -> tuple[Remedy, ...]:
    """Remedy (3) only when the override or a backend flag pins a version: otherwise auto-detection already chose."""
    return (auto_detect(facts),) if OVERRIDE in facts.env or facts.flags.any else ()
