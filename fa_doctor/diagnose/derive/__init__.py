"""Derived facts: what follows from the probes alone (inventory states, the pin, the selection), computed once,
between probes and checks. Nothing here produces a finding."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fa_doctor.probes.environment import OVERRIDE

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
VALID = (2, 3, 4)  # what SGLANG_FLASHATTENTION_VERSION may pin
# ASCII digits only: int() would accept " 3", "３" (full-width) and "3_0".
_STRICT = re.compile(r"[234]")


def parse_override(raw: str | None) -> int | None:
    """The pinned version, or None when unset. Raises ValueError for anything but exactly 2, 3 or 4."""
    if raw is None:
        return None
    if _STRICT.fullmatch(raw) is None:
        raise ValueError(raw)
    return int(raw)


def derive(facts: Facts) -> Derived:
    from fa_doctor.diagnose.derive.inventory import assess_all
    from fa_doctor.diagnose.derive.selection import select
    from fa_doctor.probes.modules import resolve

    states = assess_all(facts)
    try:
        pinned = parse_override(facts.env.get(OVERRIDE))
    except ValueError:
        pinned = None  # the override check reports the invalid value
    py = (facts.target.version[0], facts.target.version[1])
    spots = {name: resolve(name, facts.target.sys_path, py) for name in UNOWNED_NAMES}
    return Derived(states, pinned, select(facts, states, pinned), spots)
