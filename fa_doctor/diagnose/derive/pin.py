"""The FA version SGLANG_FLASHATTENTION_VERSION pins, read strictly."""

from __future__ import annotations

import re
from collections.abc import Mapping

from fa_doctor.probes.environment import OVERRIDE

VALID = (2, 3, 4)
# ASCII digits only: int() would accept " 3", "３" (full-width) and "3_0".
_STRICT = re.compile(r"[234]")


def parse_override(raw: str | None) -> int | None:
    """The pinned version, or None when unset. Raises ValueError for anything but exactly 2, 3 or 4."""
    if raw is None:
        return None
    if _STRICT.fullmatch(raw) is None:
        raise ValueError(raw)
    return int(raw)


def pinned_version(env: Mapping[str, str]) -> int | None:
    """The valid pin, or None when the variable is unset or invalid (the override check reports which)."""
    try:
        return parse_override(env.get(OVERRIDE))
    except ValueError:
        return None
