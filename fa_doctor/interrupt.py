"""One signal path: SIGINT, SIGTERM and SIGHUP end every child group, then unwind the run as `Interrupted`.

`Interrupted` is a BaseException, so `contained()` checks (which catch Exception) do not swallow it; the CLI
catches it around each command and still emits the result (one JSON document under `--json`), with exit code
130, 143 or 129. Children run in their own sessions, so a terminal's Ctrl-C never reaches them: the handler
ends them itself (`fa_doctor.proc.terminate_all`), before anything else can block.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _end_children(signum: int) -> None:
    from fa_doctor import proc

    proc.terminate_all(signal.SIGTERM, grace=1.0)


def _handler(signum: int, frame: FrameType | None) -> None:
    del frame
    # Ignore repeats while this one unwinds: a second Ctrl-C must not leave children behind half-way.
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    _end_children(signum)
    raise Interrupted(signum)


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """Install the handlers for the duration of a run (main thread only; elsewhere it does nothing)."""
    previous = {}
    try:
        for sig in SIGNALS:
            # A signal the caller ignores (nohup's SIGHUP) stays ignored, here and in a COMMAND that exec starts.
            if signal.getsignal(sig) is not signal.SIG_IGN:
                previous[sig] = signal.signal(sig, _handler)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old)
