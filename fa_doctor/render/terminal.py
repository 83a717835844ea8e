"""What the terminal wants: colour (--no-color, FORCE_COLOR, NO_COLOR, a TTY) and the width prose wraps at.

Order, from force-color.org's reference implementation: NO_COLOR (set and not empty) turns colour off, command-line
parsing comes next, then FORCE_COLOR (set and not empty) turns it on whatever came before. fa-doctor's own
`--no-color` is the most specific request and wins over both variables; an empty variable counts as unset
(no-color.org: "present and not an empty string").
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import IO

# Below this a wrapped report is harder to read than a long line.
MIN_WIDTH = 60


def isatty(stream: IO[str] | None) -> bool:
    try:
        return stream is not None and stream.isatty()
    except (ValueError, OSError):
        return False


def wants_color(stream: IO[str] | None, no_color: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    if no_color:
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("NO_COLOR"):
        return False
    return isatty(stream)


def wrap_width(stream: IO[str] | None) -> int | None:
    """The terminal's width when the stream is a terminal; None (no wrapping: one line per item) for a log."""
    if not isatty(stream):
        return None
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return max(MIN_WIDTH, os.get_terminal_size(stream.fileno()).columns)  # type: ignore[union-attr]
    return None
