"""One renderer interface, one implementation per format (pip-audit's `_format/` shape).

A renderer turns a prepared `Result` into text; the CLI decides where that text goes (stdout, stderr, a file).
`Renderer.render` is the only entry: it passes the result through the boundary (escaping, scrubbing) once.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from typing import ClassVar

from fa_doctor.result import Result

FORMATS = ("human", "json", "github", "junit", "markdown")
_MODULES = {
    "human": ("fa_doctor.render.human", "HumanRenderer"),
    "json": ("fa_doctor.render.json", "JsonRenderer"),
    "github": ("fa_doctor.render.github", "GithubRenderer"),
    "junit": ("fa_doctor.render.junit", "JunitRenderer"),
    "markdown": ("fa_doctor.render.markdown", "MarkdownRenderer"),
}


class Renderer(ABC):
    name: ClassVar[str]
    # False only where every string is quoted (JSON): there a line break cannot start a line, and is kept.
    one_line: ClassVar[bool] = True

    def __init__(self, *, verbose: bool = False, color: bool = False, width: int = 120) -> None:
        self.verbose, self.color, self.width = verbose, color, width

    def render(self, result: Result) -> str:
        from fa_doctor.render.boundary import prepare

        return self.format(prepare(result, one_line=self.one_line))

    @abstractmethod
    def format(self, result: Result) -> str:
        """The whole document for an already prepared result, ending with a newline."""


def renderer_for(fmt: str, *, verbose: bool = False, color: bool = False, width: int = 120) -> Renderer:
    """Imported lazily: a run loads only the format it prints."""
    module, name = _MODULES[fmt]
    cls: type[Renderer] = getattr(importlib.import_module(module), name)
    return cls(verbose=verbose, color=color, width=width)
