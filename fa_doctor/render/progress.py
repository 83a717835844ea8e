"""Chatter on stderr while something slow runs: a spinner on a terminal, plain lines otherwise."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_to_stderr(color: bool = True) -> Iterator[Callable[[str], None]]:
    if not sys.stderr.isatty():
        yield lambda message: None
        return
    from rich.console import Console

    console = Console(stderr=True, markup=False, highlight=False, no_color=not color)
    status = console.status("")
    started = [False]

    def update(message: str) -> None:
        if not started[0]:
            status.start()
            started[0] = True
        status.update(message)

    try:
        yield update
    finally:
        if started[0]:
            status.stop()
