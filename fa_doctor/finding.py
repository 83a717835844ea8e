"""The one result type every check returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any


class Severity(str, Enum):
    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.INFO: 1, Severity.WARN: 2, Severity.FAIL: 3}


@dataclass(frozen=True)
class Remedy:
    """What to do, and the exact commands that do it (copy-pastable, one per line)."""

    text: str
    commands: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "commands": list(self.commands)}


@dataclass(frozen=True)
class Finding:
    """A stable dotted id, a verdict, and what to do about it."""

    id: str
    severity: Severity
    title: str
    detail: str = ""
    evidence: Mapping[str, Any] = field(default_factory=dict)
    remedies: tuple[Remedy, ...] = ()

    def __post_init__(self) -> None:
        # Findings are shared between renderers: freeze the evidence too.
        object.__setattr__(self, "evidence", MappingProxyType(dict(self.evidence)))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity.value,
            "title": self.title,
            "detail": self.detail,
            "evidence": dict(self.evidence),
            "remedies": [r.to_dict() for r in self.remedies],
        }
