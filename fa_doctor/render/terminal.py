"""Whether the terminal wants colour: `--no-color` wins, then FORCE_COLOR, then NO_COLOR (force-color.org's order;
an empty variable counts as unset, as no-color.org says), then whether the stream is a TTY."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import IO


def wants_color(stream: IO[str] | None, no_color: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if no_color:
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("NO_COLOR"):
        return False
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False
