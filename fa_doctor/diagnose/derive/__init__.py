"""Derived facts: what follows from the probes alone (inventory states, the pin, the selection), computed once,
between probes and checks. Nothing here produces a finding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping

    from fa_doctor.diagnose.derive.inventory import ImplState
    from fa_doctor.diagnose.derive.selection import Selection
    from fa_doctor.model.facts import Facts
    from fa_doctor.model.install import ModuleSpot


@dataclass(frozen=True, slots=True)
class Derived:
    states: dict[str, ImplState]  # implementation key -> installed / importable / usable, with every reason
    pinned: int | None  # the FA version SGLANG_FLASHATTENTION_VERSION pins (None: unset or invalid)
    selection: Selection  # what runs for prefill and decode, and why
    spots: Mapping[str, ModuleSpot]  # where each FA import name resolves on the target's path (UNOWNED_NAMES)


# Import names a stray folder or checkout can take over; checks ask who owns what they resolve to.
UNOWNED_NAMES = ("flash_attn", "flash_attn_interface", "sgl_kernel")


def derive(facts: Facts) -> Derived:
    from fa_doctor.diagnose.derive.inventory import assess_all
    from fa_doctor.diagnose.derive.pin import pinned_version
    from fa_doctor.diagnose.derive.selection import select
    from fa_doctor.probes.modules import resolve

    states = assess_all(facts)
    pinned = pinned_version(facts.env)
    py = (facts.target.version[0], facts.target.version[1])
    spots = {name: resolve(name, facts.target.sys_path, py) for name in UNOWNED_NAMES}
    return Derived(states, pinned, select(facts, states, pinned), spots)
