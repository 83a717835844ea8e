"""The one result type every check returns."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from fa_doctor.model.actions import Action

if TYPE_CHECKING:
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
    """What to do, and how: typed `actions` (what `fa-doctor fix` runs), plus `commands` for text that is not
    an action (a flag to add to the launch command).

    A check may leave the how to the planner: `intent` states the goal (install FA3, satisfy sglang's
    requirements) and `fa_doctor.diagnose.plan.planner` replaces the remedy with concrete ones after every check ran.
    Shell text is made only when a result is rendered (`lines`), for the shell asked for. `target` holds the
    options the remedy was computed for (`--python PATH`), so the `fa-doctor fix` hint acts on the same
    environment; `replaces_torch` marks a remedy that moves torch (`fix --apply` takes it only when asked).
    `refused` is the planner's reason fa-doctor cannot carry its actions out here (`diagnose.plan.feasible`, the
    rule `fix --apply` refuses by): then it offers no `fa-doctor fix` command for it; empty: it can, or there is
    nothing for it to carry out.
    """

    text: str
    commands: tuple[str, ...] = ()
    actions: tuple[Action, ...] = ()
    intent: Intent | None = None
    target: tuple[str, ...] = ()
    replaces_torch: bool = False
    refused: str = ""


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
