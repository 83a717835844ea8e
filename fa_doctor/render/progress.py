"""Chatter on stderr while something slow runs: a spinner on a terminal, timed plain lines in a log (systemd,
Kubernetes, Slurm) with the static findings before the kernels run, nothing under --quiet. And whether to colour."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import IO

from fa_doctor.model.finding import Finding, Severity


def wants_color(stream: IO[str] | None, no_color: bool = False, environ: Mapping[str, str] | None = None) -> bool:
    """`--no-color` wins, then FORCE_COLOR, then NO_COLOR (force-color.org's order; an empty variable counts as
    unset, as no-color.org says), then whether the stream is a TTY."""
    env = os.environ if environ is None else environ
    if no_color or (env.get("NO_COLOR") and not env.get("FORCE_COLOR")):
        return False
    try:
        return bool(env.get("FORCE_COLOR")) or (stream is not None and stream.isatty())
    except (ValueError, OSError):
        return False


class PlainProgress:
    """`fa-doctor [  3.2s] GPU 0: importing flash_attn.cute`: one line per step, escaped, flushed at once."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream
        self.start = time.monotonic()
        self.lock = threading.Lock()  # one child per GPU reports from its own thread

    def __call__(self, message: str) -> None:
        from fa_doctor.render.escape import escape

        line = f"fa-doctor [{time.monotonic() - self.start:6.1f}s] {escape(message)}\n"
        with self.lock:
            try:
                self.stream.write(line)
                self.stream.flush()
            except (OSError, ValueError):
                pass  # a log that went away must not end the check

    def static(self, findings: Sequence[Finding], gpus: int) -> None:
        """The static checks' verdict, before the smoke test: the failing and warning findings, one line each."""
        loud = [f for f in findings if f.severity in (Severity.FAIL, Severity.WARN)]
        fail = sum(f.severity is Severity.FAIL for f in loud)
        self(f"static checks: {fail} failing, {len(loud) - fail} warning(s); smoke test next on {gpus} GPU(s)")
        for f in loud:
            self(f"  {f.severity.value}: {f.title} [{f.id}]")


@contextmanager
def progress_to_stderr(color: bool = True, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    if quiet:
        yield lambda message: None
        return
    if not sys.stderr.isatty():
        yield PlainProgress(sys.stderr)
        return
    from rich.console import Console

    status = Console(stderr=True, markup=False, highlight=False, no_color=not color).status("")

    def update(message: str) -> None:
        status.start()  # once (rich ignores a second start): no spinner until there is something to say
        status.update(message)

    try:
        yield update
    finally:
        status.stop()  # a status never started is left alone
