"""One renderer interface, one implementation per format (pip-audit's `_format/` shape).

A renderer turns a prepared `Result` into text; the CLI decides where that text goes (stdout, stderr, a file).
`Renderer.render` is the only entry: it passes the result through the boundary (escaping, scrubbing) once.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import ClassVar

from fa_doctor.model.result import Result

FORMATS = ("human", "json", "github", "junit", "markdown")
_MODULES = {
    "human": ("fa_doctor.render.human", "HumanRenderer"),
    "json": ("fa_doctor.render.json", "JsonRenderer"),
    "github": ("fa_doctor.render.github", "GithubRenderer"),
    "junit": ("fa_doctor.render.junit", "JunitRenderer"),
    "markdown": ("fa_doctor.render.markdown", "MarkdownRenderer"),
}
# A payload with renderers of its own, one per format: its class name -> (module, class) of each format.
PAYLOAD_MODULES = {
    "FleetPayload": {fmt: (f"fa_doctor.render.fleet.{fmt}", f"Fleet{fmt.capitalize()}Renderer") for fmt in FORMATS},
}


class Renderer(ABC):
    name: ClassVar[str]
    # False only where every string is quoted (JSON): there a line break cannot start a line, and is kept.
    one_line: ClassVar[bool] = True

    def __init__(self, *, verbose: bool = False, color: bool = False, width: int = 120, wrap: bool = False) -> None:
        # wrap: prose is wrapped at `width` (a terminal); otherwise each item stays on one line (a log).
        self.verbose, self.color, self.width, self.wrap = verbose, color, width, wrap

    def render(self, result: Result) -> str:
        from fa_doctor.render.boundary import prepare

        text = self._for(result).format(prepare(result, one_line=self.one_line))
        if self.one_line and self.name != "github":  # github writes workflow commands on purpose
            from fa_doctor.render.escape import defuse_lines

            text = defuse_lines(text)  # a line a renderer wrapped (a folded table cell) cannot start with `::`
        return text

    def _for(self, result: Result) -> Renderer:
        """The renderer of this format that the result's payload brings, if it brings its own (the fleet report)."""
        own = PAYLOAD_MODULES.get(type(result.payload).__name__, {}).get(self.name)
        if own is None:
            return self
        cls: type[Renderer] = getattr(importlib.import_module(own[0]), own[1])
        if isinstance(self, cls):
            return self
        own_renderer = cls(verbose=self.verbose, color=self.color, width=self.width)
        own_renderer.wrap = self.wrap
        return own_renderer

    @abstractmethod
    def format(self, result: Result) -> str:
        """The whole document for an already prepared result, ending with a newline."""


def renderer_for(
    fmt: str, *, verbose: bool = False, color: bool = False, width: int = 120, wrap: bool = False
) -> Renderer:
    """Imported lazily: a run loads only the format it prints."""
    module, name = _MODULES[fmt]
    cls: type[Renderer] = getattr(importlib.import_module(module), name)
    renderer = cls(verbose=verbose, color=color, width=width)  # a format may take options of its own (junit)
    renderer.wrap = wrap
    return renderer
