"""The one result type every check returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fa_doctor.model.actions import Action
    from fa_doctor.model.intents import Intent


class Severity(str, Enum):
    OK = "ok"
    INFO = "info"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.OK: 0, Severity.INFO: 1, Severity.WARN: 2, Severity.FAIL: 3}


@dataclass(frozen=True, slots=True)
class Remedy:
    """What to do, and how: typed `actions` (what `fa-doctor fix` runs), or an `intent` the planner
    (`diagnose.plan.planner`) replaces with concrete remedies after every check ran."""

    text: str
    commands: tuple[str, ...] = ()  # text that is not an action (a flag to add to the launch command)
    actions: tuple[Action, ...] = ()
    intent: Intent | None = None
    target: tuple[str, ...] = ()  # the options it was computed for (`--python PATH`), for the `fa-doctor fix` hint
    replaces_torch: bool = False  # it moves torch: `fix --apply` takes it only when asked
    refused: str = ""  # why fa-doctor cannot carry its actions out here (`diagnose.plan.feasible`): no fix hint


@dataclass(frozen=True, slots=True)
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
