"""One renderer interface, one implementation per format (pip-audit's `_format/` shape). `Renderer.render` is the
only entry: it passes the result through the boundary (escaping, scrubbing) once; the CLI decides where it goes."""

from __future__ import annotations

import importlib
import sys
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from fa_doctor.model.result import Result

if TYPE_CHECKING:
    from fa_doctor.fleet.model import FleetPayload

FORMATS = ("human", "json", "github", "junit", "markdown")


@dataclass(kw_only=True, eq=False)
class Renderer(ABC):
    name: ClassVar[str]
    # False only where every string is quoted (JSON): there a line break cannot start a line, and is kept.
    one_line: ClassVar[bool] = True
    verbose: bool = False
    color: bool = False
    width: int = 120
    wrap: bool = False  # prose wrapped at `width` (a terminal); otherwise each item stays on one line (a log)

    def render(self, result: Result) -> str:
        from fa_doctor.render.boundary import prepare

        clean = prepare(result, one_line=self.one_line)
        fleet = sys.modules.get("fa_doctor.fleet.model")  # not loaded: no fleet report can exist
        is_fleet = fleet is not None and isinstance(clean.payload, fleet.FleetPayload)
        text = self.fleet(clean, clean.payload) if is_fleet else self.format(clean)
        if self.one_line and self.name != "github":  # github writes workflow commands on purpose
            from fa_doctor.render.escape import defuse_lines

            text = defuse_lines(text)  # a line a renderer wrapped (a folded table cell) cannot start with `::`
        return text

    @abstractmethod
    def format(self, result: Result) -> str:
        """The whole document for an already prepared result, ending with a newline."""

    @abstractmethod
    def fleet(self, result: Result, payload: FleetPayload) -> str:
        """The same for a fleet report (`merge`, `fleet ray`)."""


def renderer_for(
    fmt: str, *, verbose: bool = False, color: bool = False, width: int = 120, wrap: bool = False
) -> Renderer:
    """Imported lazily: a run loads only the format it prints."""
    cls: type[Renderer] = getattr(importlib.import_module(f"fa_doctor.render.{fmt}"), f"{fmt.capitalize()}Renderer")
    return cls(verbose=verbose, color=color, width=width, wrap=wrap)
