"""One signal path: SIGINT, SIGTERM and SIGHUP end every child group, then unwind the run as `Interrupted` (a
BaseException: the CLI exits 128+N); `defer()`, `arm()`, `finishing()` set the mode (docs/internals.md, "Signals")."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PYTHON_IGNORES = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ", "SIGXFZ") if hasattr(signal, n))

_DEFER, _RAISE, _EXIT = "defer", "raise", "exit"
_mode = _RAISE
_pending: int | None = None  # a signal recorded while deferred
_ignored_at_start: set[int] = set()  # ignored by our caller (nohup's SIGHUP): stays ignored, here and in COMMAND


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def within(exc: BaseException) -> Interrupted | None:
    """The Interrupted an exception was raised from, if any: Python 3.11 wraps one raised inside a class
    statement's `__set_name__` (a dataclass field, during an import) in a RuntimeError."""
    seen: BaseException | None = exc
    for _ in range(16):  # a bounded walk of the causes
        if seen is None or isinstance(seen, Interrupted):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _end_children(sig: int = signal.SIGTERM, grace: float = 1.0) -> None:
    from fa_doctor.process import proc

    proc.terminate_all(sig, grace=grace)


def _handler(signum: int, frame: FrameType | None) -> None:
    global _pending
    del frame
    if _mode == _DEFER:
        if _pending is None:
            _pending = signum
        return
    if _mode == _EXIT:  # the report is out: end with 128+N at once, nothing more written
        for sig in SIGNALS:
            with contextlib.suppress(ValueError, OSError):
                signal.signal(sig, signal.SIG_IGN)
        with contextlib.suppress(BaseException):
            _end_children(signal.SIGKILL, 0.0)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):  # None too (no stdout): AttributeError
                stream.flush()
        os._exit(128 + signum)
    # Repeats are ignored while this one unwinds, by a Python no-op: with SIG_IGN CPython prints a traceback.
    for sig in SIGNALS:
        signal.signal(sig, _ignore)
    _end_children()
    raise Interrupted(signum)


def _ignore(signum: int, frame: object) -> None:
    del signum, frame


_handled: set[int] = set()  # signals whose SIG_IGN is our own (set while one unwinds), not the caller's


def _install(mode: str) -> dict[int, object]:
    """The handler on each signal the caller does not ignore (main thread only); returns what it replaced."""
    global _mode
    previous: dict[int, object] = {}
    with contextlib.suppress(ValueError):  # not the main thread
        for sig in SIGNALS:
            old = signal.getsignal(sig)
            if old is signal.SIG_IGN and sig not in _handled:
                _ignored_at_start.add(sig)
            elif old is not _handler:
                signal.signal(sig, _handler)
                if old is not None:
                    previous[sig] = old
                    _handled.add(sig)
        _mode = mode
    return previous


def defer() -> None:
    """The program's first instruction: from here on a signal is recorded, to be raised by `arm()`."""
    global _pending
    _pending = None
    _install(_DEFER)


def arm() -> None:
    """The entry's guard is in place: a signal recorded since `defer()` is raised now, later ones where they land."""
    global _mode, _pending
    _mode = _RAISE
    signum, _pending = _pending, None
    if signum is not None:
        for sig in (s for s in SIGNALS if s in _handled):
            signal.signal(sig, _ignore)
        _end_children()
        raise Interrupted(signum)


def finishing() -> None:
    """The report is out: a signal from now on ends the run with 128+N, with nothing more written."""
    global _mode
    _mode = _EXIT


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """The handlers (main thread only) for the duration of a block; what was there before comes back after it."""
    global _mode
    previous = _install(_RAISE)
    try:
        yield
    finally:
        for sig, old in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, old)  # type: ignore[arg-type]
        if previous:
            _mode = _RAISE


def restore_for_exec() -> None:
    """Dispositions for a program fa-doctor execs: the default, except what fa-doctor's caller ignored."""
    for sig in (*_PYTHON_IGNORES, *SIGNALS):
        with contextlib.suppress(ValueError, OSError):
            signal.signal(sig, signal.SIG_IGN if sig in _ignored_at_start else signal.SIG_DFL)


_PAUSE_AT = os.environ.get("FA_DOCTOR_TEST_PAUSE_AT")


def checkpoint(name: str) -> None:
    """A test hook: with FA_DOCTOR_TEST_PAUSE_AT=`name`, write `name` to fd FA_DOCTOR_TEST_PAUSE_FD (default 2),
    wait for one of SIGNALS and deliver it here, as if it had arrived at this very instruction."""
    if name != _PAUSE_AT:
        return
    fd = int(os.environ.get("FA_DOCTOR_TEST_PAUSE_FD", "2"))
    old = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    signum = None
    try:
        os.write(fd, f"{name}\n".encode())
        while signum is None and _pending is None:
            # Polled: a signal another thread took runs its Python handler here, between two waits.
            info = signal.sigtimedwait(SIGNALS, 0.05)
            signum = info.si_signo if info else None
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    if signum is not None:
        signal.raise_signal(signum)
