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


def install() -> dict[int, object]:
    """Install the handlers (main thread only; elsewhere nothing); returns the dispositions they replaced.
    Installed first thing in `fa_doctor.entry`, before any child can start."""
    previous: dict[int, object] = {}
    try:
        for sig in SIGNALS:
            old = signal.getsignal(sig)
            # A signal the caller ignores (nohup's SIGHUP) stays ignored, here and in a COMMAND exec starts.
            if old is not signal.SIG_IGN and old is not _handler:
                previous[sig] = signal.signal(sig, _handler)
    except ValueError:  # not the main thread
        pass
    return previous


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """The handlers for the duration of a block; what was there before comes back after it."""
    previous = install()
    try:
        yield
    finally:
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old)  # type: ignore[arg-type]
