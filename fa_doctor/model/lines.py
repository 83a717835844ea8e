"""Text whose line breaks are fa-doctor's own: a `str` (the parts joined with "\\n") that keeps its parts, so the
renderers escape each part on its own and a break inside target text (a path, a child's stderr) stays escaped."""

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

    def __reduce__(self) -> tuple[Any, ...]:
        # copy.copy() and pickle rebuild it from its parts, not from the joined text
        return (Lines, (self.parts,))

    def __repr__(self) -> str:
        return f"Lines({self.parts!r})"
