"""Regular expressions compiled on first use, not at import.

Compiling is most of what importing a module of patterns costs: the static check compiled 13 ms of them, many
for inputs it never met (PowerShell lines, URL credentials, compiled extensions). `lazy(...)` stands where
`re.compile(...)` stood and compiles when a method is first called.
"""

from __future__ import annotations

import re
from typing import Any, AnyStr, cast


class _Lazy:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str | bytes, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[Any] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r})"


def lazy(pattern: AnyStr, flags: int = 0) -> re.Pattern[AnyStr]:
    return cast("re.Pattern[AnyStr]", _Lazy(pattern, flags))
