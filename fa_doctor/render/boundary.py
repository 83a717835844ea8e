"""Where a result enters a renderer: every string in it is escaped and scrubbed once, here, for every format; the
result is rebuilt, not mutated (docs/render.md)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import fields, is_dataclass
from enum import Enum
from functools import partial
from types import MappingProxyType
from typing import Any

from fa_doctor.model.finding import Remedy
from fa_doctor.model.lines import Lines
from fa_doctor.model.result import Result
from fa_doctor.render.escape import escape
from fa_doctor.render.scrub import SECRET_NAME, scrub_text

_MAX_DEPTH = 40


def _clean(text: str, one_line: bool, scrub: bool = True) -> str:
    """scrub False: a remedy's commands are pasted into a shell, so absolute paths stay ('~/...' quoted is inert)."""
    return escape(scrub_text(text) if scrub else text, one_line=one_line)


def _walk(value: Any, clean: partial[str], depth: int = 0) -> Any:
    if depth > _MAX_DEPTH:
        return "<too deeply nested>"
    if isinstance(value, Enum):  # Severity is a str: keep it as it is
        return value
    if isinstance(value, Lines):
        return Lines(clean(part) for part in value.parts)
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, Remedy):
        return _rebuild(value, partial(clean, scrub=False), depth)
    if is_dataclass(value) and not isinstance(value, type):
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
    if isinstance(value, (tuple, list, frozenset, set)):
        kind = tuple if isinstance(value, tuple) else list if isinstance(value, list) else type(value)
        return kind(_walk(v, clean, depth + 1) for v in value)
    return value


def _rebuild(obj: Any, clean: partial[str], depth: int) -> Any:
    fresh = copy.copy(obj)
    for f in fields(obj):
        old = getattr(obj, f.name)
        if (new := _walk(old, clean, depth + 1)) is not old:
            object.__setattr__(fresh, f.name, new)
    return fresh


def prepare(result: Result, *, one_line: bool = True) -> Result:
    """The result as every renderer may show it: control characters (and, unless `one_line` is False, line
    breaks) escaped, home and secrets scrubbed."""
    clean: Result = _rebuild(result, partial(_clean, one_line=one_line), 0)
    return clean
