"""Every check contained, every probe bounded: one failure becomes a finding, not a dead run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from fa_doctor.model.finding import Finding, Remedy, Severity

P = ParamSpec("P")
T = TypeVar("T")
ISSUES = "https://github.com/fa-doctor/fa-doctor/issues"


def crash_finding(name: str, exc: BaseException, others_ran: bool = True) -> Finding:
    """`others_ran`: False when the crashed step is one the other checks needed (the derived facts). A signal
    wrapped in another exception is no crash: it goes on up."""
    import traceback

    from fa_doctor.process.interrupt import within

    if (signalled := within(exc)) is not None:
        raise signalled

    frames = traceback.extract_tb(exc.__traceback__)
    after = "The other checks still ran; this one" if others_ran else "The checks that need it could not run: this"
    where = f"{frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno}" if frames else "?"
    return Finding(
        "internal.check_crashed",
        Severity.FAIL,
        f"fa-doctor's {name} check crashed",
        f"{type(exc).__name__}: {exc} (at {where}). {after} says nothing about your install.",
        {"check": name, "error": f"{type(exc).__name__}: {exc}", "where": where},
        (Remedy("Report it with the output of `fa-doctor check --json`.", (ISSUES,)),),
    )


def probe_failed(exc: BaseException) -> Finding:
    """A probe that every check depends on gave no answer: nothing else could be checked."""
    return Finding(
        "internal.probe_failed",
        Severity.FAIL,
        "fa-doctor could not read the environment",
        f"{exc}. Every check needs what this probe reads, so none of them ran: this says nothing about your install "
        "yet. A file that blocks when read (a FIFO or device named like package metadata) or a very slow file "
        "system can cause it.",
        {"error": f"{type(exc).__name__}: {exc}"},
        (Remedy("Run it again with `--json` and report the output if it persists.", (ISSUES,)),),
    )


def collected(check: Callable[P, Iterator[T]]) -> Callable[P, list[T]]:
    """A check (or recipe) written as a generator, called as one that returns what it yields as a list."""

    @functools.wraps(check)
    def run(*args: P.args, **kwargs: P.kwargs) -> list[T]:
        return list(check(*args, **kwargs))

    return run


def contained(name: str, check: Callable[[], list[Finding]]) -> list[Finding]:
    try:
        return list(check())
    except Exception as exc:
        return [crash_finding(name, exc)]
