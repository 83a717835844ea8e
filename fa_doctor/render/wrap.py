"""Prose wrapped to a width without breaking what a user copies: a word is never split (paths, URLs, versions
stay whole) and a `backquoted command` is one unit, moved to the next line whole rather than cut."""

from __future__ import annotations

import re

# A backquoted span (a command inside prose) or a run of non-blanks: the units a line break may fall between.
_UNIT = re.compile(r"[^\s`]*`[^`\n]*`\S*|\S+")


def wrap(text: str, width: int, indent: int = 0) -> list[str]:
    """Lines of at most `width` columns where the units allow it (a longer unit gets a line of its own)."""
    pad = " " * indent
    room = max(1, width - indent)
    lines: list[str] = []
    for paragraph in text.split("\n"):
        current = ""
        for unit in _UNIT.findall(paragraph):
            if current and len(current) + 1 + len(unit) > room:
                lines.append(pad + current)
                current = unit
            else:
                current = f"{current} {unit}" if current else unit
        lines.append(pad + current)
    return lines
