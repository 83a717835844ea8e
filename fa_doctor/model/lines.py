"""Text of several lines whose line breaks are fa-doctor's own: the one way a finding's detail spans lines.

A check that joins lines with "\\n" cannot tell its own line breaks from those inside a path, a backend flag or
a child's stderr, and neither can the renderer boundary once they are one string. `Lines` keeps the parts: it is
an ordinary `str` (the parts joined with "\\n") for every reader, and the boundary escapes each part on its own,
so text from the target stays on its line while fa-doctor's breaks remain. A plain `str` is one line: any line
break in it is shown escaped.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class Lines(str):
    parts: tuple[str, ...]

    def __new__(cls, parts: Iterable[str]) -> Lines:
        kept = tuple(str(p) for p in parts)
        self = super().__new__(cls, "\n".join(kept))
        self.parts = kept
        return self

    def __getnewargs__(self) -> tuple[Any, ...]:
        # copy.copy() and pickle rebuild it from its parts, not from the joined text
        return (self.parts,)

    def __reduce__(self) -> tuple[Any, ...]:
        return (Lines, (self.parts,))

    def __repr__(self) -> str:
        return f"Lines({self.parts!r})"
