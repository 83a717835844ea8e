"""Where a result enters a renderer: every string in it is escaped and scrubbed once, here, for every format.

The result is rebuilt, not mutated: findings and payloads are frozen and may be rendered more than once (one run
writes JSON to stdout and JUnit and Markdown files beside it).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from enum import Enum
from types import MappingProxyType
from typing import Any

from fa_doctor.finding import Remedy
from fa_doctor.render.escape import escape
from fa_doctor.result import Result
from fa_doctor.scrub import SECRET_NAME, scrub_text

_Clean = Callable[[str], str]
_MAX_DEPTH = 40


def _for_display(text: str) -> str:
    return escape(scrub_text(text))


def _walk(value: Any, clean: _Clean, depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return "<too deeply nested>"
    if isinstance(value, Enum):  # Severity is a str: keep it as it is
        return value
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Remedy):
        # Commands are pasted into a shell: absolute paths stay (a quoted '~/...' is never expanded).
        return _rebuild(value, escape, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _rebuild(value, clean, depth)
    if isinstance(value, Mapping):
        out = {
            _walk(k, clean, depth + 1): (
                "<hidden>"
                if isinstance(k, str) and isinstance(v, str) and SECRET_NAME.search(k)
                else _walk(v, clean, depth + 1)
            )
            for k, v in value.items()
        }
        return MappingProxyType(out) if isinstance(value, MappingProxyType) else out
    if isinstance(value, tuple):
        return tuple(_walk(v, clean, depth + 1) for v in value)
    if isinstance(value, list):
        return [_walk(v, clean, depth + 1) for v in value]
    if isinstance(value, (frozenset, set)):
        return type(value)(_walk(v, clean, depth + 1) for v in value)
    return value


def _rebuild(obj: Any, clean: _Clean, depth: int) -> Any:
    fresh = copy.copy(obj)
    for f in dataclasses.fields(obj):
        old = getattr(obj, f.name)
        new = _walk(old, clean, depth + 1)
        if new is not old:
            object.__setattr__(fresh, f.name, new)
    return fresh


def prepare(result: Result) -> Result:
    """The result as every renderer may show it: control characters escaped, home and secrets scrubbed."""
    clean: Result = _rebuild(result, _for_display, 0)
    return clean
