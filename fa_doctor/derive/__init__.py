"""Derived facts: what follows from the probes alone (inventory states, the pin, the selection), computed once,
between probes and checks. Nothing here produces a finding."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fa_doctor.derive.inventory import ImplState
    from fa_doctor.derive.selection import Selection
    from fa_doctor.facts import Facts


@dataclass(frozen=True)
class Derived:
    states: dict[str, ImplState]  # implementation key -> installed / importable / usable, with every reason
    pinned: int | None  # the FA version SGLANG_FLASHATTENTION_VERSION pins (None: unset or invalid)
    selection: Selection  # what runs for prefill and decode, and why


def derive(facts: Facts) -> Derived:
    from fa_doctor.derive.inventory import assess_all
    from fa_doctor.derive.pin import pinned_version
    from fa_doctor.derive.selection import select

    states = assess_all(facts)
    pinned = pinned_version(facts.env)
    return Derived(states, pinned, select(facts, states, pinned))
